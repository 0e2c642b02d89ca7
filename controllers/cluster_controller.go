package controllers

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

// Reasons of the Cluster conditions.
const (
	ReasonClusterRunning     = "Running"
	ReasonClusterStopped     = "Stopped"
	ReasonControllerStarting = "ControllerStarting"
	ReasonEnginesStarting    = "EnginesStarting"
	ReasonControllerReady    = "ControllerReady"
)

// ClusterReconciler runs each Cluster as an ipcontroller Deployment with its Service and an
// engines Deployment, started, stopped and scaled by the Cluster's spec.
type ClusterReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Rand     io.Reader
	Options  builder.Options
}

// +kubebuilder:rbac:groups=nbkube.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete

// clusterObservation is what the reconcile steps found.
type clusterObservation struct {
	controller, engines *appsv1.Deployment
}

// Reconcile makes the cluster's objects match its spec and reports their state.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &nbv1.Cluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if c.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	var obs clusterObservation
	for _, step := range []func(context.Context, *nbv1.Cluster, *clusterObservation) error{
		r.reconcileSecret,
		r.reconcileService,
		r.reconcileController,
		r.reconcileEngines,
	} {
		if err := step(ctx, c, &obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	st := clusterStatus(c, obs, metav1.NewTime(r.Clock.Now()))
	_, err := writeStatus(ctx, r.Client, c, func(c *nbv1.Cluster) *nbv1.ClusterStatus { return &c.Status }, st)
	return ctrl.Result{}, err
}

func (r *ClusterReconciler) reconcileSecret(ctx context.Context, c *nbv1.Cluster, _ *clusterObservation) error {
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.ClusterSecretName(c)}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	key := make([]byte, 32)
	if _, err := io.ReadFull(r.Rand, key); err != nil {
		return fmt.Errorf("cluster key: %w", err)
	}
	if err := r.Create(ctx, builder.ClusterSecret(c, hex.EncodeToString(key))); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create cluster secret: %w", err)
	}
	return nil
}

func (r *ClusterReconciler) reconcileService(ctx context.Context, c *nbv1.Cluster, _ *clusterObservation) error {
	return applyService(ctx, r.Client, builder.ClusterControllerService(c))
}

func (r *ClusterReconciler) reconcileController(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	d, before, err := applyDeployment(ctx, r.Client, builder.ClusterControllerDeployment(c, r.Options))
	if err != nil {
		return err
	}
	obs.controller = d
	switch now := *d.Spec.Replicas; {
	case before <= 0 && now > 0:
		r.Recorder.Eventf(c, d, corev1.EventTypeNormal, "Started", "Start", "Started the cluster's controller")
	case before > 0 && now == 0:
		r.Recorder.Eventf(c, d, corev1.EventTypeNormal, "Stopped", "Stop", "Stopped the cluster")
	}
	return nil
}

func (r *ClusterReconciler) reconcileEngines(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	d, before, err := applyDeployment(ctx, r.Client, builder.ClusterEnginesDeployment(c, r.Options))
	if err != nil {
		return err
	}
	obs.engines = d
	if now := *d.Spec.Replicas; before != now && (before != -1 || now != 0) {
		r.Recorder.Eventf(c, d, corev1.EventTypeNormal, "ScaledEngines", "Scale", "Scaled engines from %d to %d", max(before, 0), now)
	}
	return nil
}

// clusterStatus computes the status from the cluster's Deployments.
func clusterStatus(c *nbv1.Cluster, obs clusterObservation, now metav1.Time) nbv1.ClusterStatus {
	st := *c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	gen := c.Generation
	st.ReadyEngines = obs.engines.Status.ReadyReplicas
	controllerReady := obs.controller.Status.ReadyReplicas > 0
	stopped := c.Spec.State == nbv1.ClusterStopped

	switch {
	case stopped:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, ReasonClusterStopped, "the cluster is stopped", gen, now)
	case controllerReady:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionTrue, ReasonControllerReady, "ipcontroller is ready", gen, now)
	default:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, ReasonControllerStarting, "ipcontroller is starting", gen, now)
	}
	switch {
	case stopped:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, ReasonClusterStopped, "the cluster is stopped", gen, now)
	case !controllerReady:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, ReasonControllerStarting, "ipcontroller is starting", gen, now)
	case st.ReadyEngines < c.Spec.Engines:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, ReasonEnginesStarting,
			fmt.Sprintf("%d of %d engines ready", st.ReadyEngines, c.Spec.Engines), gen, now)
	default:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, ReasonClusterRunning,
			fmt.Sprintf("ipcontroller and %d engines ready", st.ReadyEngines), gen, now)
	}
	if reason, msg, failed := deploymentFailure(obs.controller, obs.engines); failed && !stopped {
		setCondition(&st.Conditions, nbv1.ConditionFailed, metav1.ConditionTrue, reason, msg, gen, now)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
	}
	return st
}

// deploymentFailure reports a Deployment that cannot make progress: pods refused (quota,
// admission) or a rollout past its deadline.
func deploymentFailure(deployments ...*appsv1.Deployment) (string, string, bool) {
	for _, d := range deployments {
		for _, c := range d.Status.Conditions {
			switch {
			case c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue:
				return c.Reason, fmt.Sprintf("deployment %s: %s", d.Name, c.Message), true
			case c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded":
				return c.Reason, fmt.Sprintf("deployment %s: %s", d.Name, c.Message), true
			}
		}
	}
	return "", "", false
}

// SetupWithManager watches Clusters and the objects they own.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.Cluster{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Named("cluster").
		Complete(r)
}
