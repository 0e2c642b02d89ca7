package repository

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
)

// owned is a kind of resource that users own (Kernel, Session, Cluster, Terminal), T its type and L the
// type of its list. Every kind is listed and read through it, so that all of them hide the
// same resources: other users' (unless an admin asks) and those being deleted. Another user's
// resource is as missing as one that does not exist: telling them apart would tell what
// others run.
type owned[T any, PT interface {
	*T
	client.Object
}, L any, PL interface {
	*L
	client.ObjectList
}] struct {
	// noun names the kind in the errors of failed reads.
	noun  string
	items func(PL) []T
	owner func(PT) nbv1.Owner
	// startedBy, when set, names who started a resource for its owner: a user with the right
	// to act for others sees what they started so (a gateway uses the kernels it started).
	startedBy func(PT) string
	// oldestFirst orders a list by creation, as Jupyter lists kernels and sessions (in the
	// order they started); otherwise a list is by name, as IPython listed cluster profiles.
	oldestFirst bool
	// missing is Jupyter's error for an id that names none of the user's.
	missing func(id string) error
	// hidden, when set, tells resources that are nobody's in the API yet (warm kernels).
	hidden func(PT) bool
}

func (o *owned[T, PT, L, PL]) visible(u identity.User, obj PT) bool {
	if obj.GetDeletionTimestamp() != nil || (o.hidden != nil && o.hidden(obj)) {
		return false
	}
	return u.Owns(string(o.owner(obj))) || (u.ActAs && o.startedBy != nil && o.startedBy(obj) == u.Name)
}

// list returns the user's resources of the kind in namespace.
func (o *owned[T, PT, L, PL]) list(ctx context.Context, r client.Reader, namespace string, u identity.User) ([]PT, error) {
	var l L
	if err := r.List(ctx, PL(&l), client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list %ss: %w", o.noun, err)
	}
	items := o.items(&l)
	out := make([]PT, 0, len(items))
	for i := range items {
		if obj := PT(&items[i]); o.visible(u, obj) {
			out = append(out, obj)
		}
	}
	if o.oldestFirst {
		slices.SortStableFunc(out, func(a, b PT) int {
			return a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time)
		})
	}
	return out, nil
}

// get returns the user's resource named id.
func (o *owned[T, PT, L, PL]) get(ctx context.Context, r client.Reader, namespace string, u identity.User, id string) (PT, error) {
	if !validName(id) {
		return nil, o.missing(id)
	}
	obj := PT(new(T))
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: id}, obj)
	if apierrors.IsNotFound(err) || (err == nil && !o.visible(u, obj)) {
		return nil, o.missing(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", o.noun, err)
	}
	return obj, nil
}

var (
	ownedKernels = &owned[nbv1.Kernel, *nbv1.Kernel, nbv1.KernelList, *nbv1.KernelList]{
		noun:        "kernel",
		items:       func(l *nbv1.KernelList) []nbv1.Kernel { return l.Items },
		owner:       func(k *nbv1.Kernel) nbv1.Owner { return k.Spec.Owner },
		startedBy:   func(k *nbv1.Kernel) string { return k.Annotations[nbv1.AnnotationStartedBy] },
		oldestFirst: true,
		missing:     func(id string) error { return domainerr.NotFound("Kernel does not exist: %s", id) },
		hidden:      (*nbv1.Kernel).Warm,
	}
	ownedSessions = &owned[nbv1.Session, *nbv1.Session, nbv1.SessionList, *nbv1.SessionList]{
		noun:        "session",
		items:       func(l *nbv1.SessionList) []nbv1.Session { return l.Items },
		owner:       func(s *nbv1.Session) nbv1.Owner { return s.Spec.Owner },
		oldestFirst: true,
		missing:     func(id string) error { return domainerr.NotFound("Session not found: %s", id) },
	}
	ownedTerminals = &owned[nbv1.Terminal, *nbv1.Terminal, nbv1.TerminalList, *nbv1.TerminalList]{
		noun:  "terminal",
		items: func(l *nbv1.TerminalList) []nbv1.Terminal { return l.Items },
		owner: func(t *nbv1.Terminal) nbv1.Owner { return t.Spec.Owner },
		// Jupyter lists terminals in the order they were made.
		oldestFirst: true,
		missing:     func(name string) error { return domainerr.NotFound("Terminal not found: %s", name) },
	}
	ownedClusters = &owned[nbv1.Cluster, *nbv1.Cluster, nbv1.ClusterList, *nbv1.ClusterList]{
		noun:    "cluster",
		items:   func(l *nbv1.ClusterList) []nbv1.Cluster { return l.Items },
		owner:   func(c *nbv1.Cluster) nbv1.Owner { return c.Spec.Owner },
		missing: func(id string) error { return domainerr.NotFound("profile not found: %s", id) },
	}
)

// validName tells whether id can name a resource at all; asking the API server for one that
// cannot would answer 400 or, with a "/", address another URL.
func validName(id string) bool {
	return len(validation.IsDNS1123Subdomain(id)) == 0
}

// newUUID is a random UUID (version 4), the shape of Jupyter's kernel and session ids.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// waitGone waits (briefly) until the reader no longer shows a deleted object, so that a
// client listing right after a DELETE does not see it again from a lagging cache.
func waitGone(ctx context.Context, r client.Reader, obj client.Object) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := client.ObjectKeyFromObject(obj)
	for {
		err := r.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if err == nil && obj.GetDeletionTimestamp() != nil {
			// Going: lists leave it out already.
			return
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// waitFresh waits (briefly) until the reader shows an object at least as new as the one just
// written, so that a read right after a write sees it: one just created too, which the reader
// may not show at all yet.
func waitFresh(ctx context.Context, r client.Reader, written client.Object) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	want, err := strconv.ParseUint(written.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	obj := written.DeepCopyObject().(client.Object)
	for {
		err := r.Get(ctx, client.ObjectKeyFromObject(written), obj)
		if err != nil && !apierrors.IsNotFound(err) {
			return
		}
		if got, perr := strconv.ParseUint(obj.GetResourceVersion(), 10, 64); err == nil && (perr != nil || got >= want) {
			return
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}
