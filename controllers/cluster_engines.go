package controllers

import (
	"cmp"
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/ipcluster"
	"github.com/nbkube/nbkube/internal/quota"
)

// reconcileEngines runs spec.engines engine pods for the current ipcontroller: it replaces
// engines of an earlier one and failed engines, and when there are too many it deletes the
// engines that are not registered, then idle ones, then the least busy.
func (r *ClusterReconciler) reconcileEngines(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	live, finished, err := r.clusterPods(ctx, c, builder.EngineComponent(c))
	if err != nil {
		return err
	}
	now := r.Clock.Now()
	// Failed engines wait a little before they are replaced, and count as engines meanwhile.
	waiting := 0
	for _, p := range finished {
		if wait := clusterReplaceDelay - now.Sub(finishedAt(p)); running(c) && wait > 0 {
			obs.requeueAfter(wait)
			waiting++
			continue
		}
		if err := deletePod(ctx, r.Client, p); err != nil {
			return err
		}
		if running(c) {
			reason, msg := terminatedReason(p)
			recordEvent(r.Recorder, c, p, corev1.EventTypeWarning, nbv1.EventEngineReplaced, "Replace", "Replacing %s pod %s (%s: %s)", engineNoun(c), p.Name, reason, msg)
		}
	}
	var current []*corev1.Pod
	for _, p := range live {
		if running(c) && obs.controller != nil && p.Annotations[builder.AnnotationControllerPod] == string(obs.controller.UID) {
			current = append(current, p)
			continue
		}
		// Engines of a stopped cluster, or of an ipcontroller that is gone: they never
		// register with a new one.
		if err := deletePod(ctx, r.Client, p); err != nil {
			return err
		}
	}
	obs.engines = current
	if !running(c) && r.Quota != nil {
		// A stopped cluster's engines take no room (the API server releases it when it stops
		// one; this covers a cluster stopped with kubectl).
		if err := r.Quota.In(c.Namespace).Release(ctx, string(c.Spec.Owner), nbv1.ReservationCluster, c.Name); err != nil {
			return err
		}
	}
	if !running(c) || obs.controller == nil {
		return nil
	}
	if obs.hub == nil {
		// Until the hub answers, none is removed: it cannot say which are busy.
		obs.requeueAfter(clusterStartingPoll)
		if !r.enginesBeforeHub(c, obs.controller) {
			// Engines start once the ipcontroller answers, so that they register at the first try.
			return nil
		}
	}
	want := int(c.Spec.Engines)
	if obs.invalid = builder.CheckEngineTemplate(c.Spec.EngineTemplate, r.Options.ContentsClaim); len(obs.invalid) > 0 {
		// No engine starts from a template that would override nbkube's parts of its pod;
		// the schema refuses most such templates, this guards those it never saw.
		want = len(current)
	}
	if err := r.reserveEngines(ctx, c, want > len(current)+waiting, obs); err != nil {
		return err
	}
	if pending := want - len(current) - waiting; pending > 0 && obs.overQuota == nil {
		for range pending {
			p := builder.ClusterEnginePodOf(c, r.Options, obs.controller)
			if err := r.createPod(ctx, p, obs); err != nil {
				return err
			}
			if obs.refused != nil {
				break
			}
			obs.engines = append(obs.engines, p)
		}
		if obs.refused == nil {
			recordEvent(r.Recorder, c, nil, corev1.EventTypeNormal, nbv1.EventScaledEngines, "Scale", "Started %d %s (%d wanted)", pending, enginesNoun(c), want)
		}
	}
	if len(current) > want && obs.hub != nil {
		victims := retirementOrder(current, obs.hub)[:len(current)-want]
		r.retireWorkers(ctx, c, obs, victims)
		for _, p := range victims {
			if err := deletePod(ctx, r.Client, p); err != nil {
				return err
			}
		}
		obs.engines = slices.DeleteFunc(obs.engines, func(p *corev1.Pod) bool { return slices.Contains(victims, p) })
		recordEvent(r.Recorder, c, nil, corev1.EventTypeNormal, nbv1.EventScaledEngines, "Scale", "Stopped %d %s (%d wanted)", len(victims), enginesNoun(c), want)
	}
	registered := 0
	for _, p := range obs.engines {
		if _, ok := engineOf(obs.hub, p.Name); ok {
			registered++
		}
	}
	if registered < len(obs.engines) {
		obs.requeueAfter(clusterStartingPoll)
	}
	obs.requeueAfter(r.pollInterval())
	return nil
}

// enginesBeforeHub says whether the engines of c may start before its controller pod answers:
// a dask cluster's workers do once its scheduler's pod runs, where they reach the scheduler
// through its Service (an address that does not change). They retry until the scheduler
// listens, so its start (a second or two of Python's imports) and theirs overlap instead of
// following each other; its pod must run first, so that workers do not give up
// (--death-timeout) on a scheduler that waits for a node or its image. An ipengine needs
// the connection file that the ipcontroller writes, and a worker addressed by its
// scheduler's pod IP (the local node) the IP.
func (r *ClusterReconciler) enginesBeforeHub(c *nbv1.Cluster, controller *corev1.Pod) bool {
	return c.IsDask() && !r.Options.ClusterControllerByPodIP && controller.Status.Phase == corev1.PodRunning
}

// reserveEngines holds the cluster's engines to its owner's limits: the owner's ledger must
// hold room for them (the API server reserves it when it starts a cluster; a cluster started
// or scaled with kubectl reserves it here) before more engines start. Engines already
// running are recorded, never refused.
func (r *ClusterReconciler) reserveEngines(ctx context.Context, c *nbv1.Cluster, grows bool, obs *clusterObservation) error {
	if r.Quota == nil {
		return nil
	}
	room := quota.ClusterRoom(c.Name, c.Spec.Engines, c.Spec.EngineResources)
	_, _, err := r.Quota.In(c.Namespace).Reserve(ctx, quota.Request{Owner: string(c.Spec.Owner), Reservation: room, Record: !grows})
	var ex *quota.Exceeded
	if errors.As(err, &ex) {
		obs.overQuota = ex
		obs.requeueAfter(quotaRecheck)
		return nil
	}
	return err
}

// retirementOrder sorts engine pods in the order they should go when there are too many:
// those not registered with the hub (starting, or lost) first, newest first; then registered
// ones by outstanding tasks, fewest first, so that idle engines go before busy ones.
func retirementOrder(pods []*corev1.Pod, hub *ipcluster.HubStatus) []*corev1.Pod {
	type ranked struct {
		pod        *corev1.Pod
		registered bool
		load       int
	}
	rs := make([]ranked, len(pods))
	for i, p := range pods {
		e, ok := engineOf(hub, p.Name)
		rs[i] = ranked{pod: p, registered: ok, load: e.Queue + e.Tasks}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if a.registered != b.registered {
			if !a.registered {
				return -1
			}
			return 1
		}
		if !a.registered {
			return b.pod.CreationTimestamp.Compare(a.pod.CreationTimestamp.Time)
		}
		return cmp.Compare(a.load, b.load)
	})
	out := make([]*corev1.Pod, len(rs))
	for i, r := range rs {
		out[i] = r.pod
	}
	return out
}

// engineOf is the hub's record of the engine that registered under a pod's name.
func engineOf(hub *ipcluster.HubStatus, pod string) (ipcluster.Engine, bool) {
	if hub == nil {
		return ipcluster.Engine{}, false
	}
	for _, e := range hub.Engines {
		if e.UUID == pod {
			return e, true
		}
	}
	return ipcluster.Engine{}, false
}
