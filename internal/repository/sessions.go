package repository

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// Sessions reads and writes the Session resources of one namespace. The Session controller
// starts (or adopts) each session's kernel; these calls wait for it.
type Sessions struct {
	// Reader reads Sessions and Kernels, usually the manager's cached client.
	Reader client.Reader
	// Writer creates, updates and deletes Sessions.
	Writer    client.Client
	Namespace string
	// Kernels waits for and shuts down the sessions' kernels.
	Kernels *Kernels
}

// SessionChange is what a POST or PATCH asks for; nil fields stay as they are.
type SessionChange struct {
	Path, Name, Type *string
	// KernelID uses a running kernel; KernelSpec starts a new kernel of the spec of that
	// name (see KernelSpecs.resolveStart). When a POST names a kernel that does not exist,
	// a kernel of KernelSpec starts, as Jupyter does; a PATCH is refused.
	KernelSpec, KernelID *string
	// Cluster attaches the kernel the session starts to that cluster ("" to none); a change
	// starts a new kernel.
	Cluster *string
	// Parameters are the launch parameters of a kernel the session starts.
	Parameters map[string]any
}

func (r *Sessions) list(ctx context.Context, u identity.User) ([]*nbv1.Session, error) {
	return ownedSessions.list(ctx, r.Reader, r.Namespace, u)
}

func (r *Sessions) get(ctx context.Context, u identity.User, id string) (*nbv1.Session, error) {
	return ownedSessions.get(ctx, r.Reader, r.Namespace, u, id)
}

// ListSessions lists the user's sessions. A session whose kernel is gone is left out, as
// Jupyter drops it (the controller deletes it).
func (r *Sessions) ListSessions(ctx context.Context, u identity.User) ([]jupyter.Session, error) {
	list, err := r.list(ctx, u)
	if err != nil {
		return nil, err
	}
	kernels := make([]*nbv1.Kernel, len(list))
	for i, s := range list {
		if kernels[i], err = r.kernelOf(ctx, s); err != nil {
			return nil, err
		}
	}
	names := r.Kernels.Specs.kernelNames(ctx)
	out := make([]jupyter.Session, 0, len(list))
	for i, kn := range r.Kernels.asRecorded(ctx, kernels) {
		if kn != nil {
			out = append(out, sessionModel(list[i], kn, names.of(kn.Spec.KernelSpec)))
		}
	}
	return out, nil
}

// kernelOf is the session's kernel from the cache, nil when it does not exist.
func (r *Sessions) kernelOf(ctx context.Context, s *nbv1.Session) (*nbv1.Kernel, error) {
	kn := &nbv1.Kernel{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: sessionKernel(s)}, kn)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get session kernel: %w", err)
	}
	return kn, nil
}

// model is the session's Jupyter model (its kernel's as ListSessions has it); ok is false
// when its kernel does not exist.
func (r *Sessions) model(ctx context.Context, s *nbv1.Session) (jupyter.Session, bool, error) {
	kn, err := r.kernelOf(ctx, s)
	if err != nil || kn == nil {
		return sessionModel(s, nil, ""), false, err
	}
	kn = r.Kernels.asRecorded(ctx, []*nbv1.Kernel{kn})[0]
	return sessionModel(s, kn, r.Kernels.Specs.kernelNames(ctx).of(kn.Spec.KernelSpec)), true, nil
}

// sessionModel is Jupyter's model of a Session and its kernel (nil while it has none), whose
// spec's Jupyter name is specName.
func sessionModel(s *nbv1.Session, kn *nbv1.Kernel, specName string) jupyter.Session {
	m := jupyter.Session{ID: s.Name, Path: s.Spec.Path, Name: s.Spec.Name, Type: s.Spec.Type,
		Notebook: jupyter.SessionNotebook{Path: s.Spec.Path, Name: s.Spec.Name}, Cluster: s.Spec.Kernel.Cluster,
		Owner: string(s.Spec.Owner)}
	if kn != nil {
		km := kernelModel(kn, specName)
		m.Kernel = &km
	}
	return m
}

// kernelSpecOf is the kernel spec of the session's kernel.
func (r *Sessions) kernelSpecOf(ctx context.Context, s *nbv1.Session) (string, error) {
	if s.Spec.Kernel.KernelSpec != "" {
		return s.Spec.Kernel.KernelSpec, nil
	}
	kn := &nbv1.Kernel{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: sessionKernel(s)}, kn); err != nil {
		return "", fmt.Errorf("get session kernel: %w", err)
	}
	return kn.Spec.KernelSpec, nil
}

func sessionKernel(s *nbv1.Session) string {
	if s.Spec.Kernel.Name != "" {
		return s.Spec.Kernel.Name
	}
	return s.Name
}

// NotebookOf is the notebook of the user's session on the kernel of that id, relative to the
// kernel's home (as session paths are): the outputs of cells its clients run are written
// there when they are away. "" when no session of a notebook uses the kernel, or sessions of
// several notebooks share it (which of them a cell belongs to, only the client knows).
func (r *Sessions) NotebookOf(ctx context.Context, u identity.User, kernelID string) string {
	list, err := r.list(ctx, u)
	if err != nil {
		return ""
	}
	found := ""
	for _, s := range list {
		if sessionKernel(s) != kernelID || s.DeletionTimestamp != nil || !strings.HasSuffix(s.Spec.Path, ".ipynb") {
			continue
		}
		if found != "" && found != s.Spec.Path {
			return ""
		}
		found = s.Spec.Path
	}
	return found
}

// GetSession is the user's session.
func (r *Sessions) GetSession(ctx context.Context, u identity.User, id string) (jupyter.Session, error) {
	s, err := r.get(ctx, u, id)
	if err != nil {
		return jupyter.Session{}, err
	}
	m, ok, err := r.model(ctx, s)
	if err == nil && !ok {
		return m, ownedSessions.missing(id)
	}
	return m, err
}

// CreateSession starts a session (and its kernel) for a path, or returns the user's
// existing session for that path, as Jupyter does; created tells which.
func (r *Sessions) CreateSession(ctx context.Context, u identity.User, ch SessionChange) (jupyter.Session, bool, error) {
	if ch.Path == nil || *ch.Path == "" {
		return jupyter.Session{}, false, domainerr.Invalid("Missing field in JSON data: path")
	}
	p, err := sessionPath(*ch.Path)
	if err != nil {
		return jupyter.Session{}, false, err
	}
	list, err := r.list(ctx, u)
	if err != nil {
		return jupyter.Session{}, false, err
	}
	for _, s := range list {
		if s.Spec.Path == p && string(s.Spec.Owner) == u.Name {
			if m, ok, err := r.model(ctx, s); err != nil || ok {
				return m, false, err
			}
		}
	}
	s := &nbv1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: newUUID(), Namespace: r.Namespace,
			Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue}},
		Spec: nbv1.SessionParameters{Owner: nbv1.Owner(u.Name), Path: p, Name: path.Base(p), Type: "notebook"},
	}
	if ch.Name != nil {
		s.Spec.Name = *ch.Name
	}
	if ch.Type != nil {
		s.Spec.Type = *ch.Type
	}
	claimed, err := r.setKernel(ctx, u, s, ch)
	if err != nil {
		return jupyter.Session{}, false, err
	}
	if err := r.Kernels.bounded(ctx, "create the session", s, func(ctx context.Context) error { return r.Writer.Create(ctx, s) }); err != nil {
		// A warm kernel claimed for the session is nobody's without it.
		if claimed != "" {
			r.Kernels.deleteQuietly(ctx, claimed)
		}
		if errors.Is(err, domainerr.ErrUnavailable) {
			go r.Kernels.release(ctx, string(s.Spec.Owner), sessionKernel(s))
			return jupyter.Session{}, false, err
		}
		r.Kernels.release(ctx, string(s.Spec.Owner), sessionKernel(s))
		if apierrors.IsInvalid(err) {
			return jupyter.Session{}, false, domainerr.Invalid("%s", err.Error())
		}
		return jupyter.Session{}, false, fmt.Errorf("create session: %w", err)
	}
	m, err := r.waitKernel(ctx, s)
	if err != nil {
		_ = r.Writer.Delete(context.WithoutCancel(ctx), s, client.PropagationPolicy(metav1.DeletePropagationBackground))
		r.Kernels.release(ctx, string(s.Spec.Owner), sessionKernel(s))
		return jupyter.Session{}, false, err
	}
	return m, true, nil
}

// setKernel points the session at a running kernel of the user's, or at a new kernel of a
// spec: a warm kernel it claimed, whose name it returns, or one the session's controller
// makes. When a new session names a kernel that does not exist, Jupyter's SessionManager
// starts one of the kernel name the request gives (else of the default); its PATCH answers
// 400.
func (r *Sessions) setKernel(ctx context.Context, u identity.User, s *nbv1.Session, ch SessionChange) (string, error) {
	create := s.CreationTimestamp.IsZero()
	if ch.KernelID != nil && *ch.KernelID != "" {
		_, err := r.Kernels.get(ctx, u, *ch.KernelID)
		switch {
		case err == nil:
			s.Spec.Kernel = nbv1.SessionKernel{Name: *ch.KernelID}
			return "", nil
		case !errors.Is(err, domainerr.ErrNotFound):
			return "", err
		case !create:
			return "", domainerr.Invalid("No such kernel: %s", *ch.KernelID)
		case ch.KernelSpec == nil:
			return "", err
		}
	}
	if ch.KernelSpec == nil {
		if create {
			return "", domainerr.Invalid("Missing field in JSON data: kernel")
		}
		return "", nil
	}
	var spec *nbv1.KernelSpec
	if err := r.Kernels.bounded(ctx, "answer for the kernel specs", nil, func(ctx context.Context) (err error) {
		spec, err = r.Kernels.Specs.resolveStart(ctx, *ch.KernelSpec)
		return err
	}); err != nil {
		return "", err
	}
	return r.newKernel(ctx, u, s, spec, ch)
}

// newKernel has the session start a new kernel of the KernelSpec named spec, with the launch
// parameters ch asks for, attached to ch's cluster when it names one (else to the session's
// cluster). A new session's kernel takes the session's id (the controller's default); a
// changed one a new id, so that the old kernel is let go.
func (r *Sessions) newKernel(ctx context.Context, u identity.User, s *nbv1.Session, spec *nbv1.KernelSpec, ch SessionChange) (string, error) {
	create, name := s.CreationTimestamp.IsZero(), ""
	if !create {
		name = newUUID()
	}
	c := s.Spec.Kernel.Cluster
	if ch.Cluster != nil {
		c = *ch.Cluster
	}
	values, spec, err := withParameters(spec, KernelStart{Parameters: ch.Parameters})
	if err != nil {
		return "", err
	}
	if c != "" {
		if err := checkCluster(ctx, r.Reader, r.Namespace, u, c); err != nil {
			return "", err
		}
	}
	home, err := r.Kernels.homeOf(u, string(s.Spec.Owner))
	if err != nil {
		return "", err
	}
	// A new session's kernel may be a warm one (a changed kernel is not: the session's
	// controller lets the old one go as the new one comes). A warm kernel is attached to no
	// cluster.
	if create && c == "" {
		warm, err := r.Kernels.claimWarm(ctx, u, warmStart{owner: string(s.Spec.Owner), home: home,
			path: builder.NotebookDir(s.Spec.Path), spec: spec, plain: len(values) == 0, session: s.Name})
		if err != nil {
			return "", err
		}
		if warm != nil {
			s.Spec.Kernel = nbv1.SessionKernel{Name: warm.Name}
			return warm.Name, nil
		}
	}
	// The session's controller creates the kernel; its room is reserved now, so that a start
	// past a limit is refused before anything is made.
	if err := r.Kernels.bounded(ctx, "record the kernel in its owner's usage", nil, func(ctx context.Context) error {
		return r.Kernels.reserve(ctx, u, string(s.Spec.Owner), cmp.Or(name, s.Name), spec)
	}); err != nil {
		return "", err
	}
	s.Spec.Kernel = nbv1.SessionKernel{Name: name, KernelSpec: spec.Name, Cluster: c, Home: home, Parameters: values}
	return "", nil
}

func (r *Sessions) waitKernel(ctx context.Context, s *nbv1.Session) (jupyter.Session, error) {
	kn, err := r.Kernels.WaitReady(ctx, sessionKernel(s))
	if err != nil {
		return jupyter.Session{}, err
	}
	return sessionModel(s, kn, r.Kernels.Specs.kernelNames(ctx).of(kn.Spec.KernelSpec)), nil
}

// sessionPath is a session's path as the API gives it, relative to the contents root; one
// that leaves the root is invalid at once, since the kernel it would need could never be made.
func sessionPath(p string) (string, error) {
	rel := strings.TrimPrefix(p, "/")
	if rel == "" || !validPath(rel) {
		return "", domainerr.Invalid("Invalid session path: %s", p)
	}
	return rel, nil
}

// UpdateSession changes a session's path, name, type or kernel (a new kernel spec starts a
// new kernel). A changed kernel answers once the new kernel does and the previous one is shut
// down (see letGo), as Jupyter does.
func (r *Sessions) UpdateSession(ctx context.Context, u identity.User, id string, ch SessionChange) (jupyter.Session, error) {
	var s *nbv1.Session
	var before *nbv1.Kernel
	kernelChanged := false
	oldPath := ""
	// The session controller writes the same object (its status, the kernel's UID): a
	// conflict means read again and apply the change to what is there.
	err := retryOnConflict(func() error {
		cur, err := r.get(ctx, u, id)
		if err != nil {
			return err
		}
		s = cur.DeepCopy()
		oldPath = cur.Spec.Path
		if ch.Path != nil {
			p, err := sessionPath(*ch.Path)
			if err != nil {
				return err
			}
			s.Spec.Path = p
		}
		if ch.Name != nil {
			s.Spec.Name = *ch.Name
		}
		if ch.Type != nil {
			s.Spec.Type = *ch.Type
		}
		kernelChanged = ch.KernelID != nil && *ch.KernelID != "" && *ch.KernelID != sessionKernel(s)
		if ch.KernelSpec != nil && (ch.KernelID == nil || *ch.KernelID == "") {
			// Jupyter starts a new kernel whenever a PATCH names a kernel spec.
			kernelChanged = true
		}
		switch {
		case kernelChanged:
			if _, err := r.setKernel(ctx, u, s, ch); err != nil {
				return err
			}
		case ch.Cluster != nil && *ch.Cluster != s.Spec.Kernel.Cluster:
			// A kernel's cluster is fixed when it starts: another one needs a new kernel
			// of the same spec.
			name, err := r.kernelSpecOf(ctx, s)
			if err != nil {
				return err
			}
			spec := &nbv1.KernelSpec{}
			if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, spec); err != nil {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("get kernel spec: %w", err)
				}
				// Gone since: the new kernel fails with the reason, as a start of it would.
				spec.Name = name
			}
			if _, err := r.newKernel(ctx, u, s, spec, ch); err != nil {
				return err
			}
			kernelChanged = true
		}
		if kernelChanged {
			// Read now: the controller may delete it as soon as the change is made.
			if before, err = r.kernelOf(ctx, cur); err != nil {
				return err
			}
		}
		return r.Kernels.bounded(ctx, "change the session", nil, func(ctx context.Context) error { return r.Writer.Update(ctx, s) })
	})
	if apierrors.IsInvalid(err) {
		return jupyter.Session{}, domainerr.Invalid("%s", err.Error())
	}
	if err != nil {
		if errors.Is(err, domainerr.ErrNotFound) || errors.Is(err, domainerr.ErrInvalid) || errors.Is(err, domainerr.ErrUnavailable) {
			return jupyter.Session{}, err
		}
		return jupyter.Session{}, fmt.Errorf("update session: %w", err)
	}
	waitFresh(ctx, r.Reader, s)
	if !kernelChanged {
		if s.Spec.Path != oldPath {
			r.notebookMoved(ctx, s, oldPath)
		}
		m, _, err := r.model(ctx, s)
		return m, err
	}
	m, err := r.waitKernel(ctx, s)
	if err != nil {
		return m, err
	}
	if before != nil && before.Name != sessionKernel(s) {
		r.letGo(ctx, s, before)
	}
	return m, nil
}

// notebookMoved tells the session's kernel's agent that its notebook is now at the session's
// path (a client renamed it): the outputs of cells run before the rename, and after it on
// connections opened before it, are written there. Best effort: a kernel that cannot be told
// writes into the old path, where no notebook is any more, so writes nothing.
func (r *Sessions) notebookMoved(ctx context.Context, s *nbv1.Session, from string) {
	if r.Kernels == nil || r.Kernels.Agents == nil || !strings.HasSuffix(from, ".ipynb") || !strings.HasSuffix(s.Spec.Path, ".ipynb") {
		return
	}
	kn, err := r.kernelOf(ctx, s)
	if err != nil || kn == nil {
		return
	}
	ep, err := r.Kernels.endpoint(ctx, kn)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Kernels.Agents.MoveNotebook(ctx, ep, from, s.Spec.Path); err != nil {
		log.FromContext(ctx).Info("The kernel's agent could not be told that its notebook was renamed", "kernel", kn.Name, "error", err.Error())
	}
}

// DeleteSession deletes the session and shuts its kernel down, as Jupyter does; a kernel it
// only shares with other sessions is left to them.
func (r *Sessions) DeleteSession(ctx context.Context, u identity.User, id string) error {
	s, err := r.get(ctx, u, id)
	if err != nil {
		return err
	}
	kn := &nbv1.Kernel{}
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: sessionKernel(s)}, kn)
	own := err == nil && metav1.IsControlledBy(kn, s)
	// The session goes first: while it exists, its controller would start the kernel again.
	err = r.Kernels.bounded(ctx, "delete the session", nil, func(ctx context.Context) error {
		return client.IgnoreNotFound(r.Writer.Delete(ctx, s, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	if err != nil {
		return failure(err, "delete session")
	}
	if own {
		// Garbage collection would stop the kernel too, but not before this answer: Jupyter
		// has shut it down when DELETE returns.
		if err := r.Kernels.DeleteKernel(ctx, u, kn.Name); err != nil && !errors.Is(err, domainerr.ErrNotFound) {
			return err
		}
	}
	waitGone(ctx, r.Reader, s)
	return nil
}
