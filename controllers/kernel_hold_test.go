package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func holdStatus(ready metav1.ConditionStatus, reason nbv1.ConditionReason, state nbv1.ExecutionState, podIP string) nbv1.KernelStatus {
	st := nbv1.KernelStatus{ExecutionState: state, PodIP: podIP}
	t0 := metav1.NewTime(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	setCondition(&st.Conditions, nbv1.ConditionReady, ready, reason, "message of "+string(reason), 1, t0)
	return st
}

func TestRoutineStep(t *testing.T) {
	pending := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodPending, nbv1.ExecutionStateStarting, "")
	notReady := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodNotReady, nbv1.ExecutionStateStarting, "")
	ready := holdStatus(metav1.ConditionTrue, nbv1.ReasonAgentReady, nbv1.ExecutionStateIdle, "10.0.0.7")
	failed := holdStatus(metav1.ConditionFalse, "ImagePullBackOff", nbv1.ExecutionStateDead, "")
	setCondition(&failed.Conditions, nbv1.ConditionFailed, metav1.ConditionTrue, "ImagePullBackOff", "back-off", 1, metav1.Now())
	withAddress := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodNotReady, nbv1.ExecutionStateStarting, "10.0.0.7")
	terminating := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodTerminating, nbv1.ExecutionStateStarting, "")
	reconcileErr := holdStatus(metav1.ConditionFalse, nbv1.ReasonReconcileError, nbv1.ExecutionStateStarting, "")
	for _, tc := range []struct {
		name             string
		current, desired nbv1.KernelStatus
		want             bool
	}{
		{"pending to not ready", pending, notReady, true},
		{"no change", pending, pending, false},
		{"the first status", nbv1.KernelStatus{}, pending, false},
		{"ready", notReady, ready, false},
		{"failed", pending, failed, false},
		{"the address appears", notReady, withAddress, false},
		{"terminating", pending, terminating, false},
		{"from ready", ready, notReady, false},
		{"a reconcile error", pending, reconcileErr, false},
		{"over a reconcile error", reconcileErr, notReady, false},
	} {
		if got := routineStep(tc.current, tc.desired); got != tc.want {
			t.Errorf("%s: routineStep = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHold_WaitAtMostTheWindowFromTheFirstHeldStep(t *testing.T) {
	pending := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodPending, nbv1.ExecutionStateStarting, "")
	creating := holdStatus(metav1.ConditionFalse, "ContainerCreating", nbv1.ExecutionStateStarting, "")
	notReady := holdStatus(metav1.ConditionFalse, nbv1.ReasonPodNotReady, nbv1.ExecutionStateStarting, "")
	ready := holdStatus(metav1.ConditionTrue, nbv1.ReasonAgentReady, nbv1.ExecutionStateIdle, "10.0.0.7")
	key := types.NamespacedName{Namespace: "ns", Name: "k"}
	t0 := time.Unix(1000, 0)
	var h kernelMemory
	if got := h.hold(key, pending, creating, t0); got != holdWindow {
		t.Fatalf("first routine step waits %v, want %v", got, holdWindow)
	}
	if got := h.hold(key, pending, notReady, t0.Add(1500*time.Millisecond)); got != 500*time.Millisecond {
		t.Fatalf("a later step waits %v, want what is left of the window", got)
	}
	if got := h.hold(key, pending, notReady, t0.Add(holdWindow)); got != 0 {
		t.Fatalf("a step held for the whole window waits %v more, want 0 (written)", got)
	}
	// Written: the next routine step is held anew.
	if got := h.hold(key, notReady, creating, t0.Add(3*time.Second)); got != holdWindow {
		t.Fatalf("a step after a write waits %v, want %v", got, holdWindow)
	}
	// Readiness is written at once and ends the hold.
	if got := h.hold(key, notReady, ready, t0.Add(3100*time.Millisecond)); got != 0 {
		t.Fatalf("readiness waits %v, want 0", got)
	}
	if got := h.hold(key, pending, notReady, t0.Add(10*time.Second)); got != holdWindow {
		t.Fatalf("after readiness a step waits %v, want a new window", got)
	}
	h.forget(key)
	if len(h.kernels) != 0 {
		t.Fatalf("forget left %v", h.kernels)
	}
}
