package repository

import (
	"context"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// None holds no kernels, sessions, clusters or kernel specs: it stands in for those a server
// runs without, and answers as Jupyter does when there are none, with empty lists and 404 for
// an id, so that the API server never asks whether it has them.
type None struct{}

var errNoKernels = domainerr.NotFound("this server runs no kernels")

// CountKernels is none.
func (None) CountKernels(context.Context, identity.User) (int, int, error) { return 0, 0, nil }

// ListKernels is empty.
func (None) ListKernels(context.Context, identity.User) ([]jupyter.Kernel, error) {
	return []jupyter.Kernel{}, nil
}

// GetKernel finds none.
func (None) GetKernel(_ context.Context, _ identity.User, id string) (jupyter.Kernel, error) {
	return jupyter.Kernel{}, ownedKernels.missing(id)
}

// StartKernel finds no kernel spec to start.
func (None) StartKernel(_ context.Context, _ identity.User, start KernelStart) (jupyter.Kernel, error) {
	name := start.Name
	if name == "python" {
		name = nativeKernel
	}
	return jupyter.Kernel{}, noSuchKernel(name)
}

// DeleteKernel finds none.
func (None) DeleteKernel(_ context.Context, _ identity.User, id string) error {
	return ownedKernels.missing(id)
}

// KernelOwner finds none.
func (None) KernelOwner(context.Context, identity.User, string) string { return "" }

// InterruptKernel finds none.
func (None) InterruptKernel(_ context.Context, _ identity.User, id string) error {
	return ownedKernels.missing(id)
}

// RestartKernel finds none.
func (None) RestartKernel(_ context.Context, _ identity.User, id string) (jupyter.Kernel, error) {
	return jupyter.Kernel{}, ownedKernels.missing(id)
}

// Endpoint finds none.
func (None) Endpoint(_ context.Context, _ identity.User, id string) (agentclient.Endpoint, error) {
	return agentclient.Endpoint{}, ownedKernels.missing(id)
}

// ListSessions is empty.
func (None) ListSessions(context.Context, identity.User) ([]jupyter.Session, error) {
	return []jupyter.Session{}, nil
}

// GetSession finds none.
func (None) GetSession(_ context.Context, _ identity.User, id string) (jupyter.Session, error) {
	return jupyter.Session{}, ownedSessions.missing(id)
}

// CreateSession creates none: a session needs a kernel, of a spec there is none of.
func (n None) CreateSession(ctx context.Context, u identity.User, ch SessionChange) (jupyter.Session, bool, error) {
	if ch.KernelSpec != nil {
		_, err := n.StartKernel(ctx, u, KernelStart{Name: *ch.KernelSpec})
		return jupyter.Session{}, false, err
	}
	return jupyter.Session{}, false, errNoKernels
}

// UpdateSession finds none.
func (None) UpdateSession(_ context.Context, _ identity.User, id string, _ SessionChange) (jupyter.Session, error) {
	return jupyter.Session{}, ownedSessions.missing(id)
}

// DeleteSession finds none.
func (None) DeleteSession(_ context.Context, _ identity.User, id string) error {
	return ownedSessions.missing(id)
}

// NotebookOf finds none.
func (None) NotebookOf(context.Context, identity.User, string) string { return "" }

// ListClusters is empty.
func (None) ListClusters(context.Context, identity.User) ([]jupyter.Cluster, error) {
	return []jupyter.Cluster{}, nil
}

// GetCluster finds none.
func (None) GetCluster(_ context.Context, _ identity.User, id string) (jupyter.Cluster, error) {
	return jupyter.Cluster{}, ownedClusters.missing(id)
}

// StartCluster finds none.
func (None) StartCluster(_ context.Context, _ identity.User, id string, _ *int32) (jupyter.Cluster, error) {
	return jupyter.Cluster{}, ownedClusters.missing(id)
}

// StopCluster finds none.
func (None) StopCluster(_ context.Context, _ identity.User, id string) (jupyter.Cluster, error) {
	return jupyter.Cluster{}, ownedClusters.missing(id)
}

// CreateCluster makes none: this server has no clusters.
func (None) CreateCluster(context.Context, identity.User, jupyter.ClusterCreate) (jupyter.Cluster, error) {
	return jupyter.Cluster{}, domainerr.NotFound("This server runs no clusters")
}

// Dashboard finds none.
func (None) Dashboard(_ context.Context, _ identity.User, id string) (string, error) {
	return "", ownedClusters.missing(id)
}

// DeleteCluster finds none.
func (None) DeleteCluster(_ context.Context, _ identity.User, id string) error {
	return ownedClusters.missing(id)
}

// ListKernelSpecs is empty.
func (None) ListKernelSpecs(context.Context) ([]jupyter.KernelSpec, error) {
	return []jupyter.KernelSpec{}, nil
}

// GetKernelSpec finds none.
func (None) GetKernelSpec(_ context.Context, name string) (jupyter.KernelSpec, error) {
	return jupyter.KernelSpec{}, kernelSpecMissing(name)
}

// GetKernelSpecResource finds none.
func (None) GetKernelSpecResource(_ context.Context, name, _ string) (KernelSpecResource, error) {
	return KernelSpecResource{}, kernelSpecMissing(name)
}
