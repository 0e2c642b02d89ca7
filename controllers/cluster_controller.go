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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

// Reasons of the Cluster conditions and events.
const (
	ReasonClusterRunning      = "Running"
	ReasonClusterStopped      = "Stopped"
	ReasonControllerStarting  = "ControllerStarting"
	ReasonEnginesStarting     = "EnginesStarting"
	ReasonControllerReady     = "ControllerReady"
	ReasonHubUnreachable      = "HubUnreachable"
	ReasonControllerReplaced  = "ControllerReplaced"
	ReasonEngineReplaced      = "EngineReplaced"
	ReasonScaledEngines       = "ScaledEngines"
	ReasonIdleStopped         = "IdleStopped"
	ReasonControllerPodFailed = "ControllerPodFailed"
	ReasonFailedCreate        = "FailedCreate"
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

// Timings of the Cluster controller.
const (
	// DefaultClusterPollInterval is how often a running cluster's hub is asked about its
	// engines once all are registered; registration itself does not show in any Kubernetes
	// object, so the controller polls faster (clusterStartingPoll) until it is done.
	DefaultClusterPollInterval = 10 * time.Second
	clusterStartingPoll        = time.Second
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
	// PollInterval is how often a running cluster's hub is asked (DefaultClusterPollInterval
	// when zero).
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=nbkube.io,resources=clusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=clusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete

// clusterObservation is what the reconcile steps found and did.
type clusterObservation struct {
	key        []byte
	controller *corev1.Pod   // the live ipcontroller pod, if any
	engines    []*corev1.Pod // live engine pods of the current controller
	failed     *corev1.Pod   // a controller pod that failed and awaits replacement
	hub        *ipcluster.HubStatus
	hubErr     error
	// refused is a pod creation the API server refused (quota, admission): it does not get
	// better by retrying at once, and the status says why.
	refused error
	requeue time.Duration
}

func (o *clusterObservation) requeueAfter(d time.Duration) {
	if o.requeue == 0 || d < o.requeue {
		o.requeue = d
	}
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
		r.reconcileController,
		r.reconcileSecret,
		r.reconcileService,
		r.queryHub,
		r.reconcileEngines,
	} {
		if err := step(ctx, c, &obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	st := clusterStatus(c, obs, metav1.NewTime(r.Clock.Now()))
	if _, err := writeStatus(ctx, r.Client, c, func(c *nbv1.Cluster) *nbv1.ClusterStatus { return &c.Status }, st); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.stopIfIdle(ctx, c, st); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: obs.requeue}, nil
}

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
	live, finished, err := r.clusterPods(ctx, c, builder.ComponentClusterController)
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
		if err := r.deletePod(ctx, p); err != nil {
			return err
		}
		if running(c) && len(live) == 0 {
			reason, msg := terminatedReason(p)
			r.Recorder.Eventf(c, p, corev1.EventTypeWarning, ReasonControllerReplaced, "Replace",
				"Replacing ipcontroller pod %s (%s: %s) and its engines", p.Name, reason, msg)
		}
	}
	if !running(c) {
		for _, p := range live {
			if err := r.deletePod(ctx, p); err != nil {
				return err
			}
			r.Recorder.Eventf(c, p, corev1.EventTypeNormal, ReasonClusterStopped, "Stop", "Stopped the cluster")
		}
		return nil
	}
	// Only one ipcontroller may run: the oldest stays.
	for _, p := range live[min(1, len(live)):] {
		if err := r.deletePod(ctx, p); err != nil {
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
	p := builder.ClusterControllerPod(c, r.Options)
	if err := r.createPod(ctx, p, obs); err != nil || obs.refused != nil {
		return err
	}
	obs.controller = p
	r.Recorder.Eventf(c, p, corev1.EventTypeNormal, ReasonClusterRunning, "Start", "Started ipcontroller pod %s", p.Name)
	return nil
}

// finishedAt is when a finished pod's container stopped, or its creation if that is unknown.
func finishedAt(p *corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			return t.FinishedAt.Time
		}
	}
	return p.CreationTimestamp.Time
}

// reconcileSecret keeps the cluster's Secret: a key made once, and the connection files made
// from it, the engines' and clients' ones naming where the ipcontroller can be reached.
func (r *ClusterReconciler) reconcileSecret(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	existing := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: builder.ClusterSecretName(c)}, existing)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
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
	podIP := ""
	if obs.controller != nil {
		podIP = obs.controller.Status.PodIP
	}
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

func (r *ClusterReconciler) reconcileService(ctx context.Context, c *nbv1.Cluster, _ *clusterObservation) error {
	return applyService(ctx, r.Client, builder.ClusterControllerService(c))
}

// queryHub asks the running ipcontroller which engines are registered and busy.
func (r *ClusterReconciler) queryHub(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	p := obs.controller
	if !running(c) || p == nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, hubQueryTimeout)
	defer cancel()
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

// reconcileEngines runs spec.engines engine pods for the current ipcontroller: it replaces
// engines of an earlier one and failed engines, and when there are too many it deletes the
// engines that are not registered, then idle ones, then the least busy.
func (r *ClusterReconciler) reconcileEngines(ctx context.Context, c *nbv1.Cluster, obs *clusterObservation) error {
	live, finished, err := r.clusterPods(ctx, c, builder.ComponentClusterEngine)
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
		if err := r.deletePod(ctx, p); err != nil {
			return err
		}
		if running(c) {
			reason, msg := terminatedReason(p)
			r.Recorder.Eventf(c, p, corev1.EventTypeWarning, ReasonEngineReplaced, "Replace", "Replacing engine pod %s (%s: %s)", p.Name, reason, msg)
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
		if err := r.deletePod(ctx, p); err != nil {
			return err
		}
	}
	obs.engines = current
	if !running(c) || obs.controller == nil {
		return nil
	}
	if obs.hub == nil {
		// Engines start once the ipcontroller answers, so that they register at the first try,
		// and none is removed while the hub cannot say which are busy.
		obs.requeueAfter(clusterStartingPoll)
		return nil
	}
	want := int(c.Spec.Engines)
	if pending := want - len(current) - waiting; pending > 0 {
		for range pending {
			p := builder.ClusterEnginePod(c, r.Options, string(obs.controller.UID))
			if err := r.createPod(ctx, p, obs); err != nil {
				return err
			}
			if obs.refused != nil {
				break
			}
			obs.engines = append(obs.engines, p)
		}
		if obs.refused == nil {
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonScaledEngines, "Scale", "Started %d engines (%d wanted)", pending, want)
		}
	}
	if len(current) > want {
		victims := retirementOrder(current, obs.hub)[:len(current)-want]
		for _, p := range victims {
			if err := r.deletePod(ctx, p); err != nil {
				return err
			}
		}
		obs.engines = slices.DeleteFunc(obs.engines, func(p *corev1.Pod) bool { return slices.Contains(victims, p) })
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonScaledEngines, "Scale", "Stopped %d engines (%d wanted)", len(victims), want)
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

func (r *ClusterReconciler) pollInterval() time.Duration {
	return cmp.Or(r.PollInterval, DefaultClusterPollInterval)
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

// createPod creates a pod and waits until the cache shows it, so that the next reconcile,
// which the creation itself triggers, does not count one too few and create another. A
// creation the API server refuses is recorded in obs and retried later.
func (r *ClusterReconciler) createPod(ctx context.Context, p *corev1.Pod, obs *clusterObservation) error {
	if err := r.Create(ctx, p); apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		obs.refused = err
		obs.requeueAfter(r.pollInterval())
		return nil
	} else if err != nil {
		return fmt.Errorf("create pod: %w", err)
	}
	return r.waitCache(ctx, client.ObjectKeyFromObject(p), func(_ *corev1.Pod, err error) bool { return err == nil })
}

// deletePod deletes a pod and waits until the cache shows it deleted or being deleted.
func (r *ClusterReconciler) deletePod(ctx context.Context, p *corev1.Pod) error {
	if err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	return r.waitCache(ctx, client.ObjectKeyFromObject(p), func(seen *corev1.Pod, err error) bool {
		return apierrors.IsNotFound(err) || (err == nil && (seen.DeletionTimestamp != nil || seen.UID != p.UID))
	})
}

// waitCache polls the cache until done says the pod at key reads as expected, for at most 5 s:
// a cache that lags longer only costs a reconcile that acts on what it shows.
func (r *ClusterReconciler) waitCache(ctx context.Context, key client.ObjectKey, done func(*corev1.Pod, error) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		seen := &corev1.Pod{}
		return done(seen, r.Get(ctx, key, seen)), nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return nil
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
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonIdleStopped, "Stop",
		"Stopped the cluster: no task for %s (idleTimeout %s)", idle.Round(time.Second), timeout.Duration)
	return nil
}

// clusterStatus computes the status from the cluster's pods and its hub's answer.
func clusterStatus(c *nbv1.Cluster, obs clusterObservation, now metav1.Time) nbv1.ClusterStatus {
	st := *c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	gen := c.Generation
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
		if st.BusyEngines > 0 || completed != st.CompletedTasks || (controllerReady && !wasReady) || st.LastActivity == nil {
			st.LastActivity = &now
		}
		st.CompletedTasks = completed
	}

	switch {
	case stopped:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, ReasonClusterStopped, "the cluster is stopped", gen, now)
	case controllerReady:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionTrue, ReasonControllerReady, "ipcontroller answers", gen, now)
	case obs.hubErr != nil:
		setCondition(&st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionFalse, ReasonHubUnreachable, "ipcontroller does not answer: "+obs.hubErr.Error(), gen, now)
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
			fmt.Sprintf("%d of %d engines registered", st.ReadyEngines, c.Spec.Engines), gen, now)
	default:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, ReasonClusterRunning,
			fmt.Sprintf("ipcontroller and %d engines ready", st.ReadyEngines), gen, now)
	}
	if reason, msg, failed := clusterFailure(obs); failed && !stopped {
		setCondition(&st.Conditions, nbv1.ConditionFailed, metav1.ConditionTrue, reason, msg, gen, now)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
	}
	return st
}

// clusterFailure reports what keeps the cluster's pods from running without a change: a
// failed ipcontroller, or a pod that cannot be scheduled or whose image cannot be pulled.
func clusterFailure(obs clusterObservation) (string, string, bool) {
	if obs.refused != nil {
		return ReasonFailedCreate, "creating a pod: " + obs.refused.Error(), true
	}
	if obs.failed != nil {
		reason, msg := terminatedReason(obs.failed)
		return ReasonControllerPodFailed, fmt.Sprintf("ipcontroller pod %s: %s: %s", obs.failed.Name, reason, msg), true
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

// SetupWithManager watches Clusters and the objects they own.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.Cluster{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Named("cluster").
		Complete(r)
}
