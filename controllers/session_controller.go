package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

// SessionReconciler ties each Session to its Kernel: it starts the kernel when the spec names
// a kernel spec, owns it (deleting the session deletes the kernel), lets go of kernels the
// session no longer uses, and mirrors the kernel's state. A session whose kernel is gone
// (shut down, culled, deleted) is deleted, as Jupyter drops it.
type SessionReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
}

// +kubebuilder:rbac:groups=nbkube.io,resources=sessions,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=nbkube.io,resources=sessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nbkube.io,resources=sessions/finalizers,verbs=update
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings the session's kernel about and mirrors its status.
func (r *SessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &nbv1.Session{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	var obs sessionObservation
	for _, step := range []func(context.Context, *nbv1.Session, *sessionObservation) error{
		r.reconcileKernel,
		r.releaseOldKernels,
	} {
		if obs.stepErr = step(ctx, s, &obs); obs.stepErr != nil || obs.gone {
			break
		}
	}
	if obs.gone {
		return ctrl.Result{}, r.deleteSession(ctx, s)
	}
	st := sessionStatus(s, obs, metav1.NewTime(r.Clock.Now()))
	if _, _, err := writeStatus(ctx, r.Client, s, sessionStatusOf, st); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, obs.stepErr
}

func sessionStatusOf(s *nbv1.Session) *nbv1.SessionStatus { return &s.Status }

// sessionKernelName is the kernel the session uses: the one its spec names, or one named
// after the session.
func sessionKernelName(s *nbv1.Session) string {
	if s.Spec.Kernel.Name != "" {
		return s.Spec.Kernel.Name
	}
	return s.Name
}

// sessionObservation is what the reconcile steps found.
type sessionObservation struct {
	// kernel is the session's kernel, nil with a problem.
	kernel *nbv1.Kernel
	// seen: kernel was read from the cache, not just created. Only a kernel seen there can
	// later be missed there: one just created may not have reached the cache yet.
	seen    bool
	problem *problem
	// gone: the kernel the session was seen using no longer exists.
	gone bool
	// stepErr is the error of the step that failed; the steps after it did not run.
	stepErr error
}

// reconcileKernel finds or creates the session's kernel and makes the session one of its
// owners. A kernel of another user is never adopted, and a kernel that is gone is not
// started again.
func (r *SessionReconciler) reconcileKernel(ctx context.Context, s *nbv1.Session, obs *sessionObservation) error {
	name := sessionKernelName(s)
	kernel := &nbv1.Kernel{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, kernel)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get kernel: %w", err)
	}
	if kernelGone(s, name, kernel, err) {
		obs.gone = true
		return nil
	}
	if err != nil {
		return r.createKernel(ctx, s, name, obs)
	}
	if kernel.Spec.Owner != s.Spec.Owner {
		obs.problem = &problem{reason: nbv1.ReasonKernelOfAnotherUser, fatal: true,
			message: fmt.Sprintf("kernel %q belongs to another user", name)}
		return nil
	}
	if !hasOwnerRef(kernel, s) {
		// A session that takes up an existing kernel shares it: the kernel lives as long as
		// any of its sessions (garbage collection waits for all owners).
		if err := controllerutil.SetOwnerReference(s, kernel, r.Scheme()); err != nil {
			return err
		}
		if err := r.Update(ctx, kernel); err != nil {
			return fmt.Errorf("add session as owner of kernel: %w", err)
		}
	}
	obs.kernel, obs.seen = kernel, true
	return nil
}

// kernelGone says whether the kernel the session was seen using is gone: missing (getErr is
// NotFound), replaced by another of the same name, or being deleted.
func kernelGone(s *nbv1.Session, name string, kernel *nbv1.Kernel, getErr error) bool {
	if s.Status.KernelUID == "" || s.Status.KernelName != name {
		return false
	}
	return getErr != nil || kernel.UID != s.Status.KernelUID || kernel.DeletionTimestamp != nil
}

func (r *SessionReconciler) createKernel(ctx context.Context, s *nbv1.Session, name string, obs *sessionObservation) error {
	if s.Spec.Kernel.KernelSpec == "" {
		obs.problem = &problem{reason: nbv1.ReasonKernelNotFound, fatal: true,
			message: fmt.Sprintf("kernel %q does not exist and the session names no kernel spec to start one", name)}
		return nil
	}
	kernel := newSessionKernel(s, name)
	if err := controllerutil.SetControllerReference(s, kernel, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, kernel); err != nil {
		if apierrors.IsAlreadyExists(err) {
			obs.problem = &problem{reason: nbv1.ReasonKernelCreating, message: "the kernel is being created"}
			return nil
		}
		return fmt.Errorf("create kernel: %w", err)
	}
	log.FromContext(ctx).Info("Created kernel for session", "kernel", klog.KObj(kernel))
	recordEvent(r.Recorder, s, kernel, corev1.EventTypeNormal, nbv1.EventCreatedKernel, "Create", "Created kernel %s", name)
	obs.kernel = kernel
	return nil
}

// deleteSession drops a session whose kernel is gone, as Jupyter does; the event tells an
// admin why the session went.
func (r *SessionReconciler) deleteSession(ctx context.Context, s *nbv1.Session) error {
	err := r.Delete(ctx, s, client.Preconditions{UID: &s.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Already gone, or replaced by a new session of the same name.
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete session whose kernel is gone: %w", err)
	}
	log.FromContext(ctx).Info("Deleted session whose kernel is gone", "kernel", s.Status.KernelName)
	recordEvent(r.Recorder, s, nil, corev1.EventTypeNormal, nbv1.EventKernelGone, "Delete", "Deleted session: its kernel %s is gone", s.Status.KernelName)
	return nil
}

func newSessionKernel(s *nbv1.Session, name string) *nbv1.Kernel {
	return &nbv1.Kernel{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.Namespace,
			Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelSession: s.Name},
		},
		Spec: nbv1.KernelParameters{
			Owner:      s.Spec.Owner,
			KernelSpec: s.Spec.Kernel.KernelSpec,
			Cluster:    s.Spec.Kernel.Cluster,
			Home:       s.Spec.Kernel.Home,
			Parameters: s.Spec.Kernel.Parameters,
			Path:       builder.NotebookDir(s.Spec.Path),
		},
	}
}

// releaseOldKernels lets go of kernels the session no longer uses after its kernel changed:
// the ones it started are deleted (Jupyter shuts the old kernel down), shared ones lose the
// session as an owner.
func (r *SessionReconciler) releaseOldKernels(ctx context.Context, s *nbv1.Session, _ *sessionObservation) error {
	current := sessionKernelName(s)
	var kernels nbv1.KernelList
	if err := r.List(ctx, &kernels, client.InNamespace(s.Namespace), client.MatchingFields{ownerUIDIndex: string(s.UID)}); err != nil {
		return fmt.Errorf("list kernels: %w", err)
	}
	for i := range kernels.Items {
		k := &kernels.Items[i]
		if k.Name == current || !hasOwnerRef(k, s) {
			continue
		}
		if metav1.IsControlledBy(k, s) {
			if err := r.Delete(ctx, k, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete old kernel %s: %w", k.Name, err)
			}
			recordEvent(r.Recorder, s, k, corev1.EventTypeNormal, nbv1.EventDeletedKernel, "Delete", "Deleted kernel %s the session no longer uses", k.Name)
			continue
		}
		if err := controllerutil.RemoveOwnerReference(s, k, r.Scheme()); err != nil {
			return err
		}
		if err := r.Update(ctx, k); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("release kernel %s: %w", k.Name, err)
		}
	}
	return nil
}

func hasOwnerRef(o metav1.Object, owner metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// sessionStatus mirrors the kernel's conditions and state onto the session, and records
// the kernel's UID once it was seen.
func sessionStatus(s *nbv1.Session, obs sessionObservation, now metav1.Time) nbv1.SessionStatus {
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	if obs.stepErr != nil {
		setReconcileError(&st.Conditions, obs.stepErr, s.Generation, now)
		return st
	}
	if name := sessionKernelName(s); st.KernelName != name {
		// The UID belonged to the kernel the session used before.
		st.KernelName, st.KernelUID = name, ""
	}
	if obs.seen {
		st.KernelUID = obs.kernel.UID
	}
	kernel, prob := obs.kernel, obs.problem
	if prob != nil {
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, prob.reason, prob.message, s.Generation, now)
		if prob.fatal {
			setCondition(&st.Conditions, nbv1.ConditionFailed, metav1.ConditionTrue, prob.reason, prob.message, s.Generation, now)
			st.ExecutionState = nbv1.ExecutionStateDead
		} else {
			meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
			st.ExecutionState = nbv1.ExecutionStateStarting
		}
		return st
	}
	st.ExecutionState = kernel.Status.ExecutionState
	if st.ExecutionState == "" {
		st.ExecutionState = nbv1.ExecutionStateStarting
	}
	for _, typ := range []string{nbv1.ConditionReady, nbv1.ConditionFailed} {
		c := meta.FindStatusCondition(kernel.Status.Conditions, typ)
		switch {
		case c != nil:
			setCondition(&st.Conditions, typ, c.Status, nbv1.ConditionReason(c.Reason), c.Message, s.Generation, now)
		case typ == nbv1.ConditionReady:
			setCondition(&st.Conditions, typ, metav1.ConditionFalse, nbv1.ReasonKernelCreating, "the kernel is starting", s.Generation, now)
		default:
			meta.RemoveStatusCondition(&st.Conditions, typ)
		}
	}
	return st
}

// SetupWithManager watches Sessions and every Kernel a session owns, shared ones included.
func (r *SessionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&nbv1.Session{}).
		Watches(&nbv1.Kernel{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &nbv1.Session{})).
		Named("session").
		Complete(r)
}
