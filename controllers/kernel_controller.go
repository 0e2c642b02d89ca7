package controllers

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/kernelparams"
	"github.com/nbkube/nbkube/internal/quota"
)

// KernelReconciler runs each Kernel as a pod with its own Secret and reflects the pod's
// state, and what the kernel's agent reports, in the Kernel's status.
type KernelReconciler struct {
	client.Client
	// APIReader reads around the cache, which holds only nbkube's pods: a pod of the same
	// name made by someone else is only visible there.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Rand makes the kernels' HMAC keys.
	Rand io.Reader
	// AgentTokenKey derives the kernels' agent tokens (agenttoken.Kernel), as the API server
	// does without reading their Secrets.
	AgentTokenKey []byte
	Options       builder.Options
	// Deliveries decides the agent's delivery when Options says Auto.
	Deliveries *AgentDeliveries
	// Agents asks the agents of running kernels for their status.
	Agents AgentStatus
	// StatusInterval is how often a running kernel's agent is asked, at most: see
	// MaxStatusPolls.
	StatusInterval time.Duration
	// MaxStatusPolls bounds the agents' status requests per second, all kernels together
	// (statusPollInterval); no bound when zero.
	MaxStatusPolls float64
	// Quota holds kernels to their owners' UserPolicies: no pod for a kernel that would take
	// its owner past a limit, whoever made it (see reconcileQuota).
	Quota *quota.Ledger

	// Workers is how many kernels are reconciled at once (DefaultKernelWorkers when zero):
	// one worker made the pods of twenty kernels started together one after the other.
	Workers int

	// memory is what is kept of each kernel between reconciles.
	memory kernelMemory
}

// AgentStatus asks a kernel's agent how its kernel is; *agentclient.Client is one.
type AgentStatus interface {
	Status(ctx context.Context, e agentclient.Endpoint) (agentapi.Status, error)
}

const (
	// agentStatusTimeout bounds one status request: an agent answers from memory, so a slow
	// one is as good as unreachable and must not hold up a reconcile or a cull pass.
	agentStatusTimeout = 2 * time.Second
	// conflictRetry is how soon a status write that lost to another writer is tried again.
	conflictRetry = time.Second
)

// +kubebuilder:rbac:groups=nbkube.io,resources=kernels,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels/status,verbs=get;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels/finalizers,verbs=update
// +kubebuilder:rbac:groups=nbkube.io,resources=kernelspecs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the Kernel's Secret and Pod exist and computes its status.
func (r *KernelReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	began := r.Clock.Now()
	kernel := &nbv1.Kernel{}
	if err := r.Get(ctx, req.NamespacedName, kernel); err != nil {
		r.memory.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if kernel.DeletionTimestamp != nil {
		// The Secret and Pod are collected through their owner references.
		r.memory.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	r.memory.catchUp(req.NamespacedName, kernel)
	var obs kernelObservation
	for _, step := range []func(context.Context, *nbv1.Kernel, *kernelObservation) error{
		r.reconcileSecret,
		r.reconcilePod,
		r.reconcileAgent,
	} {
		if obs.stepErr = step(ctx, kernel, &obs); obs.stepErr != nil || obs.problem != nil {
			break
		}
	}
	switch {
	case obs.agent != nil:
		r.memory.setReplay(req.NamespacedName, kernel.Spec.KernelSpec, obs.agent.ReplayBytes)
	case obs.stepErr == nil && !obs.running:
		// The kernel ended, or never ran: its agent holds nothing. An agent that only missed
		// an answer keeps its last report.
		r.memory.forgetReplay(req.NamespacedName)
		r.memory.markRunning(req.NamespacedName, false)
	}
	now := metav1.NewTime(r.Clock.Now())
	st := kernelStatus(kernel, obs, now)
	r.memory.observeStart(kernel, &obs, &st, began, now.Time)
	// The hold is timed by the real clock, as the requeue that ends it is: r.Clock stamps
	// conditions and may be a test's, which only moves when told.
	if wait := r.memory.hold(req.NamespacedName, kernel.Status, st, time.Now()); wait > 0 {
		// A routine step of a start (scheduled, container creating, not ready yet): the
		// pod's next change, usually its readiness well within the wait, brings the kernel
		// back and writes once what would have been two or three writes.
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	lost, werr := r.updateStatus(ctx, kernel, st)
	if lost && werr == nil {
		// The Kernel changed since the cache's version: someone else wrote it (the culler,
		// an edit), or the cache had not caught up with a write of ours that its memory did
		// not know (one before a restart of the manager). The same observations are written
		// again onto the live Kernel now, rather than a second later, which a client waiting
		// for the kernel's address would wait too.
		log.FromContext(ctx).V(1).Info("Kernel status write lost to a newer version; writing it onto the live Kernel")
		live := &nbv1.Kernel{}
		switch gerr := r.APIReader.Get(ctx, req.NamespacedName, live); {
		case apierrors.IsNotFound(gerr):
			return ctrl.Result{}, nil
		case gerr != nil:
			werr = gerr
		case live.DeletionTimestamp == nil:
			lost, werr = r.updateStatus(ctx, live, kernelStatus(live, obs, now))
		}
	}
	switch {
	case werr != nil:
		return ctrl.Result{}, werr
	case obs.stepErr != nil:
		return ctrl.Result{}, obs.stepErr
	case lost:
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case obs.running:
		// Nothing announces a running kernel's activity: its agent is asked again later.
		return ctrl.Result{RequeueAfter: statusPollInterval(r.StatusInterval, r.memory.markRunning(req.NamespacedName, true), r.MaxStatusPolls)}, nil
	case obs.recheck > 0:
		return ctrl.Result{RequeueAfter: obs.recheck}, nil
	}
	return ctrl.Result{}, nil
}

// kernelSpec finds the KernelSpec a new kernel pod is built from. Only pod creation needs
// it: a running kernel whose spec is deleted or edited keeps running.
func (r *KernelReconciler) kernelSpec(ctx context.Context, k *nbv1.Kernel, obs *kernelObservation) error {
	spec := &nbv1.KernelSpec{}
	err := r.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: k.Spec.KernelSpec}, spec)
	if apierrors.IsNotFound(err) {
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecNotFound, fatal: true,
			message: fmt.Sprintf("kernel spec %q does not exist in namespace %s", k.Spec.KernelSpec, k.Namespace)}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get kernel spec: %w", err)
	}
	// Validated here rather than read from the spec's Ready condition, which the KernelSpec
	// controller may not have written yet when a kernel follows its spec closely.
	if problems := validateKernelSpec(&spec.Spec, r.Options); len(problems) > 0 {
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecInvalid, fatal: true,
			message: fmt.Sprintf("kernel spec %q is invalid: %s", spec.Name, strings.Join(problems, "; "))}
		return nil
	}
	// The pod is built from the spec as the kernel's launch parameters make it. The API server
	// checked them; a Kernel made with kubectl is checked here.
	applied, err := kernelparams.Apply(spec, k.Spec.Parameters)
	if err != nil {
		obs.problem = &problem{reason: nbv1.ReasonParametersInvalid, fatal: true, message: err.Error()}
		return nil
	}
	obs.spec = applied
	return nil
}

func (r *KernelReconciler) reconcileSecret(ctx context.Context, k *nbv1.Kernel, obs *kernelObservation) error {
	existing := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKeyFromObject(k), existing)
	if err == nil {
		if !metav1.IsControlledBy(existing, k) {
			obs.problem = secretConflict(existing)
			return nil
		}
		obs.secret = existing
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get kernel secret: %w", err)
	}
	key := make([]byte, 32)
	if _, err := io.ReadFull(r.Rand, key); err != nil {
		return fmt.Errorf("kernel key: %w", err)
	}
	token := agenttoken.Kernel(r.AgentTokenKey, k.Namespace, k.Name, string(k.UID))
	secret := builder.KernelSecret(k, hex.EncodeToString(key), token)
	err = r.Create(ctx, secret)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create kernel secret: %w", err)
		}
		return nil
	}
	// A Secret of that name that the cache does not hold: this kernel's own, made a moment
	// ago, or someone else's (the cache holds only nbkube's). Never adopted: a kernel mounting
	// another's Secret would run with its keys.
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(k), existing); err != nil {
		return fmt.Errorf("get kernel secret: %w", err)
	}
	if !metav1.IsControlledBy(existing, k) {
		obs.problem = secretConflict(existing)
	}
	return nil
}

// secretConflict is the refusal of a Secret that has the kernel's name but is not the
// kernel's.
func secretConflict(s *corev1.Secret) *problem {
	return &problem{reason: nbv1.ReasonSecretConflict, fatal: true,
		message: fmt.Sprintf("secret %s exists and does not belong to this kernel", s.Name)}
}

func (r *KernelReconciler) reconcilePod(ctx context.Context, k *nbv1.Kernel, obs *kernelObservation) error {
	pod := &corev1.Pod{}
	err := r.Get(ctx, client.ObjectKeyFromObject(k), pod)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(pod, k) {
			obs.problem = &problem{reason: nbv1.ReasonPodConflict, fatal: true,
				message: fmt.Sprintf("pod %s exists and does not belong to this kernel", pod.Name)}
			return nil
		}
		obs.pod = pod
		r.recordRoom(ctx, k, pod)
		return r.restartPod(ctx, k, obs)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get kernel pod: %w", err)
	}
	if asked := k.Annotations[nbv1.AnnotationRestart]; k.Status.PodIP != "" && (asked == "" || asked == k.Status.PodRestart) {
		// The status still holds the address of a pod that is gone, and no restart replaced
		// it (that clears the address): someone deleted it.
		obs.podDeleted = k.Name
		log.FromContext(ctx).Info("The kernel's pod was deleted; making a new one", "pod", klog.KRef(k.Namespace, k.Name))
	}
	if err := r.kernelSpec(ctx, k, obs); err != nil || obs.problem != nil {
		return err
	}
	if _, err := builder.KernelHome(k, r.Options); err != nil {
		obs.problem = &problem{reason: nbv1.ReasonHomeInvalid, fatal: true, message: err.Error()}
		return nil
	}
	spec, err := r.reconcileQuota(ctx, k, obs)
	if err != nil || obs.problem != nil {
		return err
	}
	claim, err := r.ownClaim(ctx, k)
	if err != nil {
		return err
	}
	pod = builder.KernelPod(k, spec, r.Deliveries.Resolve(ctx, r.Options))
	made, err := createAgentPod(ctx, r.Client, r.APIReader, r.Recorder, k, pod, claim, "kernel")
	if errors.Is(err, errPodConflict) {
		obs.problem = &problem{reason: nbv1.ReasonPodConflict, fatal: true,
			message: fmt.Sprintf("pod %s exists and does not belong to this kernel", pod.Name)}
		return nil
	}
	obs.pod = made
	return err
}

// ownClaim is the claim of the kernel's owner that its pod mounts instead of the home's
// subPath of the contents volume: with per-user claims on (--home-claim), the owner's claim
// where the admin has made one. An owner without one, or whose name makes no claim name,
// keeps the subPath, which isolates homes too; the kernel's events say which.
func (r *KernelReconciler) ownClaim(ctx context.Context, k *nbv1.Kernel) (string, error) {
	return ownClaim(ctx, r.APIReader, r.Recorder, k, k.Spec.Owner, k.Spec.Home, r.Options)
}

// restartPod acts on a new restart request (AnnotationRestart): a pod that is not ready is
// deleted at once, without grace (its kernel is dead, or its node gone), so that the next
// reconcile makes a new one under the same kernel id; a ready pod's agent restarts its
// kernel itself, so the request only needs recording.
func (r *KernelReconciler) restartPod(ctx context.Context, k *nbv1.Kernel, obs *kernelObservation) error {
	asked := k.Annotations[nbv1.AnnotationRestart]
	if asked == "" || asked == k.Status.PodRestart {
		return nil
	}
	obs.podRestart = asked
	if _, ready := podState(obs.pod); ready || obs.pod.DeletionTimestamp != nil {
		return nil
	}
	err := r.Delete(ctx, obs.pod, client.Preconditions{UID: &obs.pod.UID}, client.GracePeriodSeconds(0))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the kernel's pod to restart it: %w", err)
	}
	log.FromContext(ctx).Info("Deleted the kernel's pod, which could not restart it", "pod", klog.KObj(obs.pod))
	recordEvent(r.Recorder, k, obs.pod, corev1.EventTypeNormal, nbv1.EventReplacedPod, "Restart", "Replacing pod %s, which could not restart the kernel", obs.pod.Name)
	obs.pod = nil
	return nil
}

// quotaRecheck is how often a kernel refused for its owner's limits is looked at again,
// besides when its owner's usage changes.
const quotaRecheck = time.Minute

// reconcileQuota holds a kernel about to get its pod to its owner's limits: the owner's
// ledger holds its room (the API server reserved it before creating the Kernel; a Kernel
// made with kubectl reserves it here), or the kernel gets no pod and fails with the limit in
// its condition. It returns the spec to build the pod from, with the owner's default
// resources.
func (r *KernelReconciler) reconcileQuota(ctx context.Context, k *nbv1.Kernel, obs *kernelObservation) (*nbv1.KernelSpec, error) {
	// A warm kernel counts once claimed: the claim reserves its room (see nbv1.WarmPool).
	if r.Quota == nil || k.Warm() {
		return obs.spec, nil
	}
	res, err := r.Quota.In(k.Namespace).ReserveKernel(ctx, string(k.Spec.Owner), nil, k.Name, obs.spec)
	var ex *quota.Exceeded
	var na *quota.SpecNotAllowed
	switch {
	case errors.As(err, &ex):
		obs.problem = &problem{reason: nbv1.ReasonQuotaExceeded, fatal: true, message: ex.Error()}
		obs.recheck = quotaRecheck
		return nil, nil
	case errors.As(err, &na):
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecNotAllowed, fatal: true, message: na.Error()}
		obs.recheck = quotaRecheck
		return nil, nil
	case err != nil:
		return nil, err
	}
	spec := obs.spec.DeepCopy()
	spec.Spec.Resources = res
	return spec, nil
}

// recordRoom makes sure the owner's ledger counts a kernel that has a pod: one made before
// the first UserPolicy, or whose reservation an admin removed. What runs is recorded, never
// refused.
func (r *KernelReconciler) recordRoom(ctx context.Context, k *nbv1.Kernel, pod *corev1.Pod) {
	if r.Quota == nil || k.Warm() || len(pod.Spec.Containers) == 0 || pod.DeletionTimestamp != nil {
		return
	}
	ledger := r.Quota.In(k.Namespace)
	held, err := ledger.Holds(ctx, string(k.Spec.Owner), nbv1.ReservationKernel, k.Name)
	if err != nil || held {
		return
	}
	// Not in the ledger: the kernel may have been deleted, and its room given back, since the
	// cache gave k to this reconcile (an API server deletes a kernel, then releases its room).
	// Recorded again, the room would stay held until the usage controller's grace for starts
	// under way had passed, and refuse the owner's next start. So only a kernel that still
	// exists, read around the cache, is recorded.
	if !r.existsLive(ctx, k) {
		return
	}
	room := quota.KernelRoom(k.Name, k.Spec.KernelSpec, pod.Spec.Containers[0].Resources)
	if _, _, err := ledger.Reserve(ctx, quota.Request{Owner: string(k.Spec.Owner), Reservation: room, Record: true}); err != nil {
		log.FromContext(ctx).Error(err, "Recording the kernel in its owner's usage failed")
		return
	}
	// The deletion and its release may also fall between that read and this write: read
	// again, and give back what was written for a kernel that is gone.
	if !r.existsLive(ctx, k) {
		if err := ledger.Release(ctx, string(k.Spec.Owner), nbv1.ReservationKernel, k.Name); err != nil {
			log.FromContext(ctx).Error(err, "Releasing the room of a kernel deleted while it was recorded failed")
		}
	}
}

// existsLive says whether k, read around the cache, still exists and is not being deleted.
func (r *KernelReconciler) existsLive(ctx context.Context, k *nbv1.Kernel) bool {
	live := &nbv1.Kernel{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(k), live)
	return err == nil && live.UID == k.UID && live.DeletionTimestamp == nil
}

// reconcileAgent asks a running kernel's agent for the kernel's state. An agent that does
// not answer leaves the last report in place: the pod's state, not a missed answer, tells
// that a kernel died.
func (r *KernelReconciler) reconcileAgent(ctx context.Context, _ *nbv1.Kernel, obs *kernelObservation) error {
	if _, ready := podState(obs.pod); !ready || obs.pod.Status.PodIP == "" {
		return nil
	}
	obs.running = true
	if obs.secret == nil {
		return nil
	}
	st, err := askAgent(ctx, r.Agents, agentEndpoint(obs.pod.Status.PodIP, obs.secret))
	if err != nil {
		log.FromContext(ctx).V(1).Info("Kernel agent did not answer", "pod", klog.KObj(obs.pod), "error", err.Error())
		return nil
	}
	obs.agent = &st
	return nil
}

// agentEndpoint is where a kernel's agent listens, with the token of the kernel's Secret.
func agentEndpoint(podIP string, secret *corev1.Secret) agentclient.Endpoint {
	return agentclient.Endpoint{Host: podIP, Port: agentapi.Port, Token: string(secret.Data[agentapi.SecretKeyToken])}
}

func askAgent(ctx context.Context, agents AgentStatus, e agentclient.Endpoint) (agentapi.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, agentStatusTimeout)
	defer cancel()
	return agents.Status(ctx, e)
}

// SetupWithManager watches Kernels, their Pods and Secrets, and the KernelSpecs they run.
// Updates of a Kernel's status alone are not watched: a running kernel's status changes
// with its activity, and if each of our writes brought the kernel back its agent would be
// asked again at once, as fast as the API server answers. StatusInterval paces it instead.
func (r *KernelReconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := r.Workers
	if workers <= 0 {
		workers = DefaultKernelWorkers
	}
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&nbv1.Kernel{}, ctrlbuilder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Secret{}).
		Watches(&nbv1.KernelSpec{}, handler.EnqueueRequestsFromMapFunc(r.kernelsOfSpec)).
		Watches(&nbv1.UserUsage{}, handler.EnqueueRequestsFromMapFunc(r.refusedKernelsOf)).
		Watches(&nbv1.UserPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allKernels)).
		Named("kernel").
		Complete(r)
}

// allKernels maps a UserPolicy to every Kernel of its namespace: a new policy's users have
// their running kernels recorded at once, and a changed one may admit refused kernels.
func (r *KernelReconciler) allKernels(ctx context.Context, o client.Object) []reconcile.Request {
	return r.kernelRequests(ctx, "of a user policy's namespace", nil, client.InNamespace(o.GetNamespace()))
}

// refusedKernelsOf maps a user's ledger to the user's kernels refused for their limits, so
// that one waits no longer than the room it needs (a kernel of theirs deleted, say).
func (r *KernelReconciler) refusedKernelsOf(ctx context.Context, o client.Object) []reconcile.Request {
	u := o.(*nbv1.UserUsage)
	refused := func(k *nbv1.Kernel) bool {
		c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed)
		return c != nil && (c.Reason == string(nbv1.ReasonQuotaExceeded) || c.Reason == string(nbv1.ReasonKernelSpecNotAllowed))
	}
	return r.kernelRequests(ctx, "of user "+string(u.Spec.User), refused,
		client.InNamespace(u.Namespace), client.MatchingFields{kernelOwnerIndex: string(u.Spec.User)})
}

// kernelsOfSpec maps a KernelSpec to the Kernels that run it, so that a kernel waiting for
// its spec (or failed on an invalid one) is looked at again when the spec changes.
func (r *KernelReconciler) kernelsOfSpec(ctx context.Context, o client.Object) []reconcile.Request {
	return r.kernelRequests(ctx, "of kernel spec "+o.GetName(), nil,
		client.InNamespace(o.GetNamespace()), client.MatchingFields{kernelSpecIndex: o.GetName()})
}

// kernelRequests are the requests of the Kernels the list options select and keep accepts
// (all when nil); which names them in a failure's log.
func (r *KernelReconciler) kernelRequests(ctx context.Context, which string, keep func(*nbv1.Kernel) bool, opts ...client.ListOption) []reconcile.Request {
	var kernels nbv1.KernelList
	if err := r.List(ctx, &kernels, opts...); err != nil {
		log.FromContext(ctx).Error(err, "List kernels "+which)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(kernels.Items))
	for i := range kernels.Items {
		if keep == nil || keep(&kernels.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kernels.Items[i])})
		}
	}
	return reqs
}
