package apiserver

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/events"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/quota"
	"github.com/nbkube/nbkube/internal/repository"
)

// KernelService runs the users' kernels (Kernel resources and their agents).
type KernelService interface {
	KernelCounter
	ListKernels(ctx context.Context, u User) ([]jupyter.Kernel, error)
	GetKernel(ctx context.Context, u User, id string) (jupyter.Kernel, error)
	// StartKernel starts a kernel of the spec that start names and returns once it answers.
	// An unknown name is an error matching domainerr.ErrNotFound, Jupyter's "No such kernel".
	StartKernel(ctx context.Context, u User, start repository.KernelStart) (jupyter.Kernel, error)
	DeleteKernel(ctx context.Context, u User, id string) error
	InterruptKernel(ctx context.Context, u User, id string) error
	RestartKernel(ctx context.Context, u User, id string) (jupyter.Kernel, error)
	// Endpoint is where the kernel's agent serves its channels.
	Endpoint(ctx context.Context, u User, id string) (agentclient.Endpoint, error)
	// KernelOwner is the user whose kernel id is, "" when u may not see it.
	KernelOwner(ctx context.Context, u User, id string) string
}

// SessionService keeps the users' sessions (Session resources).
type SessionService interface {
	ListSessions(ctx context.Context, u User) ([]jupyter.Session, error)
	GetSession(ctx context.Context, u User, id string) (jupyter.Session, error)
	// CreateSession returns the user's session for the path if there is one (created false).
	CreateSession(ctx context.Context, u User, ch repository.SessionChange) (jupyter.Session, bool, error)
	UpdateSession(ctx context.Context, u User, id string, ch repository.SessionChange) (jupyter.Session, error)
	DeleteSession(ctx context.Context, u User, id string) error
	// NotebookOf is the notebook of the user's session on the kernel, "" when there is not
	// exactly one: the agent writes the outputs of its cells there when their client is away.
	NotebookOf(ctx context.Context, u User, kernelID string) string
}

// listKernels is GET /api/kernels.
func (s *Server) listKernels(c *gin.Context) error {
	list, err := s.opts.Kernels.ListKernels(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, list)
	return nil
}

// startKernel is POST /api/kernels: {"name": spec, "path": dir, "env": {...}}, all optional
// (env as a gateway sends it, see kernelStart). It answers 201 once the kernel answers
// kernel_info.
func (s *Server) startKernel(c *gin.Context) error {
	var body jupyter.StartKernel
	if err := readJSON(c, &body); err != nil {
		return err
	}
	spec, err := s.kernelName(c.Request.Context(), *userOf(c), body.Name)
	if err != nil {
		return err
	}
	start, err := kernelStart(*userOf(c), spec, body)
	if err != nil {
		return err
	}
	owner := cmp.Or(start.Owner, userOf(c).Name)
	k, err := s.opts.Kernels.StartKernel(c.Request.Context(), *userOf(c), start)
	s.emitKernel(owner, "start", k.ID, cmp.Or(k.Name, spec), err)
	if exceeded := (*quota.Exceeded)(nil); errors.As(err, &exceeded) {
		s.emit(owner, events.KernelStatus, map[string]any{"action": "start_refused", "kernel_id": "", "kernel_name": spec,
			"reason": exceeded.Reason(), "msg": exceeded.Error()})
	}
	if err != nil {
		return err
	}
	c.Header("Location", s.opts.BaseURL+"api/kernels/"+k.ID)
	c.JSON(http.StatusCreated, k)
	return nil
}

// kernelName is the kernel spec name a start of u asks for: name, or u's default when it
// names none. Which spec a name starts is the KernelService's to say.
func (s *Server) kernelName(ctx context.Context, u User, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	specs, err := s.userKernelSpecs(ctx, u)
	if err != nil {
		return "", err
	}
	return s.defaultKernelSpec(specs), nil
}

// getKernel is GET /api/kernels/<id>.
func (s *Server) getKernel(c *gin.Context) error {
	k, err := s.opts.Kernels.GetKernel(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, k)
	return nil
}

// deleteKernel is DELETE /api/kernels/<id> and the older DELETE /kernels/<id>: 204 once the
// kernel process has exited.
func (s *Server) deleteKernel(c *gin.Context) error {
	owner := s.kernelOwner(c.Request.Context(), *userOf(c), c.Param("id"))
	err := s.opts.Kernels.DeleteKernel(c.Request.Context(), *userOf(c), c.Param("id"))
	s.emitKernel(owner, "shutdown", c.Param("id"), "", err)
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// kernelOwner is whose kernel id is, for its events: the user's own, or, for an admin or a
// gateway acting on another user's kernel, that user's (who hears it, as admins do).
func (s *Server) kernelOwner(ctx context.Context, u User, id string) string {
	if u.Admin || u.ActAs {
		if owner := s.opts.Kernels.KernelOwner(ctx, u, id); owner != "" {
			return owner
		}
	}
	return u.Name
}

// kernelAction is POST /api/kernels/<id>/interrupt and /restart.
func (s *Server) kernelAction(c *gin.Context) error {
	ctx, u, id := c.Request.Context(), *userOf(c), c.Param("id")
	switch c.Param("action") {
	case "interrupt":
		err := s.opts.Kernels.InterruptKernel(ctx, u, id)
		s.emitKernel(s.kernelOwner(ctx, u, id), "interrupt", id, "", err)
		if err != nil {
			return err
		}
		c.Status(http.StatusNoContent)
	case "restart":
		k, err := s.opts.Kernels.RestartKernel(ctx, u, id)
		s.emitKernel(s.kernelOwner(ctx, u, id), "restart", id, k.Name, err)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, k)
	default:
		return errNotFound
	}
	return nil
}
