package controllers

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/kernelparams"
	"github.com/nbkube/nbkube/internal/quota"
)

// TerminalReconciler runs each Terminal as a pod with its own Secret, and reflects the pod's
// state, and what the terminal's agent reports (activity, connections), in its status. A
// terminal's shell lives in its pod's memory: a pod that ended or was deleted is not
// replaced, the Terminal says why it ended and waits to be deleted.
type TerminalReconciler struct {
	client.Client
	// APIReader reads around the cache, which holds only nbkube's pods and secrets.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// AgentTokenKey derives the terminals' agent tokens (agenttoken.Terminal), as the API
	// server does without reading their Secrets.
	AgentTokenKey []byte
	Options       builder.Options
	// Deliveries decides the agent's delivery when Options says Auto.
	Deliveries *AgentDeliveries
	// Agents asks the agents of running terminals for their activity.
	Agents TerminalAgents
	// StatusInterval is how often a running terminal's agent is asked.
	StatusInterval time.Duration
	// Quota holds terminals to their owners' UserPolicies (see reconcileQuota).
	Quota *quota.Ledger

	memory terminalMemory
}

// TerminalAgents asks a terminal's agent for its activity; *agentclient.Client is one.
type TerminalAgents interface {
	TerminalStatus(ctx context.Context, e agentclient.Endpoint) (agentapi.TerminalStatus, error)
}

// terminalAgentRetry is how soon a terminal whose pod runs, but whose agent did not answer
// yet, is looked at again first. The agent listens within milliseconds of its start, while
// the readiness probe may come a second later (nbkube local's first one does): asking the
// agent makes the terminal Running as soon as it can take a client. maxTerminalAgentRetry
// bounds the wait as it doubles.
const (
	terminalAgentRetry    = 100 * time.Millisecond
	maxTerminalAgentRetry = 10 * time.Second
)

// +kubebuilder:rbac:groups=nbkube.io,resources=terminals,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=nbkube.io,resources=terminals/status,verbs=get;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=terminals/finalizers,verbs=update
// +kubebuilder:rbac:groups=nbkube.io,resources=kernelspecs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the Terminal's Secret and Pod exist and computes its status.
func (r *TerminalReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &nbv1.Terminal{}
	if err := r.Get(ctx, req.NamespacedName, t); err != nil {
		r.memory.mark(req.NamespacedName, false)
		r.memory.answered(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil {
		// The Secret and Pod are collected through their owner references.
		r.memory.mark(req.NamespacedName, false)
		r.memory.answered(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if t.Status.Phase == nbv1.TerminalEnded {
		return r.forgetEnded(ctx, t)
	}
	var obs terminalObservation
	for _, step := range []func(context.Context, *nbv1.Terminal, *terminalObservation) error{
		r.reconcileSecret,
		r.reconcilePod,
		r.reconcileAgent,
	} {
		if obs.stepErr = step(ctx, t, &obs); obs.stepErr != nil || obs.problem != nil {
			break
		}
	}
	st := terminalStatus(t, obs, metav1.NewTime(r.Clock.Now()))
	if obs.stepErr == nil {
		r.memory.mark(req.NamespacedName, st.Phase == nbv1.TerminalRunning)
		if !obs.agentSoon {
			r.memory.answered(req.NamespacedName)
		}
	}
	lost, err := r.updateStatus(ctx, t, st)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case obs.stepErr != nil:
		return ctrl.Result{}, obs.stepErr
	case lost:
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case st.Phase == nbv1.TerminalRunning:
		// Nothing announces a terminal's activity: its agent is asked again later.
		return ctrl.Result{RequeueAfter: r.StatusInterval}, nil
	case st.Phase == nbv1.TerminalEnded:
		return ctrl.Result{RequeueAfter: terminalEndedGrace}, nil
	case obs.agentSoon:
		return ctrl.Result{RequeueAfter: r.memory.askAgain(req.NamespacedName)}, nil
	case obs.recheck > 0:
		return ctrl.Result{RequeueAfter: obs.recheck}, nil
	}
	return ctrl.Result{}, nil
}

// terminalEndedGrace is how long a terminal whose shell exited stays, for its clients to
// hear that it ended, before it is deleted: Jupyter forgets a terminal whose shell exited
// (no longer listed, 404), and its room in the owner's ledger is given back with it.
const terminalEndedGrace = 30 * time.Second

// forgetEnded deletes a terminal whose shell exited once terminalEndedGrace has passed.
func (r *TerminalReconciler) forgetEnded(ctx context.Context, t *nbv1.Terminal) (ctrl.Result, error) {
	if c := meta.FindStatusCondition(t.Status.Conditions, nbv1.ConditionReady); c != nil {
		if wait := terminalEndedGrace - r.Clock.Now().Sub(c.LastTransitionTime.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	err := r.Delete(ctx, t, client.Preconditions{UID: &t.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err == nil {
		log.FromContext(ctx).Info("Deleted a terminal whose shell exited", "terminal", t.Name)
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

func (r *TerminalReconciler) reconcileSecret(ctx context.Context, t *nbv1.Terminal, obs *terminalObservation) error {
	existing := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKeyFromObject(t), existing)
	if err == nil {
		if !metav1.IsControlledBy(existing, t) {
			obs.problem = terminalSecretConflict(existing)
			return nil
		}
		obs.secret = existing
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get terminal secret: %w", err)
	}
	secret := builder.TerminalSecret(t, agenttoken.Terminal(r.AgentTokenKey, t.Namespace, t.Name, string(t.UID)))
	err = r.Create(ctx, secret)
	switch {
	case err == nil:
		obs.secret = secret
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create terminal secret: %w", err)
	}
	// Not in the cache: this terminal's own, made a moment ago, or someone else's, which is
	// never adopted (the pod would run with a token the API server does not know).
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(t), existing); err != nil {
		return fmt.Errorf("get terminal secret: %w", err)
	}
	if !metav1.IsControlledBy(existing, t) {
		obs.problem = terminalSecretConflict(existing)
		return nil
	}
	obs.secret = existing
	return nil
}

func terminalSecretConflict(s *corev1.Secret) *problem {
	return &problem{reason: nbv1.ReasonSecretConflict, fatal: true,
		message: fmt.Sprintf("secret %s exists and does not belong to this terminal", s.Name)}
}

func terminalPodConflict(name string) *problem {
	return &problem{reason: nbv1.ReasonPodConflict, fatal: true,
		message: fmt.Sprintf("pod %s exists and does not belong to this terminal", name)}
}

// hadPod says whether the terminal's pod started or ended: a terminal whose pod is gone then
// has lost its shell, or never will have one, and no new pod brings it back. A terminal that
// failed before it had a pod (waitingReasons) gets one when what it waits for changes.
func hadPod(t *nbv1.Terminal) bool {
	switch t.Status.Phase {
	case nbv1.TerminalRunning, nbv1.TerminalEnded:
		return true
	case nbv1.TerminalFailed:
		c := meta.FindStatusCondition(t.Status.Conditions, nbv1.ConditionReady)
		return c != nil && !waitingReasons[nbv1.ConditionReason(c.Reason)] && c.Reason != string(nbv1.ReasonReconcileError)
	}
	return t.Status.PodIP != ""
}

func (r *TerminalReconciler) reconcilePod(ctx context.Context, t *nbv1.Terminal, obs *terminalObservation) error {
	pod := &corev1.Pod{}
	err := r.Get(ctx, client.ObjectKeyFromObject(t), pod)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(pod, t) {
			obs.problem = terminalPodConflict(pod.Name)
			return nil
		}
		obs.pod = pod
		r.recordRoom(ctx, t, pod)
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get terminal pod: %w", err)
	case hadPod(t):
		obs.podGone = true
		return nil
	}
	// The cache may not have the status that says the pod ran yet when the pod's deletion
	// brings the terminal here: the Terminal as it is decides, once per terminal's start.
	live := &nbv1.Terminal{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(t), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.UID == t.UID && hadPod(live) {
		*t = *live
		obs.podGone = true
		return nil
	}
	spec, err := r.kernelSpec(ctx, t, obs)
	if err != nil || obs.problem != nil {
		return err
	}
	if _, err := builder.HomeOf(t.Spec.Owner, t.Spec.Home, r.Options); err != nil {
		obs.problem = &problem{reason: nbv1.ReasonHomeInvalid, fatal: true, message: err.Error()}
		return nil
	}
	if spec, err = r.reconcileQuota(ctx, t, spec, obs); err != nil || obs.problem != nil {
		return err
	}
	claim, err := r.ownClaim(ctx, t)
	if err != nil {
		return err
	}
	pod = builder.TerminalPod(t, spec, r.Deliveries.Resolve(ctx, r.Options))
	made, err := createAgentPod(ctx, r.Client, r.APIReader, r.Recorder, t, pod, claim, "terminal")
	if errors.Is(err, errPodConflict) {
		obs.problem = terminalPodConflict(pod.Name)
		return nil
	}
	obs.pod = made
	return err
}

// kernelSpec finds the KernelSpec whose image, resources and pod template a new terminal pod
// takes, with its launch parameters' defaults applied (a parameter may set the image). A
// running terminal whose spec is deleted or edited keeps running.
func (r *TerminalReconciler) kernelSpec(ctx context.Context, t *nbv1.Terminal, obs *terminalObservation) (*nbv1.KernelSpec, error) {
	spec := &nbv1.KernelSpec{}
	err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.KernelSpec}, spec)
	if apierrors.IsNotFound(err) {
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecNotFound, fatal: true,
			message: fmt.Sprintf("kernel spec %q does not exist in namespace %s", t.Spec.KernelSpec, t.Namespace)}
		obs.recheck = quotaRecheck
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get kernel spec: %w", err)
	}
	if problems := validateKernelSpec(&spec.Spec, r.Options); len(problems) > 0 {
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecInvalid, fatal: true,
			message: fmt.Sprintf("kernel spec %q is invalid: %s", spec.Name, strings.Join(problems, "; "))}
		return nil, nil
	}
	applied, err := kernelparams.Apply(spec, nil)
	if err != nil {
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecInvalid, fatal: true, message: err.Error()}
		return nil, nil
	}
	return applied, nil
}

// reconcileQuota holds a terminal about to get its pod to its owner's UserPolicies: the
// owner's ledger holds its room (the API server reserved it before creating the Terminal; a
// Terminal made with kubectl reserves it here), or the terminal gets no pod and fails with
// the limit in its condition. The spec it returns has the owner's default resources, as a
// kernel's pod gets them, and the owner's policies must allow the spec, whose image the
// terminal runs.
func (r *TerminalReconciler) reconcileQuota(ctx context.Context, t *nbv1.Terminal, spec *nbv1.KernelSpec, obs *terminalObservation) (*nbv1.KernelSpec, error) {
	if r.Quota == nil {
		return spec, nil
	}
	ledger := r.Quota.In(t.Namespace)
	lim, on, err := ledger.Limits(ctx, string(t.Spec.Owner), nil)
	if err != nil || !on {
		return spec, err
	}
	if !lim.AllowsSpec(spec.Name) {
		na := &quota.SpecNotAllowed{User: string(t.Spec.Owner), Spec: spec.Name, Allowed: lim.KernelSpecs}
		obs.problem = &problem{reason: nbv1.ReasonKernelSpecNotAllowed, fatal: true, message: na.Error()}
		obs.recheck = quotaRecheck
		return nil, nil
	}
	spec = spec.DeepCopy()
	spec.Spec.Resources = quota.KernelResources(spec.Spec.Resources, lim.DefaultResources)
	_, _, err = ledger.Reserve(ctx, quota.Request{Owner: string(t.Spec.Owner),
		Reservation: quota.TerminalRoom(t.Name, spec.Name, spec.Spec.Resources)})
	var ex *quota.Exceeded
	switch {
	case errors.As(err, &ex):
		obs.problem = &problem{reason: nbv1.ReasonQuotaExceeded, fatal: true, message: ex.Error()}
		obs.recheck = quotaRecheck
		return nil, nil
	case err != nil:
		return nil, err
	}
	return spec, nil
}

// recordRoom makes sure the owner's ledger counts a terminal that has a pod: one made before
// the first UserPolicy, or whose reservation an admin removed. What runs is recorded, never
// refused; a terminal whose shell ended takes no room.
func (r *TerminalReconciler) recordRoom(ctx context.Context, t *nbv1.Terminal, pod *corev1.Pod) {
	if r.Quota == nil || len(pod.Spec.Containers) == 0 || pod.DeletionTimestamp != nil || podFinished(pod) {
		return
	}
	ledger := r.Quota.In(t.Namespace)
	held, err := ledger.Holds(ctx, string(t.Spec.Owner), nbv1.ReservationTerminal, t.Name)
	if err != nil || held || !r.existsLive(ctx, t) {
		return
	}
	room := quota.TerminalRoom(t.Name, t.Spec.KernelSpec, pod.Spec.Containers[0].Resources)
	if _, _, err := ledger.Reserve(ctx, quota.Request{Owner: string(t.Spec.Owner), Reservation: room, Record: true}); err != nil {
		log.FromContext(ctx).Error(err, "Recording the terminal in its owner's usage failed")
		return
	}
	// Deleted, and its room given back, between the read and the write: give back what was
	// written for a terminal that is gone (see KernelReconciler.recordRoom).
	if !r.existsLive(ctx, t) {
		if err := ledger.Release(ctx, string(t.Spec.Owner), nbv1.ReservationTerminal, t.Name); err != nil {
			log.FromContext(ctx).Error(err, "Releasing the room of a terminal deleted while it was recorded failed")
		}
	}
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// existsLive says whether t, read around the cache, still exists and is not being deleted.
func (r *TerminalReconciler) existsLive(ctx context.Context, t *nbv1.Terminal) bool {
	live := &nbv1.Terminal{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(t), live)
	return err == nil && live.UID == t.UID && live.DeletionTimestamp == nil
}

// ownClaim is the owner's own claim that the terminal's pod mounts instead of the home's
// subPath of the contents volume, as a kernel's (KernelReconciler.ownClaim).
func (r *TerminalReconciler) ownClaim(ctx context.Context, t *nbv1.Terminal) (string, error) {
	return ownClaim(ctx, r.APIReader, r.Recorder, t, t.Spec.Owner, t.Spec.Home, r.Options)
}

// reconcileAgent asks the agent of a terminal whose pod runs for its activity. One that
// answers takes clients, whether or not the kubelet has probed it yet. An agent that does not
// answer leaves the last report in place: the pod's state tells that a terminal ended.
func (r *TerminalReconciler) reconcileAgent(ctx context.Context, _ *nbv1.Terminal, obs *terminalObservation) error {
	pod := obs.pod
	if pod == nil || obs.secret == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return nil
	}
	if st := terminalPodState(pod); st.phase != nbv1.TerminalPending && st.phase != nbv1.TerminalRunning {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, agentStatusTimeout)
	defer cancel()
	st, err := r.Agents.TerminalStatus(ctx, agentEndpoint(pod.Status.PodIP, obs.secret))
	if err != nil {
		log.FromContext(ctx).V(1).Info("Terminal agent did not answer", "pod", klog.KObj(pod), "error", err.Error())
		obs.agentSoon = !podReady(pod)
		return nil
	}
	obs.agent = &st
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SetupWithManager watches Terminals, their Pods and Secrets, the KernelSpecs they run and
// their owners' usage. Updates of a Terminal's status alone are not watched: StatusInterval
// paces the polls of its agent, and each of our writes would otherwise bring it back.
func (r *TerminalReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.Terminal{}, ctrlbuilder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Secret{}).
		Watches(&nbv1.KernelSpec{}, handler.EnqueueRequestsFromMapFunc(r.terminalsWaitingFor)).
		Watches(&nbv1.UserUsage{}, handler.EnqueueRequestsFromMapFunc(r.terminalsWaitingFor)).
		Watches(&nbv1.UserPolicy{}, handler.EnqueueRequestsFromMapFunc(r.terminalsWaitingFor)).
		Named("terminal").
		Complete(r)
}

// terminalsWaitingFor maps a change that may let a refused terminal start (its spec made,
// its owner's usage down, a policy changed) to the terminals of the namespace that have no
// pod for a reason of that kind.
func (r *TerminalReconciler) terminalsWaitingFor(ctx context.Context, o client.Object) []reconcile.Request {
	opts := []client.ListOption{client.InNamespace(o.GetNamespace())}
	if u, ok := o.(*nbv1.UserUsage); ok {
		opts = append(opts, client.MatchingFields{terminalOwnerIndex: string(u.Spec.User)})
	}
	var terminals nbv1.TerminalList
	if err := r.List(ctx, &terminals, opts...); err != nil {
		log.FromContext(ctx).Error(err, "List terminals waiting for a change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range terminals.Items {
		t := &terminals.Items[i]
		if ks, ok := o.(*nbv1.KernelSpec); ok && t.Spec.KernelSpec != ks.Name {
			continue
		}
		if c := meta.FindStatusCondition(t.Status.Conditions, nbv1.ConditionReady); c != nil && waitingReasons[nbv1.ConditionReason(c.Reason)] {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)})
		}
	}
	return reqs
}

// waitingReasons are why a terminal failed before it had a pod: refusals that a change
// elsewhere may lift (its spec made or fixed, its owner's usage or policies changed, a
// conflicting object deleted).
var waitingReasons = map[nbv1.ConditionReason]bool{
	nbv1.ReasonKernelSpecNotFound: true, nbv1.ReasonKernelSpecInvalid: true,
	nbv1.ReasonQuotaExceeded: true, nbv1.ReasonKernelSpecNotAllowed: true,
	nbv1.ReasonHomeInvalid: true, nbv1.ReasonSecretConflict: true, nbv1.ReasonPodConflict: true,
}
