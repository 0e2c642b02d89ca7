package controllers

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// Everything the controller keeps of a kernel goes with one forget: the start it times, its
// share of the replay gauge, a held write, its own last write and its place among the
// running kernels. A look that finds nothing keeps nothing.
func TestKernelMemory_ForgetDropsTheWholeRecord(t *testing.T) {
	var m kernelMemory
	key := types.NamespacedName{Namespace: "ns", Name: "k"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k", UID: "u", ResourceVersion: "1"},
		Spec: nbv1.KernelParameters{KernelSpec: "memory-spec"}}
	m.catchUp(key, k)
	if len(m.kernels) != 0 {
		t.Fatalf("a look at an unknown kernel kept %v", m.kernels)
	}

	m.observeStart(k, &kernelObservation{pod: &corev1.Pod{}}, &nbv1.KernelStatus{}, time.Now(), time.Now())
	m.setReplay(key, "memory-spec", 400)
	m.setReplay(other, "memory-spec", 20)
	pending := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodPending, nbv1.ExecutionStateStarting, "")
	creating := holdStatus(metav1.ConditionFalse, "ContainerCreating", nbv1.ExecutionStateStarting, "")
	if m.hold(key, pending, creating, time.Now()) == 0 {
		t.Fatal("a routine step was not held")
	}
	m.wrote(key, "1", &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2"}})
	if m.markRunning(key, true) != 1 || m.markRunning(other, true) != 2 {
		t.Fatal("the count of running kernels is off")
	}
	rec := *m.kernels[key]
	if rec.start == nil || rec.replay == nil || rec.heldSince.IsZero() || rec.own == nil || !rec.running || m.starts != 1 {
		t.Fatalf("record %+v, %d starts", rec, m.starts)
	}

	m.forget(key)
	if _, ok := m.kernels[key]; ok || m.starts != 0 || m.running != 1 {
		t.Errorf("after forget: %v, %d starts, %d running", m.kernels, m.starts, m.running)
	}
	var g dto.Metric
	if err := kernelReplayBytes.WithLabelValues("memory-spec").Write(&g); err != nil {
		t.Fatal(err)
	}
	if v := g.GetGauge().GetValue(); v != 20 {
		t.Errorf("replay gauge after forget %v, want the other kernel's 20", v)
	}
}
