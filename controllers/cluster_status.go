package controllers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

// clusterObservation is what the reconcile steps found and did.
type clusterObservation struct {
	key        []byte
	controller *corev1.Pod   // the live ipcontroller pod, if any
	engines    []*corev1.Pod // live engine pods of the current controller
	failed     *corev1.Pod   // a controller pod that failed and awaits replacement
	hub        *ipcluster.HubStatus
	hubErr     error
	// dask is what a dask cluster's scheduler said, of which hub is the engines' part.
	dask *daskcluster.Status
	// refused is a pod creation the API server refused (quota, admission): it does not get
	// better by retrying at once, and the status says why.
	refused error
	// overQuota: more engines would take the owner past a limit; none was started.
	overQuota error
	// invalid lists what is wrong with the engine template; no engine was started.
	invalid []string
	// stepErr is the error of the step that failed; the steps after it did not run.
	stepErr error
	requeue time.Duration
}

// requeueAfter asks for the cluster to be looked at again within d.
func (o *clusterObservation) requeueAfter(d time.Duration) {
	if o.requeue == 0 || d < o.requeue {
		o.requeue = d
	}
}

// clusterStatus computes the status from the cluster's pods and its hub's answer. It is pure
// so that every combination can be table-tested; the reconciler writes it only when it
// differs.
func clusterStatus(c *nbv1.Cluster, obs clusterObservation, now metav1.Time) nbv1.ClusterStatus {
	st := *c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	gen := c.Generation
	if obs.stepErr != nil {
		setReconcileError(&st.Conditions, obs.stepErr, gen, now)
		return st
	}
	wasReady := meta.IsStatusConditionTrue(st.Conditions, nbv1.ConditionControllerReady)
	stopped := !running(c)
	controllerReady := !stopped && obs.hub != nil

	st.ReadyEngines, st.BusyEngines = 0, 0
	completed := int64(0)
	if obs.hub != nil {
		for _, p := range obs.engines {
			if e, ok := engineOf(obs.hub, p.Name); ok {
				st.ReadyEngines++
				if e.Queue+e.Tasks > 0 {
					st.BusyEngines++
				}
			}
		}
		for _, e := range obs.hub.Engines {
			completed += int64(e.Completed)
		}
		tasks, processing := int64(0), 0
		if obs.dask != nil {
			tasks, processing = int64(obs.dask.Tasks), obs.dask.Processing
		}
		if st.BusyEngines > 0 || completed != st.CompletedTasks || processing > 0 || tasks != st.Tasks ||
			(controllerReady && !wasReady) || st.LastActivity == nil {
			st.LastActivity = &now
		}
		st.CompletedTasks, st.Tasks = completed, tasks
	}
	st.DashboardAddress = ""
	if c.IsDask() && !stopped && obs.controller != nil && obs.controller.Status.PodIP != "" {
		st.DashboardAddress = schedulerHTTP(obs.controller)
	}

	switch {
	case stopped:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, nbv1.ReasonClusterStopped, "the cluster is stopped", gen, now)
	case controllerReady:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionTrue, nbv1.ReasonControllerReady, controllerNoun(c)+" answers", gen, now)
	case obs.hubErr != nil:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, nbv1.ReasonHubUnreachable, controllerNoun(c)+" does not answer: "+obs.hubErr.Error(), gen, now)
	default:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, nbv1.ReasonControllerStarting, controllerNoun(c)+" is starting", gen, now)
	}
	switch {
	case stopped:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonClusterStopped, "the cluster is stopped", gen, now)
	case !controllerReady:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonControllerStarting, controllerNoun(c)+" is starting", gen, now)
	case st.ReadyEngines < c.Spec.Engines:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonEnginesStarting,
			fmt.Sprintf("%d of %d %s registered", st.ReadyEngines, c.Spec.Engines, enginesNoun(c)), gen, now)
	default:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonClusterRunning,
			fmt.Sprintf("%s and %d %s ready", controllerNoun(c), st.ReadyEngines, enginesNoun(c)), gen, now)
	}
	if reason, msg, failed := clusterFailure(c, obs); failed && !stopped {
		setCondition(&st.Conditions, nbv1.ConditionFailed, metav1.ConditionTrue, reason, msg, gen, now)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
	}
	return st
}

// clusterFailure reports what keeps the cluster's pods from running without a change: a
// failed ipcontroller, or a pod that cannot be scheduled or whose image cannot be pulled.
func clusterFailure(c *nbv1.Cluster, obs clusterObservation) (nbv1.ConditionReason, string, bool) {
	if len(obs.invalid) > 0 {
		return nbv1.ReasonSpecInvalid, enginesNoun(c) + " not started: " + strings.Join(obs.invalid, "; "), true
	}
	if obs.refused != nil {
		return nbv1.ReasonFailedCreate, "creating a pod: " + obs.refused.Error(), true
	}
	if obs.overQuota != nil {
		return nbv1.ReasonQuotaExceeded, "starting " + enginesNoun(c) + ": " + obs.overQuota.Error(), true
	}
	if obs.failed != nil {
		reason, msg := terminatedReason(obs.failed)
		return nbv1.ReasonControllerPodFailed, fmt.Sprintf("%s pod %s: %s: %s", controllerNoun(c), obs.failed.Name, reason, msg), true
	}
	for _, p := range append([]*corev1.Pod{obs.controller}, obs.engines...) {
		if p == nil {
			continue
		}
		if prob, _ := podState(p); prob != nil && prob.fatal {
			return prob.reason, fmt.Sprintf("pod %s: %s", p.Name, prob.message), true
		}
	}
	return "", "", false
}
