// Package quota holds users to the limits of their UserPolicies: which policies govern a
// user and what a kernel or a running cluster counts (quota.go, pure), and the ledger of
// reservations (the user's UserUsage, ledger.go), which API servers and controllers change
// only through a Ledger, with optimistic concurrency, so that starts through several API
// server replicas and by kubectl cannot together go past a limit.
package quota

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
)

// GPUResources are the extended resources counted as GPUs.
var GPUResources = []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915"}

// Amounts are what a user's kernels, clusters and terminals take, or what one of them adds.
type Amounts struct {
	Kernels, Engines, Terminals int64
	CPU, Memory, GPU            resource.Quantity
}

// Add adds o to a.
func (a *Amounts) Add(o Amounts) {
	a.Kernels += o.Kernels
	a.Engines += o.Engines
	a.Terminals += o.Terminals
	a.CPU.Add(o.CPU)
	a.Memory.Add(o.Memory)
	a.GPU.Add(o.GPU)
}

// Of is what a reservation counts.
func Of(r *nbv1.Reservation) Amounts {
	a := Amounts{Engines: int64(r.Engines)}
	switch r.Kind {
	case nbv1.ReservationKernel:
		a.Kernels = 1
	case nbv1.ReservationTerminal:
		a.Terminals = 1
	}
	for _, q := range []struct {
		to   *resource.Quantity
		from *resource.Quantity
	}{{&a.CPU, r.CPU}, {&a.Memory, r.Memory}, {&a.GPU, r.GPU}} {
		if q.from != nil {
			*q.to = q.from.DeepCopy()
		}
	}
	return a
}

// Requested is what a container of res asks for: its requests, and its limits where it
// requests nothing (as Kubernetes defaults a request to its limit), times n.
func Requested(res corev1.ResourceRequirements, n int64) (cpu, memory, gpu resource.Quantity) {
	of := func(name corev1.ResourceName) resource.Quantity {
		if q, ok := res.Requests[name]; ok {
			return q.DeepCopy()
		}
		if q, ok := res.Limits[name]; ok {
			return q.DeepCopy()
		}
		return resource.Quantity{}
	}
	times := func(q resource.Quantity) resource.Quantity {
		out := resource.Quantity{Format: q.Format}
		for range n {
			out.Add(q)
		}
		return out
	}
	cpu, memory = times(of(corev1.ResourceCPU)), times(of(corev1.ResourceMemory))
	for _, name := range GPUResources {
		g := of(name)
		gpu.Add(times(g))
	}
	return cpu, memory, gpu
}

// KernelResources are the resources of a kernel container: its KernelSpec's, with the
// policy's defaults for each resource the spec neither requests nor limits.
func KernelResources(spec corev1.ResourceRequirements, defaults corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *spec.DeepCopy()
	set := func(name corev1.ResourceName) bool {
		_, r := spec.Requests[name]
		_, l := spec.Limits[name]
		return r || l
	}
	for name, q := range defaults.Requests {
		if !set(name) {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[name] = q.DeepCopy()
		}
	}
	for name, q := range defaults.Limits {
		if !set(name) {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q.DeepCopy()
		}
	}
	return out
}

// Limits are the limits, allowed kernel specs and default resources that govern one user.
// A nil limit is no limit.
type Limits struct {
	Kernels, Engines, Terminals   *int64
	CPU, Memory, GPU, UploadBytes *resource.Quantity
	// KernelSpecs are the kernel specs the user may start; nil means all.
	KernelSpecs []string
	// DefaultResources are the resources of kernels whose spec sets none.
	DefaultResources corev1.ResourceRequirements
	// Policies name the UserPolicies that govern the user, sorted.
	Policies []string
}

// AllowsSpec says whether the user may start kernels of the KernelSpec named spec.
func (l *Limits) AllowsSpec(spec string) bool {
	return l.KernelSpecs == nil || slices.Contains(l.KernelSpecs, spec)
}

// tier is how a policy selects a user: by name, by group, or as everyone's.
type tier int

const (
	tierUser tier = iota
	tierGroup
	tierAll
	tierNone
)

func tierOf(p *nbv1.UserPolicy, user string, groups []string) tier {
	switch {
	case slices.Contains(p.Spec.Users, user):
		return tierUser
	case slices.ContainsFunc(p.Spec.Groups, func(g string) bool { return slices.Contains(groups, g) }):
		return tierGroup
	case p.Spec.AllUsers:
		return tierAll
	}
	return tierNone
}

// Effective is what the policies say for user, a member of groups. Each field comes from the
// policies that name the user, or, where none of those sets it, from those of the user's
// groups, or else from those for all users. Where several policies of that tier set it, the
// groups' policies give the most generous value (the larger limit, the union of kernel
// specs: a member of two groups has the rights of both), the others the most restrictive.
// Default resources come from the first policy by name of the first tier that sets each.
func Effective(policies []nbv1.UserPolicy, user string, groups []string) Limits {
	byTier := make([][]*nbv1.UserPolicy, tierNone)
	var l Limits
	ps := slices.Clone(policies)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	for i := range ps {
		if t := tierOf(&ps[i], user, groups); t != tierNone {
			byTier[t] = append(byTier[t], &ps[i])
			l.Policies = append(l.Policies, ps[i].Name)
		}
	}
	l.Kernels = pickInt(byTier, func(p *nbv1.UserPolicy) *int32 { return p.Spec.Limits.Kernels })
	l.Engines = pickInt(byTier, func(p *nbv1.UserPolicy) *int32 { return p.Spec.Limits.Engines })
	l.Terminals = pickInt(byTier, func(p *nbv1.UserPolicy) *int32 { return p.Spec.Limits.Terminals })
	l.CPU = pickQuantity(byTier, func(p *nbv1.UserPolicy) *resource.Quantity { return p.Spec.Limits.CPU })
	l.Memory = pickQuantity(byTier, func(p *nbv1.UserPolicy) *resource.Quantity { return p.Spec.Limits.Memory })
	l.GPU = pickQuantity(byTier, func(p *nbv1.UserPolicy) *resource.Quantity { return p.Spec.Limits.GPU })
	l.UploadBytes = pickQuantity(byTier, func(p *nbv1.UserPolicy) *resource.Quantity { return p.Spec.Limits.UploadBytes })
	l.KernelSpecs = pickSpecs(byTier)
	for t := range byTier {
		for _, p := range byTier[t] {
			if p.Spec.DefaultResources != nil {
				merged := KernelResources(l.DefaultResources, *p.Spec.DefaultResources)
				l.DefaultResources = merged
			}
		}
	}
	return l
}

// generous says whether, in tier t, several policies' values combine to the most generous.
func generous(t int) bool { return tier(t) == tierGroup }

func pickInt(byTier [][]*nbv1.UserPolicy, field func(*nbv1.UserPolicy) *int32) *int64 {
	for t, ps := range byTier {
		var out *int64
		for _, p := range ps {
			v := field(p)
			if v == nil {
				continue
			}
			if n := int64(*v); out == nil || (generous(t) && n > *out) || (!generous(t) && n < *out) {
				out = &n
			}
		}
		if out != nil {
			return out
		}
	}
	return nil
}

func pickQuantity(byTier [][]*nbv1.UserPolicy, field func(*nbv1.UserPolicy) *resource.Quantity) *resource.Quantity {
	for t, ps := range byTier {
		var out *resource.Quantity
		for _, p := range ps {
			v := field(p)
			if v == nil {
				continue
			}
			if out == nil || (generous(t) && v.Cmp(*out) > 0) || (!generous(t) && v.Cmp(*out) < 0) {
				q := v.DeepCopy()
				out = &q
			}
		}
		if out != nil {
			return out
		}
	}
	return nil
}

func pickSpecs(byTier [][]*nbv1.UserPolicy) []string {
	for t, ps := range byTier {
		var out []string
		seen := false
		for _, p := range ps {
			if len(p.Spec.KernelSpecs) == 0 {
				continue
			}
			switch {
			case !seen:
				out = slices.Clone(p.Spec.KernelSpecs)
			case generous(t):
				for _, s := range p.Spec.KernelSpecs {
					if !slices.Contains(out, s) {
						out = append(out, s)
					}
				}
			default:
				out = slices.DeleteFunc(out, func(s string) bool { return !slices.Contains(p.Spec.KernelSpecs, s) })
			}
			seen = true
		}
		if seen {
			slices.Sort(out)
			if out == nil {
				out = []string{}
			}
			return out
		}
	}
	return nil
}

// Exceeded is the refusal of a start that would take a user past a limit.
type Exceeded struct {
	User string
	// Limit names what is exceeded: kernels, engines, cpu, memory or gpu.
	Limit string
	// Used and Max are the usage before the start and the limit, as Quantity strings.
	Used, Max string
	// Adds is what the start would add.
	Adds string
}

// Reason is the limit and the usage: "kernels: 5 of 5".
func (e *Exceeded) Reason() string { return fmt.Sprintf("%s: %s of %s", e.Limit, e.Used, e.Max) }

func (e *Exceeded) Error() string {
	return fmt.Sprintf("user %s has reached a limit, %s (this would add %s)", e.User, e.Reason(), e.Adds)
}

// DomainError is the refusal as the API tells it: 403 with the reason.
func (e *Exceeded) DomainError() error {
	return &domainerr.Error{Kind: domainerr.ErrForbidden, Message: "Quota exceeded: " + e.Error(), Reason: e.Reason(), Err: e}
}

// SpecNotAllowed is the refusal of a kernel spec the user's policies do not allow.
type SpecNotAllowed struct {
	User, Spec string
	Allowed    []string
}

func (e *SpecNotAllowed) Error() string {
	return fmt.Sprintf("user %s may not start kernels of kernel spec %q (allowed: %s)", e.User, e.Spec, strings.Join(e.Allowed, ", "))
}

// DomainError is the refusal as the API tells it: 403.
func (e *SpecNotAllowed) DomainError() error {
	return &domainerr.Error{Kind: domainerr.ErrForbidden, Message: e.Error(), Reason: "kernel spec not allowed", Err: e}
}

// Check says whether used plus add stays within l, for user. A limit is only held against
// what add increases: a start that adds no kernels is never refused for the kernel count,
// and a user over a lowered limit may still stop things.
func Check(user string, l Limits, used, add Amounts) error {
	ints := []struct {
		name      string
		used, add int64
		max       *int64
	}{{"kernels", used.Kernels, add.Kernels, l.Kernels}, {"engines", used.Engines, add.Engines, l.Engines},
		{"terminals", used.Terminals, add.Terminals, l.Terminals}}
	for _, c := range ints {
		if c.max != nil && c.add > 0 && c.used+c.add > *c.max {
			return &Exceeded{User: user, Limit: c.name, Used: strconv.FormatInt(c.used, 10), Max: strconv.FormatInt(*c.max, 10), Adds: strconv.FormatInt(c.add, 10) + " " + c.name}
		}
	}
	qs := []struct {
		name      string
		used, add resource.Quantity
		max       *resource.Quantity
	}{{"cpu", used.CPU, add.CPU, l.CPU}, {"memory", used.Memory, add.Memory, l.Memory}, {"gpu", used.GPU, add.GPU, l.GPU}}
	for _, c := range qs {
		if c.max == nil || c.add.Sign() <= 0 {
			continue
		}
		total := c.used.DeepCopy()
		total.Add(c.add)
		if total.Cmp(*c.max) > 0 {
			return &Exceeded{User: user, Limit: c.name, Used: c.used.String(), Max: c.max.String(), Adds: c.add.String() + " " + c.name}
		}
	}
	return nil
}

// Summary is usage against limits as kubectl shows it: "used/limit", or "used" alone.
func Summary(l Limits, used Amounts) nbv1.UserUsageStatus {
	i := func(u int64, m *int64) string {
		if m == nil {
			return strconv.FormatInt(u, 10)
		}
		return strconv.FormatInt(u, 10) + "/" + strconv.FormatInt(*m, 10)
	}
	q := func(u resource.Quantity, m *resource.Quantity) string {
		if m == nil {
			return u.String()
		}
		return u.String() + "/" + m.String()
	}
	return nbv1.UserUsageStatus{
		Policies:  truncate(strings.Join(l.Policies, ","), 1024),
		Kernels:   i(used.Kernels, l.Kernels),
		Engines:   i(used.Engines, l.Engines),
		Terminals: i(used.Terminals, l.Terminals),
		CPU:       q(used.CPU, l.CPU),
		Memory:    q(used.Memory, l.Memory),
		GPU:       q(used.GPU, l.GPU),
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Sum is what reservations count together.
func Sum(rs []nbv1.Reservation) Amounts {
	var a Amounts
	for i := range rs {
		a.Add(Of(&rs[i]))
	}
	return a
}

// sameRoom says whether two reservations hold the same room.
func sameRoom(a, b *nbv1.Reservation) bool {
	return a.KernelSpec == b.KernelSpec && a.Engines == b.Engines &&
		equality.Semantic.DeepEqual(a.CPU, b.CPU) && equality.Semantic.DeepEqual(a.Memory, b.Memory) && equality.Semantic.DeepEqual(a.GPU, b.GPU)
}

// minus is what a has beyond b, dimension by dimension, never below zero.
func minus(a, b Amounts) Amounts {
	out := Amounts{Kernels: max(a.Kernels-b.Kernels, 0), Engines: max(a.Engines-b.Engines, 0), Terminals: max(a.Terminals-b.Terminals, 0)}
	out.CPU, out.Memory, out.GPU = sub(a.CPU, b.CPU), sub(a.Memory, b.Memory), sub(a.GPU, b.GPU)
	return out
}

// sub is a-b, or zero when b is as large.
func sub(a, b resource.Quantity) resource.Quantity {
	if a.Cmp(b) <= 0 {
		return resource.Quantity{}
	}
	out := a.DeepCopy()
	out.Sub(b)
	return out
}

// KernelRoom is the reservation of a kernel named name whose container has res.
func KernelRoom(name, spec string, res corev1.ResourceRequirements) nbv1.Reservation {
	cpu, memory, gpu := Requested(res, 1)
	return nbv1.Reservation{Kind: nbv1.ReservationKernel, Name: name, KernelSpec: spec,
		CPU: nonZero(cpu), Memory: nonZero(memory), GPU: nonZero(gpu)}
}

// TerminalRoom is the reservation of a terminal named name whose container has res.
func TerminalRoom(name, spec string, res corev1.ResourceRequirements) nbv1.Reservation {
	r := KernelRoom(name, spec, res)
	r.Kind = nbv1.ReservationTerminal
	return r
}

// ClusterRoom is the reservation of a running cluster of engines engines with res each.
func ClusterRoom(name string, engines int32, res corev1.ResourceRequirements) nbv1.Reservation {
	cpu, memory, gpu := Requested(res, int64(engines))
	return nbv1.Reservation{Kind: nbv1.ReservationCluster, Name: name, Engines: engines,
		CPU: nonZero(cpu), Memory: nonZero(memory), GPU: nonZero(gpu)}
}

func nonZero(q resource.Quantity) *resource.Quantity {
	if q.IsZero() {
		return nil
	}
	return &q
}

// Refusal is err as the API tells it when it is a refusal of the ledger's (403), else err.
func Refusal(err error) error {
	var ex *Exceeded
	var na *SpecNotAllowed
	switch {
	case errors.As(err, &ex):
		return ex.DomainError()
	case errors.As(err, &na):
		return na.DomainError()
	}
	return err
}
