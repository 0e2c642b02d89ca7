package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/crds"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestManager_TwoReplicasElectOneLeaderThatReconciles runs `nbkube manager` as it runs in a
// cluster (out of it, with a kubeconfig): two replicas, leader election, probes, metrics.
func TestManager_TwoReplicasElectOneLeaderThatReconciles(t *testing.T) {
	cp := testenv.ControlPlane(t, false)
	ctx := context.Background()
	if err := crds.Install(ctx, cp.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	type replica struct{ probes, metrics string }
	var replicas []replica
	for i := range 2 {
		r := replica{probes: testenv.FreeAddr(t), metrics: testenv.FreeAddr(t)}
		cmd := exec.Command(nbkubeBin, "manager", "--leader-elect", "--leader-election-namespace=default",
			"--health-probe-bind-address="+r.probes, "--metrics-bind-address="+r.metrics)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath())
		startServer(t, fmt.Sprintf("manager-%d", i), cmd, nil)
		replicas = append(replicas, r)
	}

	hc := &http.Client{Timeout: 2 * time.Second}
	for _, r := range replicas {
		testenv.Eventually(t, "healthz of "+r.probes, 30*time.Second, func() error {
			resp, err := hc.Get("http://" + r.probes + "/healthz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	}

	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	testenv.Eventually(t, "leader lease", 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "nbkube-manager.nbkube.io"}, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		return nil
	})

	ks := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "python3"}, Spec: nbv1.KernelSpecSpec{
		DisplayName: "Python 3", Language: "python", Image: "example.com/py:1",
		Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}}
	if err := c.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "kernel spec reconciled by the leader", 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(ks.Status.Conditions, nbv1.ConditionReady) {
			return fmt.Errorf("conditions %v", ks.Status.Conditions)
		}
		return nil
	})

	// The metrics endpoint serves HTTPS and only to authenticated, authorized callers.
	// The server's certificate is self-signed; what is checked here is that it refuses.
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test checks refusal, not identity
	}}
	resp, err := insecure.Get("https://" + replicas[0].metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous GET /metrics: %d, want 401 or 403", resp.StatusCode)
	}
}
