package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/scheme"
)

// fakeClientWith is an in-memory client holding k, with the status subresource. (The
// envtest suite is the real API; these tests need only writeStatus's view of conflicts.)
func fakeClientWith(t *testing.T, k *nbv1.Kernel) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(k).WithStatusSubresource(k).Build()
}

func kernelStatusOf(k *nbv1.Kernel) *nbv1.KernelStatus { return &k.Status }

// A kernel deleted while its reconcile ran has no status left to write: that is no error
// (which the controller would log and retry), and nothing is written.
func TestWriteStatus_OfADeletedKernelIsNoError(t *testing.T) {
	k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	c := fakeClientWith(t, k)
	ctx := context.Background()
	status := func(k *nbv1.Kernel) *nbv1.KernelStatus { return &k.Status }
	st := nbv1.KernelStatus{PodIP: "10.0.0.9"}
	if res, _, err := writeStatus(ctx, c, k.DeepCopy(), status, st); err != nil || res != statusWritten {
		t.Fatalf("writeStatus of a live kernel: %v, error %v", res, err)
	}
	if err := c.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	st.PodIP = "10.0.0.10"
	if res, _, err := writeStatus(ctx, c, k, status, st); err != nil || res == statusWritten {
		t.Errorf("writeStatus of a deleted kernel: %v, error %v", res, err)
	}
}

// A write against a version of the object that is no longer the newest is lost, not an error:
// the caller decides what to do (see writeStatus). An unchanged status is not written at all.
func TestWriteStatus_SaysWhetherItWroteOrLost(t *testing.T) {
	k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k1"}}
	c := fakeClientWith(t, k)
	ctx := context.Background()
	stale := &nbv1.Kernel{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(k), stale); err != nil {
		t.Fatal(err)
	}
	if res, _, err := writeStatus(ctx, c, stale.DeepCopy(), kernelStatusOf, nbv1.KernelStatus{PodIP: "10.0.0.1"}); err != nil || res != statusWritten {
		t.Fatalf("first write: %v, error %v", res, err)
	}
	if res, _, err := writeStatus(ctx, c, stale, kernelStatusOf, nbv1.KernelStatus{PodIP: "10.0.0.2"}); err != nil || res != statusLost {
		t.Errorf("write onto a stale copy: %v, error %v; want lost", res, err)
	}
	if res, _, err := writeStatus(ctx, c, stale, kernelStatusOf, stale.Status); err != nil || res != statusUnchanged {
		t.Errorf("write of the status the object has: %v, error %v; want unchanged", res, err)
	}
}
