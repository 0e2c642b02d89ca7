//go:build e2e

package e2e

import (
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// The chart's release is a deployment the Jupyter client suite drives (jupyterClientSuite).

func (e *helmEnv) kube() client.Client { return e.client }

func (e *helmEnv) kernelNamespace() string { return helmNamespace }

func (e *helmEnv) readyKernel(t *testing.T, name string) *nbv1.Kernel {
	t.Helper()
	return waitKernelReady(t, e.client, helmNamespace, name)
}

// apiServers are clients of each ready API server replica at its pod's address.
func (e *helmEnv) apiServers(t testing.TB) []*jupyterAPI {
	t.Helper()
	var pods corev1.PodList
	if err := e.client.List(t.Context(), &pods, client.InNamespace(helmNamespace), client.MatchingLabels{nbv1.LabelComponent: "apiserver"}); err != nil {
		t.Fatal(err)
	}
	token := e.token(t)
	var replicas []*jupyterAPI
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.PodIP != "" && p.DeletionTimestamp == nil && podReady(p) {
			replicas = append(replicas, newJupyterAPI("http://"+net.JoinHostPort(p.Status.PodIP, "8888")+"/", token, 5*time.Minute))
		}
	}
	if len(replicas) == 0 {
		t.Fatal("no API server pod is ready")
	}
	return replicas
}
