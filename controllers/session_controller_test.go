package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func session(ns, name string, k nbv1.SessionKernel) *nbv1.Session {
	return &nbv1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       nbv1.SessionParameters{Owner: "alice", Path: "projects/a.ipynb", Name: "a.ipynb", Type: "notebook", Kernel: k},
	}
}

func sessionCondition(t *testing.T, s *nbv1.Session, typ string, status metav1.ConditionStatus, reason nbv1.ConditionReason) {
	t.Helper()
	eventually(t, fmt.Sprintf("session %s condition %s=%s/%s", s.Name, typ, status, reason), func() error {
		if err := get(s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != string(reason) {
			return fmt.Errorf("conditions %+v", s.Status.Conditions)
		}
		return nil
	})
}

// sessionStartingItsKernel makes a namespace with a python3 kernel spec and a session s1
// that starts its kernel. It returns the namespace, the session and its kernel, to be read.
func sessionStartingItsKernel(t *testing.T) (string, *nbv1.Session, *nbv1.Kernel) {
	t.Helper()
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	s := session(ns, "s1", nbv1.SessionKernel{KernelSpec: "python3"})
	create(t, s)
	return ns, s, &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}}
}

func TestSession_StartsItsKernelAndMirrorsIt(t *testing.T) {
	_, s, k := sessionStartingItsKernel(t)
	eventually(t, "kernel of the session", func() error { return get(k) })
	if !metav1.IsControlledBy(k, s) {
		t.Errorf("kernel owner references %v", k.OwnerReferences)
	}
	if k.Spec.Owner != "alice" || k.Spec.KernelSpec != "python3" || k.Spec.Path != "projects" {
		t.Errorf("kernel spec %+v: want alice's python3 kernel in the notebook's directory", k.Spec)
	}
	sessionCondition(t, s, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	if s.Status.KernelName != "s1" || s.Status.ExecutionState != nbv1.ExecutionStateStarting {
		t.Errorf("status %+v", s.Status)
	}

	pod := kernelPod(t, k)
	setPodStatus(t, pod, func(st *corev1.PodStatus) {
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	})
	sessionCondition(t, s, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady)
	if s.Status.ExecutionState != nbv1.ExecutionStateIdle {
		t.Errorf("execution state %q, want idle", s.Status.ExecutionState)
	}
}

func TestSession_ChangingTheKernelDeletesTheOldOne(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"), kernelSpec(ns, "other"))
	s := session(ns, "s1", nbv1.SessionKernel{Name: "k-old", KernelSpec: "python3"})
	create(t, s)
	old := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k-old"}}
	eventually(t, "first kernel", func() error { return get(old) })

	update(t, s, func(s *nbv1.Session) { s.Spec.Kernel = nbv1.SessionKernel{Name: "k-new", KernelSpec: "other"} })
	nk := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k-new"}}
	eventually(t, "new kernel", func() error { return get(nk) })
	if nk.Spec.KernelSpec != "other" {
		t.Errorf("new kernel runs %s", nk.Spec.KernelSpec)
	}
	eventually(t, "old kernel deleted", func() error {
		err := get(old)
		if apierrors.IsNotFound(err) || (err == nil && old.DeletionTimestamp != nil) {
			return nil
		}
		return fmt.Errorf("old kernel still there: %w", err)
	})
	eventually(t, "status names the new kernel and its UID", func() error {
		if err := get(s); err != nil {
			return err
		}
		if s.Status.KernelName != "k-new" || s.Status.KernelUID != nk.UID {
			return fmt.Errorf("kernelName %q kernelUID %q, want k-new %q", s.Status.KernelName, s.Status.KernelUID, nk.UID)
		}
		return nil
	})
	// The old kernel going is no reason to drop the session that moved on from it.
	if err := get(s); err != nil || s.DeletionTimestamp != nil {
		t.Errorf("session after its old kernel went: %v, deleting %v", err, s.DeletionTimestamp)
	}
}

// kernelUIDRecorded waits until the session has recorded the UID of its kernel.
func kernelUIDRecorded(t *testing.T, s *nbv1.Session, k *nbv1.Kernel) {
	t.Helper()
	eventually(t, "session records its kernel's UID", func() error {
		if err := get(k); err != nil {
			return err
		}
		if err := get(s); err != nil {
			return err
		}
		if s.Status.KernelUID != k.UID {
			return fmt.Errorf("kernelUID %q, kernel's %q", s.Status.KernelUID, k.UID)
		}
		return nil
	})
}

func goneOrGoing(o client.Object) error {
	err := get(o)
	if apierrors.IsNotFound(err) || (err == nil && o.GetDeletionTimestamp() != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still there", o.GetName())
}

func TestSession_IsDeletedWhenItsKernelIsGone(t *testing.T) {
	ns, started, k := sessionStartingItsKernel(t)
	kernelUIDRecorded(t, started, k)

	shared := kernel(ns, "shared", "python3")
	create(t, shared)
	adopter := session(ns, "s2", nbv1.SessionKernel{Name: "shared"})
	create(t, adopter)
	kernelUIDRecorded(t, adopter, shared)

	// As DELETE /api/kernels/<id>, the culler or kubectl delete would.
	for _, kn := range []*nbv1.Kernel{k, shared} {
		if err := k8sClient.Delete(context.Background(), kn); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*nbv1.Session{started, adopter} {
		eventually(t, "session "+s.Name+" deleted", func() error { return goneOrGoing(s) })
		eventually(t, "KernelGone event", func() error { return findEvent(ns, s.Name, "Session", nbv1.EventKernelGone) })
	}
	// envtest has no garbage collector: a kernel started again would still be there.
	if err := get(k); !apierrors.IsNotFound(err) {
		t.Errorf("the session's kernel was started again: %v", err)
	}
}

func TestSession_SharesAnExistingKernelOfTheSameUserOnly(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	shared := kernel(ns, "shared", "python3")
	create(t, shared)

	s := session(ns, "s1", nbv1.SessionKernel{Name: "shared"})
	create(t, s)
	eventually(t, "session owns the shared kernel", func() error {
		if err := get(shared); err != nil {
			return err
		}
		for _, ref := range shared.OwnerReferences {
			if ref.Kind == "Session" && ref.Name == "s1" {
				if ref.Controller != nil && *ref.Controller {
					return fmt.Errorf("a shared kernel must not be controlled by one session: %+v", ref)
				}
				return nil
			}
		}
		return fmt.Errorf("owner references %v", shared.OwnerReferences)
	})

	// Moving the session to another kernel lets go of the shared one without deleting it.
	update(t, s, func(s *nbv1.Session) { s.Spec.Kernel = nbv1.SessionKernel{Name: "own", KernelSpec: "python3"} })
	eventually(t, "shared kernel released", func() error {
		if err := get(shared); err != nil {
			return err
		}
		if len(shared.OwnerReferences) != 0 || shared.DeletionTimestamp != nil {
			return fmt.Errorf("owner references %v deleting %v", shared.OwnerReferences, shared.DeletionTimestamp)
		}
		return nil
	})

	bobs := kernel(ns, "bobs", "python3")
	bobs.Spec.Owner = "bob"
	create(t, bobs)
	theft := session(ns, "s2", nbv1.SessionKernel{Name: "bobs"})
	create(t, theft)
	sessionCondition(t, theft, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelOfAnotherUser)
	if err := get(bobs); err != nil || len(bobs.OwnerReferences) != 0 {
		t.Errorf("bob's kernel was adopted: %v %v", bobs.OwnerReferences, err)
	}
}

func TestSession_MissingKernelWithoutSpecFails(t *testing.T) {
	ns := namespace(t)
	s := session(ns, "s1", nbv1.SessionKernel{Name: "nowhere"})
	create(t, s)
	sessionCondition(t, s, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelNotFound)

	empty := session(ns, "s2", nbv1.SessionKernel{})
	if err := k8sClient.Create(context.Background(), empty); err == nil {
		t.Error("a session with neither a kernel name nor a kernel spec was accepted")
	}
}

// A step that fails (here: the session's kernel is refused by a quota) is told in the
// status.
func TestSession_AFailedStepIsReportedInItsStatus(t *testing.T) {
	ns := namespace(t)
	exhaustQuota(t, ns, "count/kernels.nbkube.io")
	s := session(ns, "s1", nbv1.SessionKernel{KernelSpec: "python3"})
	create(t, s)
	sessionCondition(t, s, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonReconcileError)
	if r := meta.FindStatusCondition(s.Status.Conditions, nbv1.ConditionReady); !strings.Contains(r.Message, "create kernel") || !strings.Contains(r.Message, "exceeded quota") {
		t.Errorf("Ready message %q does not say which step failed and why", r.Message)
	}
}
