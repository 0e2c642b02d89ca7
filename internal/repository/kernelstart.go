package repository

// Starting a kernel: what a start asks for, its launch parameters, and the wait until the
// kernel answers.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/kernelparams"
)

// KernelStart is what a kernel start asks for.
type KernelStart struct {
	// Name is the Jupyter name of the kernel spec (see KernelSpecs.resolveStart).
	Name string
	// Path is the kernel's working directory relative to the contents root.
	Path string
	// WorkingDir is KERNEL_WORKING_DIR as a gateway sends it; when set it is the working
	// directory instead of Path (see kernelWorkingDir).
	WorkingDir string
	// Owner is the user the kernel is for, when the starting user acts for another (a
	// gateway naming KERNEL_USERNAME); empty means the starting user.
	Owner string
	// Env is added to the kernel's environment (Kernel spec.env).
	Env map[string]string
	// Parameters are the values of the spec's launch parameters the start asks for, as JSON
	// values (see kernelparams.Resolve).
	Parameters map[string]any
	// GatewayEnv is the env a Jupyter gateway client sent: its KERNEL_<NAME> variables are
	// parameters of the spec, unless Parameters names them too.
	GatewayEnv map[string]string
}

// StartKernel creates a Kernel as start asks for and waits until it answers. A kernel started
// for another user is that user's; the starter, who must have the right to act for others,
// keeps seeing it (annotation nbv1.AnnotationStartedBy), as a gateway must to use it.
func (k *Kernels) StartKernel(ctx context.Context, u identity.User, start KernelStart) (jupyter.Kernel, error) {
	path, asked := strings.Trim(start.Path, "/"), start.Path
	if start.WorkingDir != "" {
		path, asked = kernelWorkingDir(start.WorkingDir), start.WorkingDir
		if path == "" && strings.Trim(start.WorkingDir, "/") != strings.Trim(builder.ContentsDir, "/") {
			log.FromContext(ctx).V(1).Info("KERNEL_WORKING_DIR is outside the kernels' contents mount; the kernel starts at the contents root",
				"workingDir", start.WorkingDir, "contentsMount", builder.ContentsDir)
		}
	}
	if path != "" && !validPath(path) {
		return jupyter.Kernel{}, domainerr.Invalid("path %q must stay inside the contents root", asked)
	}
	owner, startedBy := u.Name, ""
	if start.Owner != "" && start.Owner != u.Name {
		if !u.Admin && !u.ActAs {
			return jupyter.Kernel{}, domainerr.Forbidden("user %s may not start kernels for other users", u.Name)
		}
		owner, startedBy = start.Owner, u.Name
	}
	var spec *nbv1.KernelSpec
	// The specs are read from the cache, but through the API for a moment after a sync of
	// the host's (nbkube local), which also writes.
	if err := k.bounded(ctx, "answer for the kernel specs", nil, func(ctx context.Context) (err error) {
		spec, err = k.Specs.resolveStart(ctx, start.Name)
		return err
	}); err != nil {
		return jupyter.Kernel{}, err
	}
	values, spec, err := withParameters(spec, start)
	if err != nil {
		return jupyter.Kernel{}, err
	}
	home, err := k.homeOf(u, owner)
	if err != nil {
		return jupyter.Kernel{}, err
	}
	warm, err := k.claimWarm(ctx, u, warmStart{owner: owner, startedBy: startedBy, home: home, path: path, spec: spec,
		env: start.Env, plain: len(values) == 0})
	if err != nil {
		return jupyter.Kernel{}, err
	}
	if warm != nil {
		return kernelModel(warm, spec.JupyterName()), nil
	}
	kn := &nbv1.Kernel{
		ObjectMeta: metav1.ObjectMeta{
			Name: newUUID(), Namespace: k.Namespace,
			Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue},
		},
		Spec: nbv1.KernelParameters{Owner: nbv1.Owner(owner), KernelSpec: spec.Name, Home: home, Path: path, Env: start.Env, Parameters: values},
	}
	if startedBy != "" {
		kn.Annotations = map[string]string{nbv1.AnnotationStartedBy: startedBy}
	}
	if err := k.bounded(ctx, "record the kernel in its owner's usage", nil, func(ctx context.Context) error {
		return k.reserve(ctx, u, owner, kn.Name, spec)
	}); err != nil {
		return jupyter.Kernel{}, err
	}
	if err := k.bounded(ctx, "create the kernel", kn, func(ctx context.Context) error { return k.Writer.Create(ctx, kn) }); err != nil {
		if errors.Is(err, domainerr.ErrUnavailable) {
			// Giving the room back needs the control plane too: it is done once it answers.
			go k.release(ctx, owner, kn.Name)
			return jupyter.Kernel{}, err
		}
		k.release(ctx, owner, kn.Name)
		return jupyter.Kernel{}, fmt.Errorf("create kernel: %w", err)
	}
	ready, err := k.WaitReady(ctx, kn.Name)
	if err != nil {
		// A kernel that failed to start is no use to anyone; its client got the reason.
		k.deleteQuietly(ctx, kn.Name)
		k.release(ctx, owner, kn.Name)
		return jupyter.Kernel{}, err
	}
	return kernelModel(ready, spec.JupyterName()), nil
}

// withParameters checks the launch parameters a start asks for against spec and returns
// them as the Kernel records them, with the spec they make: the one the kernel's room is
// reserved for, as its pod will be built from it.
func withParameters(spec *nbv1.KernelSpec, start KernelStart) (map[string]string, *nbv1.KernelSpec, error) {
	given := kernelparams.FromEnv(spec, start.GatewayEnv)
	if len(start.Parameters) > 0 {
		if given == nil {
			given = make(map[string]any, len(start.Parameters))
		}
		maps.Copy(given, start.Parameters)
	}
	values, err := kernelparams.Resolve(spec, given)
	if err != nil {
		return nil, nil, err
	}
	applied, err := kernelparams.Apply(spec, values)
	if err != nil {
		return nil, nil, err
	}
	return values, applied, nil
}

// WaitReady waits until the named kernel answers kernel_info, or fails with the reason
// the controller found (image pull, scheduling, crash, timeout). The kernel it returns has
// the status its controller records once it sees the kernel ready (see withReport), so
// that a start answers the model that the lists then show.
func (k *Kernels) WaitReady(ctx context.Context, id string) (*nbv1.Kernel, error) {
	ctx, cancel := context.WithTimeout(ctx, k.StartTimeout)
	defer cancel()
	type agentAnswer struct {
		st  agentapi.Status
		err error
	}
	agentDone := make(chan agentAnswer, 1)
	agentAsked := false
	// A pod has its address before its agent listens: a refused ask is retried after a pause
	// that grows, rather than at once, which would spin on the refused connections.
	var askAgain time.Time
	askPause := 10 * time.Millisecond
	// Readiness itself comes from the agent at once: the poll of the cache only looks for an
	// address or a failure, and need not be fast, since many starts at once each poll it.
	// Once the agent holds the question, only a failure is left to see.
	const (
		addressPoll = 10 * time.Millisecond
		failurePoll = 100 * time.Millisecond
	)
	tick := time.NewTicker(addressPoll)
	defer tick.Stop()
	for {
		kn := &nbv1.Kernel{}
		err := k.Reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: id}, kn)
		switch {
		case apierrors.IsNotFound(err):
			// Not in the cache yet, or made by a session that has not made it yet.
		case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			// The start's time ran out during the read: a timeout, not a failed read.
			return nil, startTimeout(k.StartTimeout)
		case err != nil:
			return nil, fmt.Errorf("get kernel: %w", err)
		case kn.DeletionTimestamp != nil:
			return nil, startFailed("KernelDeleted", "the kernel was deleted while starting")
		default:
			if c := meta.FindStatusCondition(kn.Status.Conditions, nbv1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
				return nil, startFailed(c.Reason, "the kernel failed to start: "+c.Message)
			}
			if !agentAsked && kn.Status.PodIP != "" && !time.Now().Before(askAgain) {
				if ep, err := k.endpoint(ctx, kn); err == nil {
					agentAsked = true
					tick.Reset(failurePoll)
					go func() {
						st, err := k.Agents.WaitReady(ctx, ep)
						agentDone <- agentAnswer{st, err}
					}()
				}
			}
			if meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionReady) {
				return kn, nil
			}
		}
		select {
		case a := <-agentDone:
			if a.err == nil {
				return k.readyAsRecorded(ctx, kn, a.st), nil
			}
			// Not listening yet, or the agent ended (the kernel exited): the controller will
			// say why.
			agentAsked = false
			tick.Reset(addressPoll)
			askAgain = time.Now().Add(askPause)
			askPause = min(2*askPause, 160*time.Millisecond)
		case <-tick.C:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, startTimeout(k.StartTimeout)
			}
			return nil, ctx.Err()
		}
	}
}

// readyAsRecorded is the kernel kn, whose agent just reported st and ready, with the status
// its controller records: the cache's, once it has it (read again, as kn may be a poll's
// old copy), else kn's with st applied.
func (k *Kernels) readyAsRecorded(ctx context.Context, kn *nbv1.Kernel, st agentapi.Status) *nbv1.Kernel {
	cur := &nbv1.Kernel{}
	if err := k.Reader.Get(ctx, client.ObjectKeyFromObject(kn), cur); err == nil && cur.UID == kn.UID {
		kn = cur
	}
	if meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionReady) {
		return kn
	}
	return withReport(kn, st)
}

// startTimeout is the failure of a start that took longer than d.
func startTimeout(d time.Duration) error {
	return startFailed("StartTimeout", fmt.Sprintf("the kernel did not start within %s", d))
}

// kernelWorkingDir is the contents path of a gateway's KERNEL_WORKING_DIR. Jupyter Server
// sends the absolute path of the directory on its own file system: one under the directory
// where kernel pods mount the contents (a single-user server that mounts the same volume at
// the same place) is the path below it; any other absolute path names nothing nbkube can know,
// so the kernel starts at the root, as Enterprise Gateway ignores it unless told to mirror
// working directories. A relative path is a contents path, as "path" is. ".." stays in the
// result, for validPath to refuse.
func kernelWorkingDir(dir string) string {
	if !strings.HasPrefix(dir, "/") {
		return strings.Trim(dir, "/")
	}
	for _, s := range strings.Split(dir, "/") {
		if s == ".." {
			return dir
		}
	}
	rel, ok := strings.CutPrefix(dir, builder.ContentsDir)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return ""
	}
	return strings.Trim(rel, "/")
}
