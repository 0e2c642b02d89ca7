package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// maxAttempts bounds the tries of one reservation against concurrent writers of the same
// ledger: each lost try means another writer's went through.
const maxAttempts = 64

// Ledger keeps the users' UserUsages of one namespace. Quotas are on while the namespace has
// at least one UserPolicy: without one nothing is written, so that an installation without
// policies pays nothing for them.
type Ledger struct {
	// Client writes the ledgers.
	Client client.Client
	// Reader reads policies and ledgers, usually a cache.
	Reader client.Reader
	// APIReader reads a ledger around the cache after a write lost to a newer version.
	APIReader client.Reader
	// Namespace holds the policies, ledgers and the users' resources.
	Namespace string
	// Clock dates reservations; nil is the real clock.
	Clock clock.PassiveClock
}

// Request asks for room for one kernel or running cluster.
type Request struct {
	// Owner is the user the resource belongs to.
	Owner string
	// Groups are the owner's groups when the caller knows them (the API server for a user's
	// own start); nil uses those the ledger recorded.
	Groups []string
	// Reservation is the room; Since is set by Reserve.
	Reservation nbv1.Reservation
	// Record records a reservation without holding it to the limits: for what already runs.
	Record bool
}

func (l *Ledger) now() time.Time {
	if l.Clock == nil {
		return time.Now()
	}
	return l.Clock.Now()
}

// Policies lists the namespace's UserPolicies.
func (l *Ledger) Policies(ctx context.Context) ([]nbv1.UserPolicy, error) {
	var list nbv1.UserPolicyList
	if err := l.Reader.List(ctx, &list, client.InNamespace(l.Namespace)); err != nil {
		return nil, fmt.Errorf("list user policies: %w", err)
	}
	return list.Items, nil
}

// Limits are what governs owner, whose groups are given, or, when nil, those their ledger
// recorded; on says whether quotas are on at all.
func (l *Ledger) Limits(ctx context.Context, owner string, groups []string) (lim Limits, on bool, err error) {
	policies, err := l.Policies(ctx)
	if err != nil || len(policies) == 0 {
		return Limits{}, false, err
	}
	if groups == nil {
		u, err := l.get(ctx, l.Reader, owner)
		if err != nil && !apierrors.IsNotFound(err) {
			return Limits{}, true, err
		}
		groups = u.Spec.Groups
	}
	return Effective(policies, owner, groups), true, nil
}

// Usage is owner's usage and limits; on says whether quotas are on.
func (l *Ledger) Usage(ctx context.Context, owner string, groups []string) (Amounts, Limits, bool, error) {
	lim, on, err := l.Limits(ctx, owner, groups)
	if err != nil || !on {
		return Amounts{}, lim, on, err
	}
	u, err := l.get(ctx, l.Reader, owner)
	if err != nil && !apierrors.IsNotFound(err) {
		return Amounts{}, lim, on, err
	}
	return Sum(u.Spec.Reservations), lim, on, nil
}

// Holds tells whether owner's ledger, as the cache has it, holds the reservation of kind and
// name. Quotas off, or no ledger: false.
func (l *Ledger) Holds(ctx context.Context, owner string, kind nbv1.ReservationKind, name string) (bool, error) {
	u, err := l.get(ctx, l.Reader, owner)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(u.Spec.Reservations, func(r nbv1.Reservation) bool { return r.Kind == kind && r.Name == name }), nil
}

func (l *Ledger) get(ctx context.Context, r client.Reader, owner string) (*nbv1.UserUsage, error) {
	u := &nbv1.UserUsage{}
	err := r.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: nbv1.UsageName(nbv1.Owner(owner))}, u)
	return u, err
}

// Reserve makes room for req's resource in its owner's ledger, or refuses with *Exceeded or
// *SpecNotAllowed. A reservation of the same kind and name that is already there is kept, and
// updated (and checked again) where the request differs: a cluster's engines. It returns the
// limits that govern the owner; on is false, and nothing is written, when quotas are off.
func (l *Ledger) Reserve(ctx context.Context, req Request) (lim Limits, on bool, err error) {
	policies, err := l.Policies(ctx)
	if err != nil || len(policies) == 0 {
		return Limits{}, false, err
	}
	lim, err = l.reserve(ctx, policies, req, func(Limits) nbv1.Reservation { return req.Reservation })
	return lim, true, err
}

// ReserveKernel makes room for a new kernel named name of spec, owned by owner (of groups,
// or nil for the recorded ones), and returns the resources of its kernel container: the
// spec's, with the owner's default resources filled in. A refusal is a *Exceeded or a
// *SpecNotAllowed.
func (l *Ledger) ReserveKernel(ctx context.Context, owner string, groups []string, name string, spec *nbv1.KernelSpec) (corev1.ResourceRequirements, error) {
	return l.reservePod(ctx, owner, groups, spec, func(res corev1.ResourceRequirements) nbv1.Reservation {
		return KernelRoom(name, spec.Name, res)
	})
}

// ReserveTerminal makes room for a new terminal named name, whose pod takes the image and
// resources of spec, as ReserveKernel does for a kernel: the same limits on resources and
// kernel specs, and the terminals limit in place of the kernels one.
func (l *Ledger) ReserveTerminal(ctx context.Context, owner string, groups []string, name string, spec *nbv1.KernelSpec) (corev1.ResourceRequirements, error) {
	return l.reservePod(ctx, owner, groups, spec, func(res corev1.ResourceRequirements) nbv1.Reservation {
		return TerminalRoom(name, spec.Name, res)
	})
}

// reservePod reserves the room that room makes of the resources of a pod of spec: the
// spec's, with the owner's default resources filled in, which it returns.
func (l *Ledger) reservePod(ctx context.Context, owner string, groups []string, spec *nbv1.KernelSpec, room func(corev1.ResourceRequirements) nbv1.Reservation) (corev1.ResourceRequirements, error) {
	policies, err := l.Policies(ctx)
	if err != nil || len(policies) == 0 {
		return spec.Spec.Resources, err
	}
	var res corev1.ResourceRequirements
	_, err = l.reserve(ctx, policies, Request{Owner: owner, Groups: groups}, func(lim Limits) nbv1.Reservation {
		res = KernelResources(spec.Spec.Resources, lim.DefaultResources)
		return room(res)
	})
	return res, err
}

// reserve is one reservation under policies, read once: the room, which may depend on the
// limits that govern the owner, is made again on each try against concurrent writers.
func (l *Ledger) reserve(ctx context.Context, policies []nbv1.UserPolicy, req Request, room func(Limits) nbv1.Reservation) (Limits, error) {
	reader := l.Reader
	for attempt := 0; ; attempt++ {
		lim, err := l.reserveOnce(ctx, reader, policies, req, room)
		var ex *Exceeded
		if errors.As(err, &ex) && l.APIReader != nil && reader != l.APIReader {
			// A refusal stands only on the ledger as it is now: a cache may still hold the
			// room of a kernel released a moment ago.
			reader = l.APIReader
			continue
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return lim, err
		}
		if attempt+1 == maxAttempts {
			return lim, fmt.Errorf("reserve for %s: too many concurrent changes: %w", req.Owner, err)
		}
		// Another writer won: read the ledger as it is now, after a short random pause so
		// that the losers do not all come back at once.
		reader = l.APIReader
		pause := time.Duration(1+rand.IntN(5<<min(attempt, 4))) * time.Millisecond
		select {
		case <-ctx.Done():
			return lim, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// reserveOnce is one try of reserve: read the ledger, check, write.
func (l *Ledger) reserveOnce(ctx context.Context, reader client.Reader, policies []nbv1.UserPolicy, req Request, room func(Limits) nbv1.Reservation) (Limits, error) {
	u, err := l.get(ctx, reader, req.Owner)
	create := apierrors.IsNotFound(err)
	if err != nil && !create {
		return Limits{}, fmt.Errorf("get usage of %s: %w", req.Owner, err)
	}
	if create {
		u = &nbv1.UserUsage{
			ObjectMeta: metav1.ObjectMeta{Name: nbv1.UsageName(nbv1.Owner(req.Owner)), Namespace: l.Namespace,
				Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelOwner: nbv1.OwnerLabelValue(nbv1.Owner(req.Owner))}},
			Spec: nbv1.UserUsageSpec{User: nbv1.Owner(req.Owner)},
		}
	} else {
		u = u.DeepCopy()
	}
	if req.Groups != nil && !slices.Equal(u.Spec.Groups, req.Groups) {
		u.Spec.Groups = slices.Clone(req.Groups)
	}
	lim := Effective(policies, req.Owner, u.Spec.Groups)
	r := room(lim)
	// A terminal's pod runs its spec's image as a kernel's does: the same specs are allowed.
	if (r.Kind == nbv1.ReservationKernel || r.Kind == nbv1.ReservationTerminal) && !req.Record && !lim.AllowsSpec(r.KernelSpec) {
		return lim, &SpecNotAllowed{User: req.Owner, Spec: r.KernelSpec, Allowed: lim.KernelSpecs}
	}
	i := slices.IndexFunc(u.Spec.Reservations, func(x nbv1.Reservation) bool { return x.Kind == r.Kind && x.Name == r.Name })
	others := u.Spec.Reservations
	if i >= 0 {
		old := u.Spec.Reservations[i]
		others = slices.Delete(slices.Clone(u.Spec.Reservations), i, i+1)
		if sameRoom(&old, &r) {
			if !create && equality.Semantic.DeepEqual(u.Status, Summary(lim, Sum(u.Spec.Reservations))) && (req.Groups == nil || slices.Equal(req.Groups, u.Spec.Groups)) {
				return lim, nil
			}
			r.Since = old.Since
		}
	}
	if r.Since.IsZero() {
		r.Since = metav1.NewTime(l.now())
	}
	if !req.Record {
		used := Sum(others)
		add := Of(&r)
		if i >= 0 {
			// Only what the change adds is held to the limits.
			add = minus(add, Of(&u.Spec.Reservations[i]))
			used.Add(Of(&u.Spec.Reservations[i]))
		}
		if err := Check(req.Owner, lim, used, add); err != nil {
			return lim, err
		}
	}
	u.Spec.Reservations = append(others, r)
	slices.SortFunc(u.Spec.Reservations, func(a, b nbv1.Reservation) int {
		if a.Kind != b.Kind {
			return cmp.Compare(a.Kind, b.Kind)
		}
		return cmp.Compare(a.Name, b.Name)
	})
	u.Status = Summary(lim, Sum(u.Spec.Reservations))
	if create {
		return lim, l.Client.Create(ctx, u)
	}
	return lim, l.Client.Update(ctx, u)
}

// Release removes the reservation of kind and name from owner's ledger. A missing ledger or
// reservation is not an error.
func (l *Ledger) Release(ctx context.Context, owner string, kind nbv1.ReservationKind, name string) error {
	reader := l.Reader
	for attempt := 0; attempt < maxAttempts; attempt++ {
		u, err := l.get(ctx, reader, owner)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get usage of %s: %w", owner, err)
		}
		i := slices.IndexFunc(u.Spec.Reservations, func(x nbv1.Reservation) bool {
			return x.Kind == kind && x.Name == name
		})
		if i < 0 {
			return nil
		}
		u = u.DeepCopy()
		u.Spec.Reservations = slices.Delete(u.Spec.Reservations, i, i+1)
		if err := l.writeSummary(ctx, u); err != nil {
			return err
		}
		err = l.Client.Update(ctx, u)
		if !apierrors.IsConflict(err) {
			return err
		}
		reader = l.APIReader
	}
	return errors.New("release: too many concurrent changes")
}

// Settle keeps in u's ledger only the reservations keep (those whose resources still take
// room) and brings its summary in line with the policies. A write lost to a newer version of
// the ledger is no error: lost says so, for the caller to come back to it.
func (l *Ledger) Settle(ctx context.Context, u *nbv1.UserUsage, keep []nbv1.Reservation) (lost bool, err error) {
	changed := u.DeepCopy()
	changed.Spec.Reservations = keep
	if err := l.writeSummary(ctx, changed); err != nil {
		return false, err
	}
	if equality.Semantic.DeepEqual(changed.Spec, u.Spec) && changed.Status == u.Status {
		return false, nil
	}
	if err := l.Client.Update(ctx, changed); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, fmt.Errorf("update usage of %s: %w", u.Spec.User, err)
	}
	return false, nil
}

// writeSummary sets u's status from its reservations and the policies.
func (l *Ledger) writeSummary(ctx context.Context, u *nbv1.UserUsage) error {
	policies, err := l.Policies(ctx)
	if err != nil {
		return err
	}
	u.Status = Summary(Effective(policies, string(u.Spec.User), u.Spec.Groups), Sum(u.Spec.Reservations))
	return nil
}

// In is the ledger of namespace ns, with l's clients.
func (l *Ledger) In(ns string) *Ledger {
	c := *l
	c.Namespace = ns
	return &c
}
