package controllers

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/ipcluster"
	"github.com/nbkube/nbkube/internal/quota"
)

// ClusterHub asks a cluster's ipcontroller which engines are registered and how busy they
// are; ipcluster.QueryHub in production.
type ClusterHub interface {
	Query(ctx context.Context, addr string, key []byte) (ipcluster.HubStatus, error)
}

// HubFunc adapts a function to ClusterHub.
type HubFunc func(ctx context.Context, addr string, key []byte) (ipcluster.HubStatus, error)

// Query calls f.
func (f HubFunc) Query(ctx context.Context, addr string, key []byte) (ipcluster.HubStatus, error) {
	return f(ctx, addr, key)
}

// DaskScheduler asks a dask cluster's scheduler about its workers and retires workers
// through it; daskcluster.Client in production. base is the scheduler's HTTP server.
type DaskScheduler interface {
	Query(ctx context.Context, base string) (daskcluster.Status, error)
	Retire(ctx context.Context, base string, addresses []string) error
	AdaptiveTarget(ctx context.Context, base string) (int, error)
}

// Timings of the Cluster controller.
const (
	// DefaultClusterPollInterval is how often a running cluster's hub is asked about its
	// engines once all are registered; registration itself does not show in any Kubernetes
	// object, so the controller polls faster (clusterStartingPoll) until it is done: until
	// the hub answers (engines are made only then) and until every engine registered. A
	// start waits for two such polls, so their period is a start's cost: at 1 s, dask
	// clusters on the real cluster of make bench-e2e took about a second longer.
	DefaultClusterPollInterval = 10 * time.Second
	clusterStartingPoll        = 250 * time.Millisecond
	// clusterReplaceDelay is how long a failed controller or engine pod stays before it is
	// replaced: long enough that its reason can be read and a pod that cannot run does not
	// spin, short enough that a crash costs little.
	clusterReplaceDelay = 5 * time.Second
	hubQueryTimeout     = 3 * time.Second
)

// ClusterReconciler runs each Cluster as an ipcontroller pod behind a Service and one pod per
// engine, started, stopped and scaled by the Cluster's spec. It manages the pods itself,
// rather than through Deployments, because scaling down must choose which engines go (the
// idle ones, which only the hub knows) and because a new ipcontroller needs new engines.
type ClusterReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Rand     io.Reader
	Options  builder.Options
	Hub      ClusterHub
	Dask     DaskScheduler
	// PollInterval is how often a running cluster's hub is asked (DefaultClusterPollInterval
	// when zero).
	PollInterval time.Duration
	// NetworkPolicies gives each cluster's ipcontroller a NetworkPolicy that lets in only its
	// engines and its owner's kernels (builder.ClusterNetworkPolicy).
	NetworkPolicies bool
	// Quota holds engines to their owners' UserPolicies (see reserveEngines).
	Quota *quota.Ledger
	// lowSince is, by Cluster UID, since when an adaptive cluster's scheduler has wanted
	// fewer workers than run (adaptEngines).
	lowSince sync.Map
}

// +kubebuilder:rbac:groups=nbkube.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update

// Reconcile makes the cluster's objects match its spec and reports their state.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &nbv1.Cluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if c.DeletionTimestamp != nil {
		// The pods, Service, Secret and NetworkPolicy are collected through their owner
		// references.
		return ctrl.Result{}, nil
	}
	var obs clusterObservation
	for _, step := range []func(context.Context, *nbv1.Cluster, *clusterObservation) error{
		r.reconcileNetworkPolicy,
		// The Secret before the pods that mount it (a node that finds it missing tries the
		// mount again only after a while: 10 s on the local node), then again once the
		// controller pod's address is known.
		r.reconcileSecret,
		r.reconcileController,
		r.reconcileSecret,
		r.reconcileService,
		r.queryHub,
		r.adaptEngines,
		r.reconcileEngines,
	} {
		if obs.stepErr = step(ctx, c, &obs); obs.stepErr != nil {
			break
		}
	}
	st := clusterStatus(c, obs, metav1.NewTime(r.Clock.Now()))
	if _, _, err := writeStatus(ctx, r.Client, c, clusterStatusOf, st); err != nil {
		return ctrl.Result{}, err
	}
	if obs.stepErr != nil {
		return ctrl.Result{}, obs.stepErr
	}
	if err := r.stopIfIdle(ctx, c, st); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: obs.requeue}, nil
}

func clusterStatusOf(c *nbv1.Cluster) *nbv1.ClusterStatus { return &c.Status }

func running(c *nbv1.Cluster) bool { return c.Spec.State != nbv1.ClusterStopped }

// clusterPods lists the cluster's pods of one component that are neither being deleted nor
// finished; finished ones are returned apart.
func (r *ClusterReconciler) clusterPods(ctx context.Context, c *nbv1.Cluster, component string) (live, finished []*corev1.Pod, err error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(builder.ClusterLabels(c, component))); err != nil {
		return nil, nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if !metav1.IsControlledBy(p, c) || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			finished = append(finished, p)
			continue
		}
		live = append(live, p)
	}
	slices.SortFunc(live, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return live, finished, nil
}

// reconcileController runs one ipcontroller pod while the cluster runs. A pod that failed is
// replaced after clusterReplaceDelay, and none runs while the cluster is stopped.
func (r *ClusterReconciler) reconcileController(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	live, finished, err := r.clusterPods(ctx, c, builder.ControllerComponent(c))
	if err != nil {
		return err
	}
	now := r.Clock.Now()
	for _, p := range finished {
		if wait := clusterReplaceDelay - now.Sub(finishedAt(p)); running(c) && len(live) == 0 && wait > 0 {
			obs.failed = p
			obs.requeueAfter(wait)
			continue
		}
		if err := deletePod(ctx, r.Client, p); err != nil {
			return err
		}
		if running(c) && len(live) == 0 {
			reason, msg := terminatedReason(p)
			recordEvent(r.Recorder, c, p, corev1.EventTypeWarning, nbv1.EventControllerReplaced, "Replace",
				"Replacing %s pod %s (%s: %s) and its %s", controllerNoun(c), p.Name, reason, msg, enginesNoun(c))
		}
	}
	if !running(c) {
		for _, p := range live {
			if err := deletePod(ctx, r.Client, p); err != nil {
				return err
			}
			recordEvent(r.Recorder, c, p, corev1.EventTypeNormal, nbv1.EventClusterStopped, "Stop", "Stopped the cluster")
		}
		return nil
	}
	// Only one ipcontroller may run: the oldest stays.
	for _, p := range live[min(1, len(live)):] {
		if err := deletePod(ctx, r.Client, p); err != nil {
			return err
		}
	}
	if len(live) > 0 {
		obs.controller = live[0]
		return nil
	}
	if obs.failed != nil {
		return nil
	}
	p := builder.ClusterControllerPodOf(c, r.Options)
	if err := r.createPod(ctx, p, obs); err != nil || obs.refused != nil {
		return err
	}
	obs.controller = p
	recordEvent(r.Recorder, c, p, corev1.EventTypeNormal, nbv1.EventClusterRunning, "Start", "Started %s pod %s", controllerNoun(c), p.Name)
	return nil
}

// controllerNoun and enginesNoun name a cluster's controller and engines in events.
func controllerNoun(c *nbv1.Cluster) string {
	if c.IsDask() {
		return "dask-scheduler"
	}
	return "ipcontroller"
}

func engineNoun(c *nbv1.Cluster) string {
	if c.IsDask() {
		return "worker"
	}
	return "engine"
}

func enginesNoun(c *nbv1.Cluster) string {
	if c.IsDask() {
		return "workers"
	}
	return "engines"
}

// reconcileSecret keeps the cluster's Secret: a key made once, and the connection files made
// from it, the engines' and clients' ones naming where the ipcontroller can be reached (a dask
// cluster's: its TLS files, made once, and its clients' settings).
func (r *ClusterReconciler) reconcileSecret(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	existing := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.ClusterSecretName(c)}, existing)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if existing.Name != "" && !metav1.IsControlledBy(existing, c) {
		// Another's, or a deleted cluster's of the same name not yet collected: never
		// its key.
		return fmt.Errorf("secret %s exists and is not this cluster's: waiting for it to go", existing.Name)
	}
	podIP := ""
	if obs.controller != nil {
		podIP = obs.controller.Status.PodIP
	}
	if c.IsDask() {
		return r.reconcileDaskSecret(ctx, c, existing, podIP)
	}
	key := string(existing.Data[builder.ClusterSecretKey])
	if key == "" {
		b := make([]byte, 32)
		if _, err := io.ReadFull(r.Rand, b); err != nil {
			return fmt.Errorf("cluster key: %w", err)
		}
		key = hex.EncodeToString(b)
	}
	obs.key = []byte(key)
	address := builder.ClusterControllerAddress(c, r.Options, podIP)
	if address == "" && existing.Data[builder.ClusterClientFile] != nil {
		// Keep the last address while there is none: better an old one that is refused
		// than a file that vanishes under the kernels that use it.
		return nil
	}
	desired, err := builder.ClusterSecret(c, key, address)
	if err != nil {
		return err
	}
	return r.applySecret(ctx, existing, desired)
}

// reconcileDaskSecret keeps a dask cluster's Secret: its TLS files, made once, and once the
// scheduler's address is known the settings of its clients.
func (r *ClusterReconciler) reconcileDaskSecret(ctx context.Context, c *nbv1.Cluster, existing *corev1.Secret, podIP string) error {
	creds, ok := builder.DaskCredentialsOf(existing)
	if !ok {
		var err error
		if creds, err = daskcluster.NewCredentials(r.Rand, c.Name, r.Clock.Now()); err != nil {
			return err
		}
	}
	address := builder.DaskSchedulerAddress(c, r.Options, podIP)
	if address == "" && existing.Data[builder.EnvDaskSchedulerAddress] != nil {
		// Keep the last address while there is none, as for an ipcontroller.
		return nil
	}
	return r.applySecret(ctx, existing, builder.DaskSecret(c, creds, address))
}

// applySecret creates the cluster's Secret, or updates existing (found by reconcileSecret,
// empty when there is none) to desired's data.
func (r *ClusterReconciler) applySecret(ctx context.Context, existing, desired *corev1.Secret) error {
	if existing.Name == "" {
		if err := r.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create cluster secret: %w", err)
		}
		return nil
	}
	if equalData(existing.Data, desired.Data) {
		return nil
	}
	existing.Data, existing.StringData = desired.Data, nil
	if err := r.Update(ctx, existing); err != nil {
		return fmt.Errorf("update cluster secret: %w", err)
	}
	return nil
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}

// reconcileNetworkPolicy keeps the ipcontroller's NetworkPolicy, before the ipcontroller
// runs, so that no other user's kernel reaches it in between.
func (r *ClusterReconciler) reconcileNetworkPolicy(ctx context.Context, c *nbv1.Cluster, _ *clusterObservation) error {
	if !r.NetworkPolicies {
		return nil
	}
	return applyNetworkPolicy(ctx, r.Client, builder.ClusterNetworkPolicyOf(c))
}

// reconcileService keeps the Service through which engines and kernels reach the
// ipcontroller.
func (r *ClusterReconciler) reconcileService(ctx context.Context, c *nbv1.Cluster, _ *clusterObservation) error {
	return applyService(ctx, r.Client, builder.ClusterServiceOf(c))
}

// queryHub asks the running ipcontroller which engines are registered and busy.
func (r *ClusterReconciler) queryHub(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	p := obs.controller
	if !running(c) || p == nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, hubQueryTimeout)
	defer cancel()
	if c.IsDask() {
		return r.queryScheduler(qctx, c, p, obs)
	}
	addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(ipcluster.RegistrationPort))
	st, err := r.Hub.Query(qctx, addr, obs.key)
	if err != nil {
		obs.hubErr = err
		log.FromContext(ctx).V(1).Info("Querying the cluster's hub", "address", addr, "error", err.Error())
		return nil
	}
	obs.hub = &st
	return nil
}

func (r *ClusterReconciler) pollInterval() time.Duration {
	return cmp.Or(r.PollInterval, DefaultClusterPollInterval)
}

// createPod creates one of the cluster's pods (see createPod). A creation the API server
// refuses is kept in obs for the status and tried again at the next poll.
func (r *ClusterReconciler) createPod(ctx context.Context, p *corev1.Pod, obs *clusterObservation) error {
	refused, err := createPod(ctx, r.Client, p)
	if refused != nil {
		obs.refused = refused
		obs.requeueAfter(r.pollInterval())
	}
	return err
}

// stopIfIdle stops a running cluster whose engines have had no task for spec.idleTimeout.
func (r *ClusterReconciler) stopIfIdle(ctx context.Context, c *nbv1.Cluster, st nbv1.ClusterStatus) error {
	timeout := c.Spec.IdleTimeout
	if !running(c) || timeout == nil || timeout.Duration <= 0 || st.LastActivity == nil ||
		!meta.IsStatusConditionTrue(st.Conditions, nbv1.ConditionControllerReady) {
		return nil
	}
	idle := r.Clock.Now().Sub(st.LastActivity.Time)
	if idle < timeout.Duration {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.State = nbv1.ClusterStopped
	if err := r.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("stop idle cluster: %w", err)
	}
	recordEvent(r.Recorder, c, nil, corev1.EventTypeNormal, nbv1.EventIdleStopped, "Stop",
		"Stopped the cluster: no task for %s (idleTimeout %s)", idle.Round(time.Second), timeout.Duration)
	return nil
}

// SetupWithManager watches Clusters and the objects they own.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.Cluster{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{})
	if r.NetworkPolicies {
		b = b.Owns(&networkingv1.NetworkPolicy{})
	}
	return b.Named("cluster").Complete(r)
}
