package repository

// Claiming a warm kernel (nbv1.WarmPool): a start that asks for nothing a warm kernel lacks
// takes one of its owner's that is ready, instead of creating a Kernel and waiting for it.

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
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
	// session names the session the kernel is claimed for, if any: the kernel is then the
	// session's own (nbv1.LabelSession), to be shut down with it as a session's new kernel is.
	session string
	// plain: the start asks for no env and no parameters, which a warm kernel has neither of.
	plain bool
}

// claimWarm claims a ready warm kernel of the start's owner, spec and home, and moves it to
// the start's working directory. It returns nil when there is none to claim, or none that
// the start could use (it asks for env or parameters, or a working directory in a language
// whose kernels cannot be moved); the start then makes a kernel as usual. A claim removes
// the kernel's LabelWarm with an update conditional on the resourceVersion read, so two
// replicas never claim one kernel; the loser tries the next. The owner's limits are held as
// for a new kernel: a refusal is the start's answer.
func (k *Kernels) claimWarm(ctx context.Context, u identity.User, s warmStart) (*nbv1.Kernel, error) {
	if p := s.spec.Spec.WarmPool; p == nil || p.Size == 0 || !s.plain {
		return nil, nil
	}
	// Relative to the warm kernel's working directory, the home's root: only the agent knows
	// where that is (under `nbkube local`, a host directory).
	dir, code := ".", ""
	if s.path != "" {
		dir = s.path
		if code = workDirCode(s.spec.Spec.Language, dir); code == "" {
			return nil, nil
		}
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
		claimed.Spec.Path = s.path
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
		if err := k.moveClaimed(ctx, claimed, dir, code); err != nil {
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

// moveClaimed tells a claimed kernel's agent its working directory, which also finds out
// that the kernel still answers: the cached Ready condition may be older than its death.
func (k *Kernels) moveClaimed(ctx context.Context, kn *nbv1.Kernel, dir, code string) error {
	ep, err := k.endpoint(ctx, kn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, warmClaimTimeout)
	defer cancel()
	return k.Agents.SetWorkDir(ctx, ep, agentapi.WorkDir{Dir: dir, Code: code})
}

// workDirCode is the code that moves a running kernel of language into dir (relative to
// where it is), "" for a language nbkube cannot move: its warm kernels then serve only starts
// at the home's root. A JSON string is a Python string literal with the same value.
func workDirCode(language, dir string) string {
	if language != "python" {
		return ""
	}
	lit, _ := json.Marshal(dir)
	return "__import__('os').chdir(" + string(lit) + ")"
}
