package controllers

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// recordEvent records an event on regarding (related is the object it concerns, or nil).
// Every event of the controllers goes through it, so that its reason is one of
// nbv1.EventReason's: a reason from elsewhere (a pod's event, a condition's reason) is
// converted where it is passed, visibly. TestEvents_RecordedThroughRecordEventWithNamedReasons
// keeps it so.
func recordEvent(rec events.EventRecorder, regarding, related runtime.Object, eventType string, reason nbv1.EventReason, action, note string, args ...any) {
	rec.Eventf(regarding, related, eventType, string(reason), action, note, args...)
}
