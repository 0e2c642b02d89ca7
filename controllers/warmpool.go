package controllers

// Warm pools: kernels of a spec started ahead of need, per user (see nbv1.WarmPool for why
// per user). The API server claims them; this keeps them filled, fresh and bounded.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// defaultActiveWithin is WarmPool.activeWithin when unset (the CRD's default too).
const defaultActiveWithin = time.Hour

// warmFailedKept is how long a warm kernel that failed stays (taking its place in the pool)
// before it is replaced: a spec whose kernels cannot start makes one attempt per user and
// minute, not one per reconcile.
const warmFailedKept = time.Minute

// warmRetry is how soon a pool whose kernel changed under a write is looked at again.
const warmRetry = time.Second

// warmPlan is what a spec's pool needs now.
type warmPlan struct {
	// create are the warm kernels to make.
	create []*nbv1.Kernel
	// remove are warm kernels to delete: stale, surplus, failed for long enough, or of users
	// no longer active.
	remove []*nbv1.Kernel
	// touch are warm kernels whose AnnotationLastStart is older than their owner's last
	// start, with the newer value: a pool outlives the claimed kernels it served.
	touch map[*nbv1.Kernel]string
	// status counts the pool; nil when the spec has no pool and no warm kernels are left.
	status *nbv1.WarmPoolStatus
	// next is when to look again (a user's window ends, a failed kernel is due); 0: no need.
	next time.Duration
}

// claimedAt is when k was claimed from a warm pool, zero for a kernel that was not.
func claimedAt(k *nbv1.Kernel) time.Time {
	t, _ := time.Parse(time.RFC3339, k.Annotations[nbv1.AnnotationClaimed])
	return t
}

// startedAt is when k's owner started it, as far as the pool's activity goes: its claim for
// a claimed warm kernel, else its creation. A warm kernel stands for the last start it saw.
func startedAt(k *nbv1.Kernel) time.Time {
	if k.Warm() {
		t, _ := time.Parse(time.RFC3339, k.Annotations[nbv1.AnnotationLastStart])
		return t
	}
	if t := claimedAt(k); !t.IsZero() {
		return t
	}
	return k.CreationTimestamp.Time
}

// poolKey is whose a warm kernel is: its owner and its home (Kernel spec.home as the API
// server sets it). A warm kernel is a copy of a start its owner made, home included, and only
// a start with the same owner and home can claim it.
type poolKey struct {
	owner nbv1.Owner
	home  string
}

// planWarmPool is what ks's pool needs, given the spec's kernels: for every owner and home
// with a start within activeWithin, Size warm kernels of the spec's generation. valid is
// the spec's verdict: an invalid spec keeps no pool.
func planWarmPool(ks *nbv1.KernelSpec, valid bool, kernels []nbv1.Kernel, now time.Time) warmPlan {
	size, window := 0, defaultActiveWithin
	if p := ks.Spec.WarmPool; p != nil && valid && ks.DeletionTimestamp == nil {
		size = int(p.Size)
		if p.ActiveWithin != nil {
			window = p.ActiveWithin.Duration
		}
	}
	plan := warmPlan{touch: map[*nbv1.Kernel]string{}}
	last := map[poolKey]time.Time{}
	warm := map[poolKey][]*nbv1.Kernel{}
	for i := range kernels {
		k := &kernels[i]
		key := poolKey{k.Spec.Owner, k.Spec.Home}
		if t := startedAt(k); t.After(last[key]) {
			last[key] = t
		}
		if k.Warm() && k.DeletionTimestamp == nil {
			warm[key] = append(warm[key], k)
		}
	}
	st := &nbv1.WarmPoolStatus{}
	keys := make([]poolKey, 0, len(last))
	for key := range last {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b poolKey) int { return cmp.Or(cmp.Compare(a.owner, b.owner), cmp.Compare(a.home, b.home)) })
	users := map[nbv1.Owner]bool{}
	generation := strconv.FormatInt(ks.Generation, 10)
	for _, key := range keys {
		ends := last[key].Add(window)
		active := size > 0 && now.Before(ends)
		if !active {
			plan.remove = append(plan.remove, warm[key]...)
			continue
		}
		users[key.owner] = true
		plan.next = sooner(plan.next, ends.Sub(now))
		lastStart := last[key].UTC().Format(time.RFC3339)
		var keep []*nbv1.Kernel
		for _, k := range warm[key] {
			failed := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed)
			switch {
			case k.Annotations[nbv1.AnnotationSpecGeneration] != generation:
				plan.remove = append(plan.remove, k)
			case failed != nil && failed.Status == metav1.ConditionTrue:
				if due := failed.LastTransitionTime.Add(warmFailedKept); now.Before(due) {
					keep = append(keep, k)
					plan.next = sooner(plan.next, due.Sub(now))
				} else {
					plan.remove = append(plan.remove, k)
				}
			default:
				keep = append(keep, k)
			}
		}
		// Ready ones are kept first; the newest of the rest go when there are too many.
		slices.SortStableFunc(keep, func(a, b *nbv1.Kernel) int {
			ra, rb := meta.IsStatusConditionTrue(a.Status.Conditions, nbv1.ConditionReady), meta.IsStatusConditionTrue(b.Status.Conditions, nbv1.ConditionReady)
			switch {
			case ra && !rb:
				return -1
			case rb && !ra:
				return 1
			}
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		})
		if len(keep) > size {
			plan.remove = append(plan.remove, keep[size:]...)
			keep = keep[:size]
		}
		for _, k := range keep {
			if meta.IsStatusConditionTrue(k.Status.Conditions, nbv1.ConditionReady) {
				st.Ready++
			} else {
				st.Starting++
			}
			if startedAt(k).Before(last[key]) {
				plan.touch[k] = lastStart
			}
		}
		for range size - len(keep) {
			plan.create = append(plan.create, warmKernel(ks, key, lastStart, generation))
			st.Starting++
		}
	}
	st.Users = int32(len(users))
	if ks.Spec.WarmPool != nil || len(plan.remove) > 0 {
		plan.status = st
	}
	return plan
}

// warmKernel is a new warm kernel of ks for key: a Kernel like its owner's start in its home,
// with no path, no env and no parameters (the spec's defaults), marked warm.
func warmKernel(ks *nbv1.KernelSpec, key poolKey, lastStart, generation string) *nbv1.Kernel {
	return &nbv1.Kernel{
		ObjectMeta: metav1.ObjectMeta{
			Name: string(uuid.NewUUID()), Namespace: ks.Namespace,
			Labels:      map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelWarm: "true"},
			Annotations: map[string]string{nbv1.AnnotationLastStart: lastStart, nbv1.AnnotationSpecGeneration: generation},
		},
		Spec: nbv1.KernelParameters{Owner: key.owner, KernelSpec: ks.Name, Home: key.home},
	}
}

func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// reconcileWarmPool carries out ks's pool plan and returns the pool's status and when to
// look again. The kernels are read from the cache: a kernel made by the last reconcile and
// not yet seen could make one too many, which the next reconcile removes.
func (r *KernelSpecReconciler) reconcileWarmPool(ctx context.Context, ks *nbv1.KernelSpec, valid bool) (*nbv1.WarmPoolStatus, time.Duration, error) {
	var kernels nbv1.KernelList
	if err := r.List(ctx, &kernels, client.InNamespace(ks.Namespace), client.MatchingFields{kernelSpecIndex: ks.Name}); err != nil {
		return nil, 0, fmt.Errorf("list the spec's kernels: %w", err)
	}
	plan := planWarmPool(ks, valid, kernels.Items, r.Clock.Now())
	logger := log.FromContext(ctx)
	for _, k := range plan.remove {
		// Only while still unclaimed: a claim between the read and this delete wins. A
		// kernel changed since the read is looked at again shortly.
		err := r.Delete(ctx, k, client.Preconditions{UID: &k.UID, ResourceVersion: &k.ResourceVersion})
		if apierrors.IsConflict(err) {
			plan.next = sooner(plan.next, warmRetry)
		} else if err != nil && !apierrors.IsNotFound(err) {
			return nil, 0, fmt.Errorf("delete warm kernel %s: %w", k.Name, err)
		}
	}
	for k, lastStart := range plan.touch {
		k = k.DeepCopy()
		k.Annotations[nbv1.AnnotationLastStart] = lastStart
		err := r.Update(ctx, k)
		if apierrors.IsConflict(err) {
			plan.next = sooner(plan.next, warmRetry)
		} else if err != nil && !apierrors.IsNotFound(err) {
			return nil, 0, fmt.Errorf("record the last start on warm kernel %s: %w", k.Name, err)
		}
	}
	for _, k := range plan.create {
		if err := r.Create(ctx, k); err != nil {
			return nil, 0, fmt.Errorf("create a warm kernel for %s: %w", k.Spec.Owner, err)
		}
		logger.V(1).Info("Created a warm kernel", "kernel", k.Name, "owner", k.Spec.Owner)
	}
	return plan.status, plan.next, nil
}
