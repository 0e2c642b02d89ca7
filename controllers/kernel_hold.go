package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// holdWindow is how long a routine step of a kernel's start may wait to be written: a local
// kernel goes from created to ready in well under it, so its start writes its status twice
// (starting, then ready with its address) rather than once per step of the pod.
const holdWindow = 2 * time.Second

// hold tells how long the write of desired over current may wait: zero to write it now. Only
// a routine step waits: the kernel was already not ready and still is, for another reason of
// a start going as it should, and nothing else changed. Each wait counts from the first
// change held (kernelRecord.heldSince), so a step is never more than holdWindow late.
func (m *kernelMemory) hold(key types.NamespacedName, current, desired nbv1.KernelStatus, now time.Time) (wait time.Duration) {
	routine := routineStep(current, desired)
	m.with(key, func(rec *kernelRecord) {
		if !routine {
			rec.heldSince = time.Time{}
			return
		}
		if rec.heldSince.IsZero() {
			rec.heldSince = now
		}
		if wait = holdWindow - now.Sub(rec.heldSince); wait <= 0 {
			rec.heldSince, wait = time.Time{}, 0
		}
	})
	return wait
}

// routineStep tells a change of the Ready=False condition's reason alone, between two states
// of a start going as it should: pending, container creating, agent not ready yet. A failure,
// a reconcile error (Ready's reason too, see setReconcileError) or the end of one is news.
func routineStep(current, desired nbv1.KernelStatus) bool {
	if equality.Semantic.DeepEqual(current, desired) {
		return false
	}
	for _, st := range []nbv1.KernelStatus{current, desired} {
		ready := meta.FindStatusCondition(st.Conditions, nbv1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || meta.FindStatusCondition(st.Conditions, nbv1.ConditionFailed) != nil {
			return false
		}
		if r := nbv1.ConditionReason(ready.Reason); r == nbv1.ReasonPodTerminating || r == nbv1.ReasonReconcileError {
			return false
		}
	}
	a, b := *current.DeepCopy(), *desired.DeepCopy()
	for _, st := range []*nbv1.KernelStatus{&a, &b} {
		c := meta.FindStatusCondition(st.Conditions, nbv1.ConditionReady)
		c.Reason, c.Message = "", ""
	}
	return equality.Semantic.DeepEqual(a, b)
}
