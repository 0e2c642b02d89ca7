package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// PodEventReconciler re-emits the events of kernel, cluster and terminal pods (scheduling,
// image pulls, probe failures, kills) onto their Kernels, Clusters and Terminals, so that
// `kubectl describe kernel` (or cluster, or terminal) tells the whole story without hunting
// for the pod.
type PodEventReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Since is when this process started: older events were re-emitted by a previous run.
	Since metav1.Time
}

// +kubebuilder:rbac:groups="",resources=events,verbs=get;list;watch

// Reconcile copies one pod event onto the pod's Kernel or Cluster.
func (r *PodEventReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ev := &corev1.Event{}
	if err := r.Get(ctx, req.NamespacedName, ev); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if eventTime(ev).Before(&r.Since) {
		return ctrl.Result{}, nil
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name}, pod); err != nil {
		// Not a pod of ours (the cache holds only nbkube's pods), or gone already.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pod.UID != ev.InvolvedObject.UID {
		return ctrl.Result{}, nil
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.APIVersion != nbv1.GroupVersion.String() {
		return ctrl.Result{}, nil
	}
	var owner client.Object
	switch ref.Kind {
	case "Kernel":
		owner = &nbv1.Kernel{}
	case "Cluster":
		owner = &nbv1.Cluster{}
	case "Terminal":
		owner = &nbv1.Terminal{}
	default:
		return ctrl.Result{}, nil
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, owner); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if owner.GetUID() != ref.UID {
		return ctrl.Result{}, nil
	}
	// The pod's reason is kept, so that `kubectl get events` reads the same on the owner.
	recordEvent(r.Recorder, owner, pod, ev.Type, nbv1.EventReason(ev.Reason), "PodEvent", "pod %s: %s", pod.Name, truncate(ev.Message, 900))
	return ctrl.Result{}, nil
}

func eventTime(ev *corev1.Event) *metav1.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return &ev.LastTimestamp
	case !ev.EventTime.IsZero():
		t := metav1.NewTime(ev.EventTime.Time)
		return &t
	default:
		return &ev.FirstTimestamp
	}
}

// routine tells the normal events every pod has (scheduled, each container created and
// started) from those worth a Kernel's own event: pulls, probe failures, kills, warnings.
// The Kernel's status says as much as the routine ones, and copying them would add several
// API writes to every kernel start.
func routine(ev *corev1.Event) bool {
	if ev.Type != corev1.EventTypeNormal {
		return false
	}
	switch ev.Reason {
	case "Scheduled", "Created", "Started":
		return true
	}
	return false
}

// SetupWithManager watches pod events as they are created: a repeated event only bumps its
// count, and one copy on the Kernel says enough.
func (r *PodEventReconciler) SetupWithManager(mgr ctrl.Manager, clk clock.PassiveClock) error {
	if r.Since.IsZero() {
		r.Since = metav1.NewTime(clk.Now())
	}
	onCreate := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			ev, ok := e.Object.(*corev1.Event)
			return ok && !routine(ev)
		},
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Event{}, builder.WithPredicates(onCreate)).
		Named("podevents").
		Complete(r)
}
