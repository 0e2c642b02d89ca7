// Package repository reads and writes nbkube's custom resources for the API server, scoped to
// the requesting user, and returns domain errors.
package repository

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/identity"
)

// Kernels reads Kernel resources of one namespace.
type Kernels struct {
	Reader    client.Reader
	Namespace string
}

// CountKernels is the number of the user's kernels and of the clients connected to them.
func (k *Kernels) CountKernels(ctx context.Context, u identity.User) (int, int, error) {
	var list nbv1.KernelList
	if err := k.Reader.List(ctx, &list, client.InNamespace(k.Namespace)); err != nil {
		return 0, 0, fmt.Errorf("list kernels: %w", err)
	}
	kernels, connections := 0, 0
	for _, kn := range list.Items {
		if u.Owns(string(kn.Spec.Owner)) {
			kernels++
			connections += int(kn.Status.Connections)
		}
	}
	return kernels, connections, nil
}
