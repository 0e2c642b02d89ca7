package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/quota"
)

// What the API server does with the cluster's resources (it runs in the manager's binary and
// shares its role):
// +kubebuilder:rbac:groups=nbkube.io,resources=kernels;sessions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=nbkube.io,resources=terminals,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=nbkube.io,resources=kernelspecs,verbs=get;list;watch
// +kubebuilder:rbac:groups=nbkube.io,resources=userpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=nbkube.io,resources=userusages,verbs=get;list;watch;create;update

// Kernels reads and writes the Kernel resources of one namespace for the API server and
// talks to their agents. Users see and touch only their own kernels; admins all.
type Kernels struct {
	// Reader reads Kernels, usually the manager's cached client. Never Secrets: the API
	// server may read none.
	Reader client.Reader
	// Writer creates and deletes Kernels.
	Writer client.Writer
	// Namespace holds the kernels.
	Namespace string
	// Agents calls the kernels' agents.
	Agents *agentclient.Client
	// AgentTokenKey is the installation's agent token key, from which each kernel's agent
	// token is derived (agenttoken.Kernel), as the manager derived the one in its Secret.
	AgentTokenKey []byte
	// Specs finds the kernel spec a start asks for, and the names kernels are called by:
	// their specs' Jupyter names.
	Specs *KernelSpecs
	// StartTimeout bounds a kernel start, from the resource's creation until the kernel
	// answers (image pulls included).
	StartTimeout time.Duration
	// Homes places each user's home on the contents volume; a new kernel mounts its owner's
	// (nbv1.KernelParameters.Home), or the whole volume when its owner is the admin starting
	// it. Off (the whole volume for everyone) when zero.
	Homes homes.Template
	// MakeHome, when set, creates a home before a kernel mounts it, so that it belongs to
	// the contents' owner (a kubelet would create a missing subPath as root).
	MakeHome func(home string) error
	// Quota reserves room for each new kernel in its owner's ledger before it is created,
	// and refuses a start past a limit (403); none when nil.
	Quota *quota.Ledger
	// APITimeout bounds each call to the Kubernetes API of a start (reading its spec, the
	// owner's reservation, creating the Kernel or Session) and of the other writes (deleting a
	// kernel or session, asking for a dead kernel's restart, changing a session): when the
	// control plane does not answer, the request fails with domainerr.ErrUnavailable (503)
	// within it, rather than holding its client until StartTimeout or for good (a client of
	// a stopped API server waits without end). DefaultAPITimeout when zero.
	APITimeout time.Duration
}

// DefaultAPITimeout is Kernels.APITimeout when unset: a write takes milliseconds, and etcd
// itself gives up on a request after about as long.
const DefaultAPITimeout = 5 * time.Second

func (k *Kernels) apiTimeout() time.Duration {
	if k.APITimeout > 0 {
		return k.APITimeout
	}
	return DefaultAPITimeout
}

// bounded runs one call to the Kubernetes API, of a start or of any other write, within
// APITimeout (see boundedCall). A create whose answer did not come may still land once the
// control plane is back: created names the object it creates, if any, deleted then in the
// background, so that no kernel runs that nobody was told of.
func (k *Kernels) bounded(ctx context.Context, what string, created client.Object, f func(context.Context) error) error {
	err := boundedCall(ctx, k.apiTimeout(), what, f)
	if created != nil && errors.Is(err, domainerr.ErrUnavailable) {
		go k.deleteLate(ctx, created)
	}
	return err
}

// deleteLate deletes an object whose creation got no answer, once the control plane answers
// again, if the creation landed after all. The API server may serve the deletion before the
// creation it still held, so a deletion that finds nothing is tried once more, later.
func (k *Kernels) deleteLate(ctx context.Context, obj client.Object) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.StartTimeout)
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(deleteLateAgain):
			case <-ctx.Done():
				return
			}
		}
		err := k.Writer.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err == nil {
			log.FromContext(ctx).Info("Deleted an object whose creation got no answer but landed", "name", obj.GetName())
			return
		}
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "Deleting an object whose creation got no answer failed", "name", obj.GetName())
			return
		}
	}
}

// deleteLateAgain is how long after finding nothing deleteLate looks again: a creation the
// API server held is served within moments of its return.
const deleteLateAgain = 5 * time.Second

// reserve makes room for a new kernel named name of spec, for owner, started by u.
func (k *Kernels) reserve(ctx context.Context, u identity.User, owner, name string, spec *nbv1.KernelSpec) error {
	if k.Quota == nil {
		return nil
	}
	if _, err := k.Quota.ReserveKernel(ctx, owner, groupsOf(u, owner), name, spec); err != nil {
		return quota.Refusal(err)
	}
	return nil
}

// release gives back the room of a kernel that was not made, or is gone.
func (k *Kernels) release(ctx context.Context, owner, name string) {
	k.releaseRoom(ctx, nbv1.ReservationKernel, owner, name)
}

// releaseRoom gives back the room of kind (a kernel's, a terminal's) named name that was not
// made, or is gone.
func (k *Kernels) releaseRoom(ctx context.Context, kind nbv1.ReservationKind, owner, name string) {
	if k.Quota == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err := k.Quota.Release(ctx, owner, kind, name); err != nil {
		// The usage controller frees it once it sees the resource gone.
		log.FromContext(ctx).Error(err, "Releasing room in a user's usage failed", "kind", kind, "name", name, "owner", owner)
		return
	}
	k.waitReleased(ctx, kind, owner, name)
}

// waitReleased waits (briefly) until the ledger's reader no longer shows the room of kind
// named name: a start reads the ledger there, and one right after the release (the answer of
// the request that made it) must find the room free.
func (k *Kernels) waitReleased(ctx context.Context, kind nbv1.ReservationKind, owner, name string) {
	if k.Quota.Reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := client.ObjectKey{Namespace: k.Quota.Namespace, Name: nbv1.UsageName(nbv1.Owner(owner))}
	for {
		u := &nbv1.UserUsage{}
		if err := k.Quota.Reader.Get(ctx, key, u); err != nil || !slices.ContainsFunc(u.Spec.Reservations, func(r nbv1.Reservation) bool {
			return r.Kind == kind && r.Name == name
		}) {
			return
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// homeOf is the home a new kernel of owner, started by u, mounts: Kernel.spec.home.
func (k *Kernels) homeOf(u identity.User, owner string) (string, error) {
	if !k.Homes.On() {
		return "", nil
	}
	if owner == u.Name && u.Admin {
		return nbv1.HomeWholeVolume, nil
	}
	h, err := k.Homes.For(owner)
	if err != nil {
		return "", domainerr.Forbidden("user %s has no home: %v", owner, err)
	}
	if k.MakeHome != nil {
		if err := k.MakeHome(h); err != nil {
			return "", fmt.Errorf("make the home of %s: %w", owner, err)
		}
	}
	return h, nil
}

// CountKernels is the number of the user's kernels and of the clients connected to them.
func (k *Kernels) CountKernels(ctx context.Context, u identity.User) (int, int, error) {
	list, err := k.list(ctx, u)
	if err != nil {
		return 0, 0, err
	}
	connections := 0
	for _, kn := range list {
		connections += int(kn.Status.Connections)
	}
	return len(list), connections, nil
}

func (k *Kernels) list(ctx context.Context, u identity.User) ([]*nbv1.Kernel, error) {
	return ownedKernels.list(ctx, k.Reader, k.Namespace, u)
}

// get finds the user's kernel.
func (k *Kernels) get(ctx context.Context, u identity.User, id string) (*nbv1.Kernel, error) {
	return ownedKernels.get(ctx, k.Reader, k.Namespace, u, id)
}

// ListKernels lists the user's kernels as the resources tell (a start the controller has not
// recorded yet as its agent tells, see asRecorded).
func (k *Kernels) ListKernels(ctx context.Context, u identity.User) ([]jupyter.Kernel, error) {
	list, err := k.list(ctx, u)
	if err != nil {
		return nil, err
	}
	names := k.Specs.kernelNames(ctx)
	out := make([]jupyter.Kernel, 0, len(list))
	for _, kn := range k.asRecorded(ctx, list) {
		out = append(out, kernelModel(kn, names.of(kn.Spec.KernelSpec)))
	}
	return out, nil
}

// kernelModel is Jupyter's model of a Kernel as its resource tells; name is the Jupyter name
// of its KernelSpec.
func kernelModel(kn *nbv1.Kernel, name string) jupyter.Kernel {
	m := jupyter.Kernel{
		ID: kn.Name, Name: name, ExecutionState: string(kn.Status.ExecutionState),
		Connections: int(kn.Status.Connections), LastActivity: jupyter.Time{Time: kn.CreationTimestamp.Time},
		Owner: string(kn.Spec.Owner),
	}
	if kn.Status.LastActivity != nil {
		m.LastActivity.Time = kn.Status.LastActivity.Time
	}
	if m.ExecutionState == "" {
		m.ExecutionState = string(nbv1.ExecutionStateStarting)
	}
	return m
}

// GetKernel is the kernel's model with its live state from the agent when it answers.
func (k *Kernels) GetKernel(ctx context.Context, u identity.User, id string) (jupyter.Kernel, error) {
	kn, err := k.get(ctx, u, id)
	if err != nil {
		return jupyter.Kernel{}, err
	}
	return k.liveModel(ctx, kn), nil
}

func (k *Kernels) liveModel(ctx context.Context, kn *nbv1.Kernel) jupyter.Kernel {
	m := kernelModel(kn, k.Specs.kernelNames(ctx).of(kn.Spec.KernelSpec))
	// Asked as soon as the pod has an address: the resource's Ready condition lags behind a
	// start that the agent already answered.
	ep, err := k.endpoint(ctx, kn)
	if err != nil {
		return m
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := k.Agents.Status(ctx, ep)
	if err != nil {
		return m
	}
	m.ExecutionState, m.Connections = st.ExecutionState, st.Connections
	if st.LastActivity.After(m.LastActivity.Time) {
		m.LastActivity.Time = st.LastActivity
	}
	return m
}

// endpoint is where the kernel's agent listens, with its token derived from the kernel's
// identity. A kernel without a pod address has no agent to reach: one that failed says why,
// as a failed start does (500, its reason); one whose pod is still coming (a start, or a
// dead kernel's new pod) is a conflict, as a restart of a starting kernel is: the request
// works once the kernel has started.
func (k *Kernels) endpoint(_ context.Context, kn *nbv1.Kernel) (agentclient.Endpoint, error) {
	if kn.Status.PodIP == "" {
		if c := meta.FindStatusCondition(kn.Status.Conditions, nbv1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
			return agentclient.Endpoint{}, startFailed(c.Reason, "the kernel is not running: "+c.Message)
		}
		return agentclient.Endpoint{}, domainerr.Conflict("The kernel has not started yet: try again once it has")
	}
	token := agenttoken.Kernel(k.AgentTokenKey, kn.Namespace, kn.Name, string(kn.UID))
	return agentclient.Endpoint{Host: kn.Status.PodIP, Port: agentapi.Port, Token: token}, nil
}

// Endpoint is where the user's kernel's agent listens.
func (k *Kernels) Endpoint(ctx context.Context, u identity.User, id string) (agentclient.Endpoint, error) {
	kn, err := k.get(ctx, u, id)
	if err != nil {
		return agentclient.Endpoint{}, err
	}
	return k.endpoint(ctx, kn)
}

// DeleteKernel shuts the kernel down and deletes its resource. It returns once the kernel
// process has exited (the agent waits on it), not when the pod is gone.
func (k *Kernels) DeleteKernel(ctx context.Context, u identity.User, id string) error {
	kn, err := k.get(ctx, u, id)
	if err != nil {
		return err
	}
	return k.shutDown(ctx, kn)
}

// shutDown shuts the kernel down, deletes its resource and gives its room back.
func (k *Kernels) shutDown(ctx context.Context, kn *nbv1.Kernel) error {
	k.stopProcess(ctx, kn)
	return k.remove(ctx, kn)
}

// stopProcess asks the kernel's agent to shut the kernel down, which it answers once the
// process has exited; an agent that does not answer has ended, or ends with its pod.
func (k *Kernels) stopProcess(ctx context.Context, kn *nbv1.Kernel) {
	ep, err := k.endpoint(ctx, kn)
	if err != nil {
		return
	}
	k.askShutdown(ctx, ep, 10*time.Second, "kernel", kn.Name)
}

// askShutdown asks the agent at ep, of the kernel or terminal name, to end its process,
// waiting for its answer at most wait.
func (k *Kernels) askShutdown(ctx context.Context, ep agentclient.Endpoint, wait time.Duration, noun, name string) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := k.Agents.Shutdown(ctx, ep); err != nil {
		log.FromContext(ctx).V(1).Info("The agent did not shut down; deleting the pod stops it", noun, name, "error", err.Error())
	}
}

// remove deletes the kernel's resource, waits until the cache has it gone and gives its
// room back.
func (k *Kernels) remove(ctx context.Context, kn *nbv1.Kernel) error {
	return k.removeHolder(ctx, kn, nbv1.ReservationKernel, string(kn.Spec.Owner))
}

// removeHolder deletes obj, a resource that holds room of kind in owner's usage, with its
// pod, waits until the cache has it gone and gives its room back.
func (k *Kernels) removeHolder(ctx context.Context, obj client.Object, kind nbv1.ReservationKind, owner string) error {
	noun := strings.ToLower(string(kind))
	err := k.bounded(ctx, "delete the "+noun, nil, func(ctx context.Context) error {
		return client.IgnoreNotFound(k.Writer.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	if err != nil {
		return failure(err, "delete "+noun)
	}
	waitGone(ctx, k.Reader, obj)
	k.releaseRoom(ctx, kind, owner, obj.GetName())
	return nil
}

func (k *Kernels) deleteQuietly(ctx context.Context, id string) {
	kn := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: id}}
	if err := k.Writer.Delete(context.WithoutCancel(ctx), kn, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		log.FromContext(ctx).Error(err, "Delete a kernel that failed to start", "kernel", id)
	}
}

// validPath tells whether a relative path stays inside the contents root, as the Kernel
// resource's validation requires.
func validPath(p string) bool {
	if strings.HasPrefix(p, "/") {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s == ".." {
			return false
		}
	}
	return true
}

// KernelOwner is the user whose kernel id is, "" when u may not see it.
func (k *Kernels) KernelOwner(ctx context.Context, u identity.User, id string) string {
	kn, err := k.get(ctx, u, id)
	if err != nil {
		return ""
	}
	return string(kn.Spec.Owner)
}

// InterruptKernel interrupts the kernel's running cell.
func (k *Kernels) InterruptKernel(ctx context.Context, u identity.User, id string) error {
	ep, err := k.Endpoint(ctx, u, id)
	if err != nil {
		return err
	}
	return k.Agents.Interrupt(ctx, ep)
}

// RestartKernel restarts the kernel in place and returns its model once it answers again.
func (k *Kernels) RestartKernel(ctx context.Context, u identity.User, id string) (jupyter.Kernel, error) {
	kn, err := k.get(ctx, u, id)
	if err != nil {
		return jupyter.Kernel{}, err
	}
	failed := meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionFailed)
	starting := domainerr.Conflict("The kernel is still starting: restart it once it has started")
	switch {
	case !failed && kn.Status.PodIP != "":
		// The agent restarts its kernel; the Ready condition may lag behind a start that the
		// agent has answered already, so it is asked whatever the condition says.
		ep, err := k.endpoint(ctx, kn)
		if err != nil {
			return jupyter.Kernel{}, err
		}
		err = k.Agents.Restart(ctx, ep)
		if err == nil {
			return k.liveModel(ctx, kn), nil
		}
		if !errors.Is(err, agentclient.ErrUnreachable) {
			return jupyter.Kernel{}, err
		}
		if !meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionReady) {
			return jupyter.Kernel{}, starting
		}
		// A ready kernel whose agent cannot be reached: its pod is gone from under it (a
		// node's restart), as if it were dead.
	case !failed:
		return jupyter.Kernel{}, starting
	}
	return k.restartPod(ctx, kn)
}

// restartPod restarts a dead kernel, as Jupyter's restart starts a new process for a kernel
// that died: the controller gives it a new pod under the same id (nbv1.AnnotationRestart),
// and the answer comes once the new kernel answers.
func (k *Kernels) restartPod(ctx context.Context, kn *nbv1.Kernel) (jupyter.Kernel, error) {
	request := newUUID()
	patched := kn.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[nbv1.AnnotationRestart] = request
	err := k.bounded(ctx, "ask for the kernel's restart", nil, func(ctx context.Context) error {
		return k.Writer.Patch(ctx, patched, client.MergeFrom(kn))
	})
	if err != nil {
		return jupyter.Kernel{}, failure(err, "ask for the kernel's restart")
	}
	wctx, cancel := context.WithTimeout(ctx, k.StartTimeout)
	defer cancel()
	// Until the controller has acted on the request, the status is the dead kernel's.
	for {
		cur := &nbv1.Kernel{}
		err := k.Reader.Get(wctx, client.ObjectKeyFromObject(kn), cur)
		if err == nil && cur.Status.PodRestart == request {
			break
		}
		if err != nil && !apierrors.IsNotFound(err) && wctx.Err() == nil {
			return jupyter.Kernel{}, fmt.Errorf("get kernel: %w", err)
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return jupyter.Kernel{}, ctx.Err()
			}
			return jupyter.Kernel{}, startTimeout(k.StartTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	ready, err := k.WaitReady(ctx, kn.Name)
	if err != nil {
		return jupyter.Kernel{}, err
	}
	return k.liveModel(ctx, ready), nil
}
