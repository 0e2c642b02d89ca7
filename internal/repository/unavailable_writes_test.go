package repository

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The writes besides starts (deleting a kernel or a session, asking for a dead kernel's
// restart, changing a session, starting or stopping a cluster) are bounded as starts are: with the real kube-apiserver cut
// off as a stopped process is, each is refused with ErrUnavailable within APITimeout rather
// than held for as long as its client waits.
func TestWrites_ControlPlaneThatDoesNotAnswerIs503Quickly(t *testing.T) {
	c, cfg := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	for _, name := range []string{"running", "dead"} {
		if err := c.Create(t.Context(), &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3"}}); err != nil {
			t.Fatal(err)
		}
	}
	dead := &nbv1.Kernel{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "dead"}, dead); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&dead.Status.Conditions, metav1.Condition{Type: nbv1.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: "PodFailed", Message: "the kernel's pod failed"})
	if err := c.Status().Update(t.Context(), dead); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s-change", "s-delete"} {
		if err := c.Create(t.Context(), &nbv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: nbv1.SessionParameters{Owner: "ann", Path: name + ".ipynb", Kernel: nbv1.SessionKernel{KernelSpec: "python3"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, state := range map[string]nbv1.ClusterState{"c-stopped": nbv1.ClusterStopped, "c-running": nbv1.ClusterRunning} {
		if err := c.Create(t.Context(), &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: nbv1.ClusterParameters{Owner: "ann", State: state}}); err != nil {
			t.Fatal(err)
		}
	}
	k, sessions, pc, proxy := behindFreezableProxy(t, c, cfg, ns)
	clusters := &Clusters{Reader: c, Writer: pc, Namespace: ns, APITimeout: apiTimeout}

	proxy.freeze()
	defer proxy.thaw()
	admin := identity.User{Name: "admin", Admin: true}
	renamed := "renamed.ipynb"
	for _, write := range []struct {
		name string
		run  func() error
	}{
		{"DELETE kernel", func() error { return k.DeleteKernel(t.Context(), admin, "running") }},
		{"restart of a dead kernel", func() error {
			_, err := k.RestartKernel(t.Context(), admin, "dead")
			return err
		}},
		{"PATCH session", func() error {
			_, err := sessions.UpdateSession(t.Context(), admin, "s-change", SessionChange{Path: &renamed})
			return err
		}},
		{"DELETE session", func() error { return sessions.DeleteSession(t.Context(), admin, "s-delete") }},
		{"cluster start", func() error {
			_, err := clusters.StartCluster(t.Context(), admin, "c-stopped", nil)
			return err
		}},
		{"cluster stop", func() error {
			_, err := clusters.StopCluster(t.Context(), admin, "c-running")
			return err
		}},
	} {
		refusedQuickly(t, write.name, write.run)
	}
}
