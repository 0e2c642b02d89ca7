package controllers

import (
	"context"
	"encoding/base64"
	"encoding/hex"
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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/builder"
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
	Rand      io.Reader
	Options   builder.Options
	// Agents asks the agents of running kernels for their status.
	Agents AgentStatus
	// StatusInterval is how often a running kernel's agent is asked.
	StatusInterval time.Duration

	starts kernelStarts
	replay replayHeld
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
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels/finalizers,verbs=update
// +kubebuilder:rbac:groups=nbkube.io,resources=kernelspecs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the Kernel's Secret and Pod exist and computes its status.
func (r *KernelReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	began := r.Clock.Now()
	kernel := &nbv1.Kernel{}
	if err := r.Get(ctx, req.NamespacedName, kernel); err != nil {
		r.starts.forget(req.NamespacedName)
		r.replay.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if kernel.DeletionTimestamp != nil {
		// The Secret and Pod are collected through their owner references.
		r.starts.forget(req.NamespacedName)
		r.replay.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
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
		r.replay.set(req.NamespacedName, kernel.Spec.KernelSpec, obs.agent.ReplayBytes)
	case obs.stepErr == nil && !obs.running:
		// The kernel ended, or never ran: its agent holds nothing. An agent that only missed
		// an answer keeps its last report.
		r.replay.forget(req.NamespacedName)
	}
	now := metav1.NewTime(r.Clock.Now())
	st := kernelStatus(kernel, obs, now)
	r.starts.observe(kernel, &obs, &st, began, now.Time)
	lost, werr := r.updateStatus(ctx, kernel, st)
	if lost && werr == nil {
		// The cache had not caught up with a write, most often this controller's own of a
		// moment ago (a starting kernel's pod changes in quick steps): the same observations
		// are written again onto the live Kernel now, rather than a second later, which a
		// client waiting for the kernel's address would wait too.
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
		return ctrl.Result{RequeueAfter: r.StatusInterval}, nil
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
	if problems := validateKernelSpec(&spec.Spec, r.Options.DefaultKernelImage); len(problems) > 0 {
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecInvalid, fatal: true,
			message: fmt.Sprintf("kernel spec %q is invalid: %s", spec.Name, strings.Join(problems, "; "))}
		return nil
	}
	obs.spec = spec
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
	key, token := make([]byte, 32), make([]byte, 32)
	if _, err := io.ReadFull(r.Rand, key); err != nil {
		return fmt.Errorf("kernel key: %w", err)
	}
	if _, err := io.ReadFull(r.Rand, token); err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	secret := builder.KernelSecret(k, hex.EncodeToString(key), base64.RawURLEncoding.EncodeToString(token))
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
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get kernel pod: %w", err)
	}
	if err := r.kernelSpec(ctx, k, obs); err != nil || obs.problem != nil {
		return err
	}
	if _, err := builder.KernelHome(k, r.Options); err != nil {
		obs.problem = &problem{reason: nbv1.ReasonHomeInvalid, fatal: true, message: err.Error()}
		return nil
	}
	pod = builder.KernelPod(k, obs.spec, r.Options)
	if err := r.Create(ctx, pod); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create kernel pod: %w", err)
		}
		existing := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
			return fmt.Errorf("get kernel pod: %w", err)
		}
		if !metav1.IsControlledBy(existing, k) {
			obs.problem = &problem{reason: nbv1.ReasonPodConflict, fatal: true,
				message: fmt.Sprintf("pod %s exists and does not belong to this kernel", pod.Name)}
			return nil
		}
		// Ours, and not in the cache yet; its own event brings us back.
		obs.pod = existing
		return nil
	}
	log.FromContext(ctx).Info("Created kernel pod", "pod", klog.KObj(pod))
	recordEvent(r.Recorder, k, pod, corev1.EventTypeNormal, nbv1.EventCreatedPod, "Create", "Created pod %s", pod.Name)
	obs.pod = pod
	return nil
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

// updateStatus writes the status when it changed and tells of a new failure with an event.
// lost says that the status changed but another write won: our own status writes do not
// bring the kernel back (see SetupWithManager), so the caller tries again.
func (r *KernelReconciler) updateStatus(ctx context.Context, k *nbv1.Kernel, st nbv1.KernelStatus) (lost bool, err error) {
	before := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed)
	res, err := writeStatus(ctx, r.Client, k, kernelStatusOf, st)
	if err != nil {
		return false, err
	}
	after := meta.FindStatusCondition(st.Conditions, nbv1.ConditionFailed)
	if res == statusWritten && after != nil && before == nil {
		countFailure(k, k.Status, nbv1.ConditionReason(after.Reason))
	}
	if res == statusWritten && after != nil && (before == nil || before.Reason != after.Reason) {
		// The failure is an event too, with the condition's reason, so that an admin
		// watching events sees it.
		recordEvent(r.Recorder, k, nil, corev1.EventTypeWarning, nbv1.EventReason(after.Reason), "Start", "%s", after.Message)
	}
	return res == statusLost, nil
}

func kernelStatusOf(k *nbv1.Kernel) *nbv1.KernelStatus { return &k.Status }

// SetupWithManager watches Kernels, their Pods and Secrets, and the KernelSpecs they run.
// Updates of a Kernel's status alone are not watched: a running kernel's status changes
// with its activity, and if each of our writes brought the kernel back its agent would be
// asked again at once, as fast as the API server answers. StatusInterval paces it instead.
func (r *KernelReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.Kernel{}, ctrlbuilder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Secret{}).
		Watches(&nbv1.KernelSpec{}, handler.EnqueueRequestsFromMapFunc(r.kernelsOfSpec)).
		Named("kernel").
		Complete(r)
}

// kernelsOfSpec maps a KernelSpec to the Kernels that run it, so that a kernel waiting for
// its spec (or failed on an invalid one) is looked at again when the spec changes.
func (r *KernelReconciler) kernelsOfSpec(ctx context.Context, o client.Object) []reconcile.Request {
	var kernels nbv1.KernelList
	if err := r.List(ctx, &kernels, client.InNamespace(o.GetNamespace()), client.MatchingFields{kernelSpecIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "List kernels of kernel spec", "kernelSpec", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(kernels.Items))
	for _, k := range kernels.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&k)})
	}
	return reqs
}
