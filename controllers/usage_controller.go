package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/quota"
)

// reservationGrace is how long a reservation may wait for its resource: an API server
// reserves before it creates the Kernel (or before a session's controller does), so a young
// reservation without its resource is a start under way, not a leftover.
const reservationGrace = time.Minute

// UsageReconciler keeps the users' ledgers (UserUsages) true: it releases the reservations of
// kernels that are gone and of clusters that are gone or stopped, also those made by an API
// server that stopped between its reservation and its create, and keeps each ledger's summary
// in line with the policies.
type UsageReconciler struct {
	client.Client
	// APIReader confirms around the cache that a resource is gone before its room is freed.
	APIReader client.Reader
	Clock     clock.PassiveClock
	Ledger    *quota.Ledger
}

// +kubebuilder:rbac:groups=nbkube.io,resources=userpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=nbkube.io,resources=userusages,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=nbkube.io,resources=terminals,verbs=get;list;watch

// Reconcile drops the ledger's reservations whose resources are gone and refreshes its
// summary.
func (r *UsageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &nbv1.UserUsage{}
	if err := r.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	var requeue time.Duration
	keep := make([]nbv1.Reservation, 0, len(u.Spec.Reservations))
	for _, res := range u.Spec.Reservations {
		used, err := r.inUse(ctx, r.Client, u.Namespace, &res)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !used {
			if wait := reservationGrace - now.Sub(res.Since.Time); wait > 0 {
				requeue = minPositive(requeue, wait)
				used = true
			} else if used, err = r.inUse(ctx, r.APIReader, u.Namespace, &res); err != nil {
				return ctrl.Result{}, err
			}
		}
		if used {
			keep = append(keep, res)
		} else {
			log.FromContext(ctx).Info("Released a reservation whose resource is gone", "kind", res.Kind, "name", res.Name, "user", u.Spec.User)
		}
	}
	lost, err := r.Ledger.In(u.Namespace).Settle(ctx, u, keep)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case lost:
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// inUse says whether the reservation's resource still takes room: a Kernel or Terminal that
// exists, a Cluster that exists and runs.
func (r *UsageReconciler) inUse(ctx context.Context, reader client.Reader, ns string, res *nbv1.Reservation) (bool, error) {
	key := client.ObjectKey{Namespace: ns, Name: res.Name}
	var err error
	switch res.Kind {
	case nbv1.ReservationKernel:
		err = reader.Get(ctx, key, &nbv1.Kernel{})
	case nbv1.ReservationTerminal:
		err = reader.Get(ctx, key, &nbv1.Terminal{})
	case nbv1.ReservationCluster:
		c := &nbv1.Cluster{}
		if err = reader.Get(ctx, key, c); err == nil && !running(c) {
			return false, nil
		}
	default:
		return false, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// SetupWithManager watches the ledgers, the Kernels and Clusters they count (a change of one
// brings back its owner's ledger) and the policies (which change every summary).
func (r *UsageReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ownersLedger := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		var owner nbv1.Owner
		switch obj := o.(type) {
		case *nbv1.Kernel:
			owner = obj.Spec.Owner
		case *nbv1.Cluster:
			owner = obj.Spec.Owner
		case *nbv1.Terminal:
			owner = obj.Spec.Owner
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: nbv1.UsageName(owner)}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.UserUsage{}).
		// A Kernel takes room from its creation to its deletion; its status changes, which
		// come every few seconds while it runs, do not matter here.
		Watches(&nbv1.Kernel{}, ownersLedger, ctrlbuilder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Watches(&nbv1.Cluster{}, ownersLedger, ctrlbuilder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&nbv1.Terminal{}, ownersLedger, ctrlbuilder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Watches(&nbv1.UserPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allLedgers)).
		Named("usage").
		Complete(r)
}

// allLedgers maps a policy to every ledger of its namespace.
func (r *UsageReconciler) allLedgers(ctx context.Context, o client.Object) []reconcile.Request {
	var list nbv1.UserUsageList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "List user usages")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
