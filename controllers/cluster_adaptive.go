package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/quota"
)

// adaptiveScaleDownDelay is how long an adaptive cluster's scheduler must keep wanting fewer
// workers before they go: a lull between two computations of a notebook should not cost
// the workers (and the results they hold) that the next one needs. Dask's own Adaptive
// waits a few of its intervals likewise; more workers come at once.
const adaptiveScaleDownDelay = 20 * time.Second

// adaptEngines sets an adaptive dask cluster's engines (minEngines and maxEngines set) from
// its scheduler's recommendation, Dask's adaptive_target, as dask-kubernetes' autoscaler
// reads it: within [minEngines, maxEngines], a growth only within the owner's engines limit,
// a shrink only once the scheduler has wanted fewer for adaptiveScaleDownDelay. The new
// count is written to spec.engines, which the next step then runs, retiring workers through
// the scheduler as any scale-down does.
func (r *ClusterReconciler) adaptEngines(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	if !c.Adaptive() || !running(c) || obs.dask == nil || obs.controller == nil {
		r.lowSince.Delete(c.UID)
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, hubQueryTimeout)
	target, err := r.Dask.AdaptiveTarget(actx, r.schedulerBase(c, obs.controller))
	cancel()
	if err != nil {
		log.FromContext(ctx).V(1).Info("Asking the scheduler's adaptive target", "error", err.Error())
		return nil
	}
	lo, hi := ptr.Deref(c.Spec.MinEngines, 0), *c.Spec.MaxEngines
	want := int32(min(max(target, int(lo)), int(hi)))
	now := r.Clock.Now()
	switch {
	case want == c.Spec.Engines:
		r.lowSince.Delete(c.UID)
		return nil
	case want < c.Spec.Engines:
		since, _ := r.lowSince.LoadOrStore(c.UID, now)
		if wait := adaptiveScaleDownDelay - now.Sub(since.(time.Time)); wait > 0 {
			obs.requeueAfter(wait)
			return nil
		}
	default:
		if r.Quota != nil {
			room := quota.ClusterRoom(c.Name, want, c.Spec.EngineResources)
			_, _, err := r.Quota.In(c.Namespace).Reserve(ctx, quota.Request{Owner: string(c.Spec.Owner), Reservation: room})
			var ex *quota.Exceeded
			if errors.As(err, &ex) {
				recordEvent(r.Recorder, c, nil, corev1.EventTypeWarning, nbv1.EventAdapted, "Scale",
					"The scheduler recommends %d workers; %d run, held to the owner's limits: %v", target, c.Spec.Engines, ex)
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	r.lowSince.Delete(c.UID)
	from := c.Spec.Engines
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Engines = want
	if err := r.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("adapt the cluster's engines: %w", err)
	}
	recordEvent(r.Recorder, c, nil, corev1.EventTypeNormal, nbv1.EventAdapted, "Scale",
		"Set engines from %d to %d: the scheduler recommends %d (minEngines %d, maxEngines %d)", from, want, target, lo, hi)
	return nil
}
