package repository

// A session's kernel changed by PATCH: the kernel it used before is shut down before the
// answer, as Jupyter's session handler does.

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// observedWait bounds the wait for the session's controller to take in a change of the
// session's kernel: it does within milliseconds while it runs.
const observedWait = 5 * time.Second

// letGo shuts down old, the kernel the session s used before its kernel changed (as the
// cache had it before the change), and gives its room back, before the PATCH answers:
// Jupyter's handler shuts the previous kernel down and waits for it, so a client that lists
// the kernels next no longer sees it, and a user at their limit may start another at once.
// The session's controller would let it go too, but after the answer, and the room of a
// kernel it deletes is freed only once the usage controller's grace for starts under way has
// passed (a minute).
//
// A kernel the session started is shut down, as its controller does. One it took up (started
// by POST /api/kernels, or another session's) is shut down too, as Jupyter does, unless
// another session still uses it: such a kernel lives as long as any of its sessions (see
// DeleteSession), and the controller only drops this session from its owners.
//
// Failures are logged, not answered: the change is made, and the controller still lets the
// kernel go.
func (r *Sessions) letGo(ctx context.Context, s *nbv1.Session, old *nbv1.Kernel) {
	ctx = context.WithoutCancel(ctx)
	logger := log.FromContext(ctx).WithValues("session", s.Name, "kernel", old.Name)
	if !metav1.IsControlledBy(old, s) {
		shared, err := r.usedByAnother(ctx, s, old.Name)
		if err != nil {
			logger.Error(err, "Listing the sessions failed; the session's previous kernel is left to its controller")
			return
		}
		if shared {
			return
		}
	}
	// The process first: the controller may be deleting the resource already, and the pod
	// with it, whose agent then still answers until the kernel has exited.
	r.Kernels.stopProcess(ctx, old)
	// Until the controller has taken the change in, old is the kernel it knows the session
	// by: seeing its resource go, it would take the session's kernel for gone and delete the
	// session.
	if !r.waitObserved(ctx, s) {
		logger.Info("The session's controller has not taken its new kernel in; the previous kernel's resource is left to it")
		return
	}
	if err := r.Kernels.remove(ctx, old); err != nil {
		logger.Error(err, "Deleting the session's previous kernel failed; it is left to the session's controller")
	}
}

// waitObserved waits until the cached session shows that its controller has reconciled s's
// generation; false when it has not within observedWait.
func (r *Sessions) waitObserved(ctx context.Context, s *nbv1.Session) bool {
	ctx, cancel := context.WithTimeout(ctx, observedWait)
	defer cancel()
	cur := &nbv1.Session{}
	for {
		err := r.Reader.Get(ctx, client.ObjectKeyFromObject(s), cur)
		switch {
		case err != nil:
			return false
		case cur.UID != s.UID:
			return false
		case cur.Status.ObservedGeneration >= s.Generation:
			return true
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return false
		}
	}
}

// usedByAnother tells whether a session other than s uses the kernel named kernel.
func (r *Sessions) usedByAnother(ctx context.Context, s *nbv1.Session, kernel string) (bool, error) {
	var list nbv1.SessionList
	if err := r.Reader.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		return false, err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID != s.UID && o.DeletionTimestamp == nil && sessionKernel(o) == kernel {
			return true, nil
		}
	}
	return false, nil
}
