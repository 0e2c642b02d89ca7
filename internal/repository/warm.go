package repository

// Claiming a warm kernel (nbv1.WarmPool): a start that asks for nothing a warm kernel lacks
// takes one of its owner's that is ready, instead of creating a Kernel and waiting for it.

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/identity"
)

// warmClaimTimeout bounds asking a claimed kernel's agent to take its working directory:
// the agent answers within milliseconds, or the kernel is no good and a cold start follows.
const warmClaimTimeout = 5 * time.Second

// warmStart is what a claim needs of a start, resolved as a cold start would be.
type warmStart struct {
	owner, startedBy, home, path string
	spec                         *nbv1.KernelSpec
	// env is the kernel's env the start asks for (Kernel spec.env).
	env map[string]string
	// session names the session the kernel is claimed for, if any: the kernel is then the
	// session's own (nbv1.LabelSession), to be shut down with it as a session's new kernel is.
	session string
	// plain: the start asks for no launch parameters (a warm kernel has the defaults).
	plain bool
}

// claimWarm claims a ready warm kernel of the start's owner, spec and home, and moves it to
// the start's working directory with its env. It returns nil when there is none to claim, or
// none that the start could use (it asks for launch parameters, or for a working directory or
// env in a language whose kernels cannot be moved); the start then makes a kernel as usual. A claim removes
// the kernel's LabelWarm with an update conditional on the resourceVersion read, so two
// replicas never claim one kernel; the loser tries the next. The owner's limits are held as
// for a new kernel: a refusal is the start's answer.
func (k *Kernels) claimWarm(ctx context.Context, u identity.User, s warmStart) (*nbv1.Kernel, error) {
	if p := s.spec.Spec.WarmPool; p == nil || p.Size == 0 || !s.plain {
		return nil, nil
	}
	// Relative to the warm kernel's working directory, the home's root: only the agent knows
	// where that is (under `nbkube local`, a host directory).
	dir := cmp.Or(s.path, ".")
	code, movable := workDirCode(s.spec.Spec.Language, dir, s.env)
	if !movable {
		return nil, nil
	}
	var warm nbv1.KernelList
	if err := k.Reader.List(ctx, &warm, client.InNamespace(k.Namespace), client.MatchingLabels{nbv1.LabelWarm: "true"}); err != nil {
		log.FromContext(ctx).Error(err, "Listing warm kernels failed; starting a new kernel")
		return nil, nil
	}
	generation := strconv.FormatInt(s.spec.Generation, 10)
	candidates := slices.DeleteFunc(warm.Items, func(kn nbv1.Kernel) bool {
		return kn.DeletionTimestamp != nil || kn.Spec.KernelSpec != s.spec.Name || string(kn.Spec.Owner) != s.owner ||
			kn.Spec.Home != s.home || kn.Status.PodIP == "" || kn.Annotations[nbv1.AnnotationSpecGeneration] != generation ||
			!meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionReady)
	})
	// The oldest first: the pool keeps the youngest when it shrinks.
	slices.SortFunc(candidates, func(a, b nbv1.Kernel) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for i := range candidates {
		kn := &candidates[i]
		if err := k.bounded(ctx, "record the kernel in its owner's usage", nil, func(ctx context.Context) error {
			return k.reserve(ctx, u, s.owner, kn.Name, s.spec)
		}); err != nil {
			return nil, err
		}
		claimed := kn.DeepCopy()
		delete(claimed.Labels, nbv1.LabelWarm)
		claimed.Annotations[nbv1.AnnotationClaimed] = time.Now().UTC().Format(time.RFC3339)
		if s.startedBy != "" {
			claimed.Annotations[nbv1.AnnotationStartedBy] = s.startedBy
		}
		if s.session != "" {
			claimed.Labels[nbv1.LabelSession] = s.session
		}
		claimed.Spec.Path, claimed.Spec.Env = s.path, s.env
		err := k.bounded(ctx, "claim a warm kernel", nil, func(ctx context.Context) error { return k.Writer.Update(ctx, claimed) })
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Claimed by another replica, or deleted by its pool, since the read.
			k.release(ctx, s.owner, kn.Name)
			continue
		}
		if err != nil {
			k.release(ctx, s.owner, kn.Name)
			log.FromContext(ctx).Error(err, "Claiming a warm kernel failed; starting a new kernel", "kernel", kn.Name)
			return nil, nil
		}
		// The client's next request (its channels, a GET) reads the cache, where the kernel is
		// hidden until the claim arrives: on a real cluster that is some milliseconds later.
		// The agent is asked meanwhile.
		moved := make(chan error, 1)
		go func() { moved <- k.moveClaimed(ctx, claimed, agentapi.WorkDir{Dir: dir, Code: code, Env: s.env}) }()
		waitFresh(ctx, k.Reader, claimed)
		if err := <-moved; err != nil {
			log.FromContext(ctx).Info("A claimed warm kernel could not take its working directory; starting a new kernel",
				"kernel", kn.Name, "error", err.Error())
			k.deleteQuietly(ctx, kn.Name)
			k.release(ctx, s.owner, kn.Name)
			return nil, nil
		}
		return claimed, nil
	}
	return nil, nil
}

// moveClaimed tells a claimed kernel's agent its working directory and env, which also finds
// out that the kernel still answers: the cached Ready condition may be older than its death.
func (k *Kernels) moveClaimed(ctx context.Context, kn *nbv1.Kernel, w agentapi.WorkDir) error {
	ep, err := k.endpoint(ctx, kn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, warmClaimTimeout)
	defer cancel()
	return k.Agents.SetWorkDir(ctx, ep, w)
}

// workDirCode is the code that moves a running kernel of language into dir (relative to
// where it is; "." stays) and sets env in its environment; "" when there is nothing to do.
// movable is false when there is something to do in a language nbkube cannot do it in: its
// warm kernels then serve only starts at the home's root without env. Python's os calls are
// made through __import__ so that no name is left in the user's namespace; a JSON string is
// a Python string literal with the same value.
func workDirCode(language, dir string, env map[string]string) (code string, movable bool) {
	if dir == "." && len(env) == 0 {
		return "", true
	}
	if language != "python" {
		return "", false
	}
	var lines []string
	if dir != "." {
		lit, _ := json.Marshal(dir)
		lines = append(lines, "__import__('os').chdir("+string(lit)+")")
	}
	if len(env) > 0 {
		lit, _ := json.Marshal(env)
		lines = append(lines, "__import__('os').environ.update("+string(lit)+")")
	}
	return strings.Join(lines, "\n"), true
}
