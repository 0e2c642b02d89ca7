package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// problem is why a resource cannot be ready.
type problem struct {
	reason  nbv1.ConditionReason
	message string
	// fatal problems need a change before the resource can run: the Failed condition says so.
	fatal bool
}

// setCondition sets a condition stamped with now; the transition time only moves when the
// status does (meta.SetStatusCondition keeps it otherwise).
func setCondition(conds *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason nbv1.ConditionReason, message string, generation int64, now metav1.Time) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: string(reason), Message: truncate(message, 1024),
		ObservedGeneration: generation, LastTransitionTime: now,
	})
}

// setReconcileError is what a failed step does to a status: Ready is False with
// ReasonReconcileError and the error as its message. Nothing else changes: what the failed
// step and the ones after it would have observed is unknown, and a status made up without it
// would claim a state (a running kernel "starting", a cluster's engines gone).
func setReconcileError(conds *[]metav1.Condition, err error, generation int64, now metav1.Time) {
	setCondition(conds, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonReconcileError, err.Error(), generation, now)
}

// truncate keeps condition messages within what the API accepts (32 KiB) and what a
// `kubectl describe` reader wants.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// statusWrite is what writeStatus did.
type statusWrite int

const (
	// statusUnchanged: the object already had the status.
	statusUnchanged statusWrite = iota
	// statusWritten: the status was written.
	statusWritten
	// statusLost: the status differed, but the write lost to a newer version of the object
	// (or the object is gone).
	statusLost
)

// writeStatus writes desired as obj's status unless that is what obj already has. A write
// lost to a newer version of the object (a conflict) is no error: writeStatus says so
// (statusLost) and the caller decides. The Session, Cluster and KernelSpec controllers watch
// their kinds' status updates, so the newer version brings the object back to be
// reconciled again. (The Kernel controller applies its status instead, as one of several
// writers: see applyKernelStatus.) An object deleted meanwhile is no error either: it has
// no status left to write.
//
// written is the object as the write left it (its new resourceVersion), when it wrote.
func writeStatus[T client.Object, S any](ctx context.Context, c client.Client, obj T, status func(T) *S, desired S) (res statusWrite, written T, err error) {
	if equality.Semantic.DeepEqual(*status(obj), desired) {
		return statusUnchanged, written, nil
	}
	obj = obj.DeepCopyObject().(T)
	*status(obj) = desired
	if err := c.Status().Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return statusLost, written, nil
		}
		return statusUnchanged, written, fmt.Errorf("update status of %T %s: %w", obj, obj.GetName(), err)
	}
	return statusWritten, obj, nil
}
