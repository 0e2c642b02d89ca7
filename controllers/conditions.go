package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// setCondition sets a condition stamped with now; the transition time only moves when the
// status does (meta.SetStatusCondition keeps it otherwise).
func setCondition(conds *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, generation int64, now metav1.Time) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(message, 1024),
		ObservedGeneration: generation, LastTransitionTime: now,
	})
}

// truncate keeps condition messages within what the API accepts (32 KiB) and what a
// `kubectl describe` reader wants.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// writeStatus writes desired as obj's status unless that is what obj already has, and says
// whether it wrote. A conflict is not an error: the write that won brings the object back
// through the watch. Nor is an object deleted meanwhile: it has no status left to write.
func writeStatus[T client.Object, S any](ctx context.Context, c client.Client, obj T, status func(T) *S, desired S) (bool, error) {
	if equality.Semantic.DeepEqual(*status(obj), desired) {
		return false, nil
	}
	obj = obj.DeepCopyObject().(T)
	*status(obj) = desired
	if err := c.Status().Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("update status of %T %s: %w", obj, obj.GetName(), err)
	}
	return true, nil
}
