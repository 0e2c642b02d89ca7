package scheme

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func TestNew_KnowsClientGoAndNbkubeKinds(t *testing.T) {
	s := New()
	for _, obj := range []runtime.Object{&corev1.Pod{}, &corev1.Secret{}, &coordinationv1.Lease{},
		&nbv1.Kernel{}, &nbv1.Session{}, &nbv1.Cluster{}, &nbv1.KernelSpec{}} {
		if _, _, err := s.ObjectKinds(obj); err != nil {
			t.Errorf("%T: %v", obj, err)
		}
	}
	if New() == s {
		t.Error("New returned the same scheme twice")
	}
}
