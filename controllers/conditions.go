package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
