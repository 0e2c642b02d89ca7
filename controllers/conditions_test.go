package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// A kernel deleted while its reconcile ran has no status left to write: that is no error
// (which the controller would log and retry), and nothing is written.
func TestWriteStatus_OfADeletedKernelIsNoError(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := nbv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(k).WithStatusSubresource(k).Build()
	ctx := context.Background()
	status := func(k *nbv1.Kernel) *nbv1.KernelStatus { return &k.Status }
	st := nbv1.KernelStatus{PodIP: "10.0.0.9"}
	if res, err := writeStatus(ctx, c, k.DeepCopy(), status, st); err != nil || res != statusWritten {
		t.Fatalf("writeStatus of a live kernel: %v, error %v", res, err)
	}
	if err := c.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	st.PodIP = "10.0.0.10"
	if res, err := writeStatus(ctx, c, k, status, st); err != nil || res == statusWritten {
		t.Errorf("writeStatus of a deleted kernel: %v, error %v", res, err)
	}
}
