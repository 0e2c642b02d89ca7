package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// ApplyCulledForTest sets k's Culled condition as a cull does, without deleting it.
func (c *Culler) ApplyCulledForTest(ctx context.Context, k *nbv1.Kernel, reason nbv1.ConditionReason, message string, now time.Time) error {
	return c.applyCulled(ctx, k, verdict{reason, message}, now)
}

// RecordRoomForTest records k, which has pod, in its owner's ledger as a reconcile does.
func (r *KernelReconciler) RecordRoomForTest(ctx context.Context, k *nbv1.Kernel, pod *corev1.Pod) {
	r.recordRoom(ctx, k, pod)
}
