package repository

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/quota"
)

// Quotas tells users their usage and limits (the ledger the kernels' and clusters' starts
// reserve in).
type Quotas struct {
	Ledger *quota.Ledger
	// Specs names the kernel specs a user may start as clients know them (their Jupyter
	// names); the resource names of the policies when nil.
	Specs *KernelSpecs
}

// groupsOf are the groups to hold a start by u for owner to: u's own, known from the
// identity provider, when the start is theirs; for a start on another's behalf, nil, which
// makes the ledger use the groups it recorded for the owner.
func groupsOf(u identity.User, owner string) []string {
	if owner != u.Name {
		return nil
	}
	if u.Groups == nil {
		return []string{}
	}
	return u.Groups
}

// Quota is u's usage and limits, or nil when the installation has no policies.
func (q *Quotas) Quota(ctx context.Context, u identity.User) (*jupyter.Quota, error) {
	if q == nil || q.Ledger == nil {
		return nil, nil
	}
	used, lim, on, err := q.Ledger.Usage(ctx, u.Name, groupsOf(u, u.Name))
	if err != nil || !on {
		return nil, err
	}
	return &jupyter.Quota{
		Policies: append([]string{}, lim.Policies...),
		Usage: jupyter.QuotaAmounts{Kernels: &used.Kernels, Engines: &used.Engines, Terminals: &used.Terminals,
			CPU: quantity(&used.CPU), Memory: quantity(&used.Memory), GPU: quantity(&used.GPU)},
		Limits: jupyter.QuotaAmounts{Kernels: lim.Kernels, Engines: lim.Engines, Terminals: lim.Terminals,
			CPU: quantity(lim.CPU), Memory: quantity(lim.Memory), GPU: quantity(lim.GPU), UploadBytes: bytes(lim.UploadBytes)},
		KernelSpecs: q.jupyterNames(ctx, lim.KernelSpecs),
	}, nil
}

// jupyterNames are the Jupyter names of the KernelSpecs named specs (nil for nil: all).
func (q *Quotas) jupyterNames(ctx context.Context, specs []string) []string {
	if specs == nil || q.Specs == nil {
		return specs
	}
	names := q.Specs.kernelNames(ctx)
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = names.of(s)
	}
	slices.Sort(out)
	return out
}

// UploadAllowance is how many bytes u's chunked uploads in progress may hold; 0 is no limit.
func (q *Quotas) UploadAllowance(ctx context.Context, u identity.User) (int64, error) {
	if q == nil || q.Ledger == nil {
		return 0, nil
	}
	lim, on, err := q.Ledger.Limits(ctx, u.Name, groupsOf(u, u.Name))
	if err != nil || !on || lim.UploadBytes == nil {
		return 0, err
	}
	// A limit of zero allows no upload at all: one byte is the smallest allowance the store
	// knows, and no chunk is smaller.
	return max(lim.UploadBytes.Value(), 1), nil
}

func quantity(q *resource.Quantity) *string {
	if q == nil {
		return nil
	}
	s := q.String()
	return &s
}

func bytes(q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	n := q.Value()
	return &n
}
