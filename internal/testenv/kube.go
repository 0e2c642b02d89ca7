package testenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/crds"
	"github.com/nbkube/nbkube/internal/scheme"
)

// KubeClient starts a real kube-apiserver (without controllers) with nbkube's CRDs for the
// test and returns a client of it that knows nbkube's kinds.
func KubeClient(t *testing.T) client.Client {
	t.Helper()
	c, _ := KubeClientConfig(t)
	return c
}

// KubeClientConfig is KubeClient with the cluster-admin configuration it uses, for clients of
// other kinds.
func KubeClientConfig(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	cfg := ControlPlane(t, false).RESTConfig()
	if err := crds.Install(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// Namespace creates a namespace of its own for a test and returns its name.
func Namespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
