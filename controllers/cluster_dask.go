package controllers

import (
	"context"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

// A dask cluster (docs/dask.md) goes through the same steps as an ipyparallel one: its
// scheduler is the controller, its workers the engines, and what the scheduler says of its
// workers is kept in the hub's terms, each worker an engine registered under its pod's name.
// Two things differ: workers about to go are retired through the scheduler first, and the
// scheduler counts the tasks it holds rather than those completed.

// schedulerHTTP is the address of the scheduler's HTTP server in pod p.
func schedulerHTTP(p *corev1.Pod) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(daskcluster.HTTPPort))
}

// schedulerBase is the root of the scheduler's HTTP routes in pod p, which serves them under
// the cluster's dashboard prefix.
func (r *ClusterReconciler) schedulerBase(c *nbv1.Cluster, p *corev1.Pod) string {
	return "http://" + schedulerHTTP(p) + r.Options.DaskDashboardPrefix(c)
}

// queryScheduler asks the running scheduler which workers are registered and busy.
func (r *ClusterReconciler) queryScheduler(ctx context.Context, c *nbv1.Cluster, p *corev1.Pod, obs *clusterObservation) error {
	st, err := r.Dask.Query(ctx, r.schedulerBase(c, p))
	if err != nil {
		obs.hubErr = err
		log.FromContext(ctx).V(1).Info("Querying the cluster's scheduler", "address", r.schedulerBase(c, p), "error", err.Error())
		return nil
	}
	hub := ipcluster.HubStatus{}
	for i, w := range st.Workers {
		hub.Engines = append(hub.Engines, ipcluster.Engine{ID: i, UUID: w.Name, Queue: w.Queued, Tasks: w.Executing})
	}
	obs.hub, obs.dask = &hub, &st
	return nil
}

// retireWorkers retires those of pods that are registered with a dask cluster's scheduler
// before they are deleted: the scheduler stops giving them tasks, moves the results only they
// hold to the workers that stay, and gives their running tasks to others. A retirement that
// fails or takes longer than daskcluster.RetireTimeout is reported, and the pods go anyway:
// Dask computes again what was lost.
func (r *ClusterReconciler) retireWorkers(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation, pods []*corev1.Pod) {
	if !c.IsDask() || obs.dask == nil || obs.controller == nil {
		return
	}
	var addresses []string
	for _, p := range pods {
		for _, w := range obs.dask.Workers {
			if w.Name == p.Name {
				addresses = append(addresses, w.Address)
			}
		}
	}
	if len(addresses) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, daskcluster.RetireTimeout)
	defer cancel()
	if err := r.Dask.Retire(rctx, r.schedulerBase(c, obs.controller), addresses); err != nil {
		recordEvent(r.Recorder, c, nil, corev1.EventTypeWarning, nbv1.EventRetireFailed, "Retire",
			"Retiring %d workers through the scheduler failed, stopping them anyway: %v", len(addresses), err)
	}
}
