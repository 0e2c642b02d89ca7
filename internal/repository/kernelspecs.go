package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/kernelspecs"
)

// ErrNotFound is matched (errors.Is) by the errors of resources that do not exist.
var ErrNotFound = errors.New("not found")

// notFoundError is a missing resource, with the message Jupyter gives for it.
type notFoundError struct{ message string }

func (e *notFoundError) Error() string        { return e.message }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// KernelSpecs reads the KernelSpecs of one namespace: the kinds of kernel users can start.
// Every user sees all of them.
type KernelSpecs struct {
	// Reader reads the KernelSpecs, usually the manager's cached client.
	Reader client.Reader
	// Namespace holds the KernelSpecs.
	Namespace string
	// Host, when set, brings the host's kernel specs in before every read (`nbkube local`).
	// For a while after a sync (HostSettle), and always without a Reader, reads go through
	// Host.Client, the client the sync wrote with: a cache shows a spec just installed only
	// after its watch event, and a removed one for as long. Otherwise they read the Reader,
	// since a read of the API server costs a few milliseconds of every kernel start.
	Host *kernelspecs.Host
	// HostSettle is how long after a sync reads go around the Reader; 2 s when zero, far
	// more than a watch event takes on a busy machine.
	HostSettle time.Duration
}

// ListKernelSpecs returns every kernel spec, sorted by name.
func (k *KernelSpecs) ListKernelSpecs(ctx context.Context) ([]nbv1.KernelSpec, error) {
	var list nbv1.KernelSpecList
	if err := k.reader(ctx).List(ctx, &list, client.InNamespace(k.Namespace)); err != nil {
		return nil, fmt.Errorf("list kernel specs: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b nbv1.KernelSpec) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// GetKernelSpec returns the kernel spec called name. Names match case-insensitively, as
// jupyter_client lower-cases them; the error of a missing one matches ErrNotFound.
func (k *KernelSpecs) GetKernelSpec(ctx context.Context, name string) (*nbv1.KernelSpec, error) {
	missing := &notFoundError{message: fmt.Sprintf("Kernel spec %s not found", name)}
	key := strings.ToLower(name)
	// A name that cannot be a resource's names none; asking the API server would answer
	// 400 or, with a "/" in it, address another URL.
	if len(validation.IsDNS1123Subdomain(key)) > 0 {
		return nil, missing
	}
	ks := &nbv1.KernelSpec{}
	err := k.reader(ctx).Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: key}, ks)
	switch {
	case apierrors.IsNotFound(err):
		return nil, missing
	case err != nil:
		return nil, fmt.Errorf("get kernel spec %s: %w", key, err)
	}
	return ks, nil
}

// reader refreshes the host's specs, if any, and returns the reader that sees them.
func (k *KernelSpecs) reader(ctx context.Context) client.Reader {
	if k.Host == nil {
		return k.Reader
	}
	// A failed sync leaves the previous specs in place: the answer lists those rather than
	// failing, as Jupyter lists the specs it can read and logs the others.
	if names, synced, err := k.Host.Refresh(ctx); err != nil {
		log.FromContext(ctx).Error(err, "Kernel specs of this machine not all synced", "offered", names)
	} else if synced {
		log.FromContext(ctx).V(1).Info("Kernel specs of this machine synced", "offered", names)
	}
	settle := k.HostSettle
	if settle <= 0 {
		settle = 2 * time.Second
	}
	if k.Reader == nil || k.Host.SyncedWithin(settle) {
		return k.Host.Client
	}
	return k.Reader
}
