package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// KernelService runs the users' kernels (Kernel resources and their agents).
type KernelService interface {
	KernelCounter
	ListKernels(ctx context.Context, u User) ([]jupyter.Kernel, error)
	GetKernel(ctx context.Context, u User, id string) (jupyter.Kernel, error)
	// StartKernel starts a kernel of a spec and returns once it answers.
	StartKernel(ctx context.Context, u User, spec, path string) (jupyter.Kernel, error)
	DeleteKernel(ctx context.Context, u User, id string) error
	InterruptKernel(ctx context.Context, u User, id string) error
	RestartKernel(ctx context.Context, u User, id string) (jupyter.Kernel, error)
	// Endpoint is where the kernel's agent serves its channels.
	Endpoint(ctx context.Context, u User, id string) (agentclient.Endpoint, error)
}

// SessionService keeps the users' sessions (Session resources).
type SessionService interface {
	ListSessions(ctx context.Context, u User) ([]jupyter.Session, error)
	GetSession(ctx context.Context, u User, id string) (jupyter.Session, error)
	// CreateSession returns the user's session for the path if there is one (created false).
	CreateSession(ctx context.Context, u User, ch repository.SessionChange) (jupyter.Session, bool, error)
	UpdateSession(ctx context.Context, u User, id string, ch repository.SessionChange) (jupyter.Session, error)
	DeleteSession(ctx context.Context, u User, id string) error
}

// errNoKernels answers kernel routes on a server configured without kernels.
var errNoKernels = &apiError{status: http.StatusNotFound, message: "this server runs no kernels"}

func (s *Server) kernels() (KernelService, error) {
	if s.opts.Kernels == nil {
		return nil, errNoKernels
	}
	return s.opts.Kernels, nil
}

// listKernels is GET /api/kernels.
func (s *Server) listKernels(c *gin.Context) {
	ks, err := s.kernels()
	if err == nil {
		var list []jupyter.Kernel
		if list, err = ks.ListKernels(c.Request.Context(), *userOf(c)); err == nil {
			c.JSON(http.StatusOK, list)
			return
		}
	}
	s.abortErr(c, err)
}

// startKernel is POST /api/kernels: {"name": spec, "path": dir}, both optional. It answers
// 201 once the kernel answers kernel_info.
func (s *Server) startKernel(c *gin.Context) {
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	var body jupyter.StartKernel
	if err := bindOptionalJSON(c, &body); err != nil {
		s.abortErr(c, err)
		return
	}
	spec, err := s.resolveKernelSpec(c.Request.Context(), body.Name)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	k, err := ks.StartKernel(c.Request.Context(), *userOf(c), spec, body.Path)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.Header("Location", s.opts.BaseURL+"api/kernels/"+k.ID)
	c.JSON(http.StatusCreated, k)
}

// resolveKernelSpec is the spec a start asks for: the default when unnamed; an unknown one
// is Jupyter's 404 "No such kernel".
func (s *Server) resolveKernelSpec(ctx context.Context, name string) (string, error) {
	if s.opts.KernelSpecs == nil {
		return "", &apiError{status: http.StatusNotFound, message: "No such kernel named " + name}
	}
	if name == "" {
		specs, err := s.opts.KernelSpecs.ListKernelSpecs(ctx)
		if err != nil {
			return "", err
		}
		if name = s.defaultKernelSpec(specs); name == "" {
			return "", &apiError{status: http.StatusNotFound, message: "No kernel specs are installed"}
		}
	}
	ks, err := s.opts.KernelSpecs.GetKernelSpec(ctx, name)
	if errors.Is(err, repository.ErrNotFound) {
		return "", &apiError{status: http.StatusNotFound, message: "No such kernel named " + name}
	}
	if err != nil {
		return "", err
	}
	return ks.Name, nil
}

// getKernel is GET /api/kernels/<id>.
func (s *Server) getKernel(c *gin.Context) {
	ks, err := s.kernels()
	if err == nil {
		var k jupyter.Kernel
		if k, err = ks.GetKernel(c.Request.Context(), *userOf(c), c.Param("id")); err == nil {
			c.JSON(http.StatusOK, k)
			return
		}
	}
	s.abortErr(c, err)
}

// deleteKernel is DELETE /api/kernels/<id>: 204 once the kernel process has exited.
func (s *Server) deleteKernel(c *gin.Context) {
	ks, err := s.kernels()
	if err == nil {
		if err = ks.DeleteKernel(c.Request.Context(), *userOf(c), c.Param("id")); err == nil {
			c.Status(http.StatusNoContent)
			return
		}
	}
	s.abortErr(c, err)
}

// kernelAction is POST /api/kernels/<id>/interrupt and /restart.
func (s *Server) kernelAction(c *gin.Context) {
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	u, id := *userOf(c), c.Param("id")
	switch c.Param("action") {
	case "interrupt":
		if err := ks.InterruptKernel(c.Request.Context(), u, id); err != nil {
			s.abortErr(c, err)
			return
		}
		c.Status(http.StatusNoContent)
	case "restart":
		k, err := ks.RestartKernel(c.Request.Context(), u, id)
		if err != nil {
			s.abortErr(c, err)
			return
		}
		c.JSON(http.StatusOK, k)
	default:
		abortJSON(c, http.StatusNotFound, "Not Found", nil)
	}
}

// bindOptionalJSON reads a JSON body that may be empty.
func bindOptionalJSON(c *gin.Context, v any) error {
	data, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(data)) == "" {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return badRequest("Invalid JSON in body of request: %v", err)
	}
	return nil
}

// listSessions is GET /api/sessions.
func (s *Server) listSessions(c *gin.Context) {
	if s.opts.Sessions == nil {
		c.JSON(http.StatusOK, []jupyter.Session{})
		return
	}
	list, err := s.opts.Sessions.ListSessions(c.Request.Context(), *userOf(c))
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.JSON(http.StatusOK, list)
}

// sessionChange reads a session request body into a change.
func (s *Server) sessionChange(c *gin.Context, create bool) (repository.SessionChange, error) {
	var req jupyter.SessionRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		return repository.SessionChange{}, err
	}
	ch := repository.SessionChange{Path: req.Path, Name: req.Name, Type: req.Type, Cluster: req.Cluster}
	if ch.Path == nil && req.Notebook != nil {
		ch.Path = req.Notebook.Path
		if ch.Name == nil {
			ch.Name = req.Notebook.Name
		}
	}
	if req.Kernel != nil {
		ch.KernelID = req.Kernel.ID
		if req.Kernel.Name != nil && (req.Kernel.ID == nil || *req.Kernel.ID == "") {
			spec, err := s.resolveKernelSpec(c.Request.Context(), *req.Kernel.Name)
			if err != nil {
				return ch, err
			}
			ch.KernelSpec = &spec
		}
	} else if create {
		spec, err := s.resolveKernelSpec(c.Request.Context(), "")
		if err != nil {
			return ch, err
		}
		ch.KernelSpec = &spec
	}
	return ch, nil
}

// createSession is POST /api/sessions: 201 with the session, the existing one for the path
// if there is one.
func (s *Server) createSession(c *gin.Context) {
	if s.opts.Sessions == nil {
		s.abortErr(c, errNoKernels)
		return
	}
	ch, err := s.sessionChange(c, true)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	m, _, err := s.opts.Sessions.CreateSession(c.Request.Context(), *userOf(c), ch)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.Header("Location", s.opts.BaseURL+"api/sessions/"+m.ID)
	c.JSON(http.StatusCreated, m)
}

// session is GET, PATCH and DELETE /api/sessions/<id>.
func (s *Server) session(c *gin.Context) {
	if s.opts.Sessions == nil {
		s.abortErr(c, errNoKernels)
		return
	}
	u, id := *userOf(c), c.Param("id")
	ctx := c.Request.Context()
	switch c.Request.Method {
	case http.MethodGet:
		m, err := s.opts.Sessions.GetSession(ctx, u, id)
		if err != nil {
			s.abortErr(c, err)
			return
		}
		c.JSON(http.StatusOK, m)
	case http.MethodPatch:
		ch, err := s.sessionChange(c, false)
		if err != nil {
			s.abortErr(c, err)
			return
		}
		m, err := s.opts.Sessions.UpdateSession(ctx, u, id, ch)
		if err != nil {
			s.abortErr(c, err)
			return
		}
		c.JSON(http.StatusOK, m)
	case http.MethodDelete:
		if err := s.opts.Sessions.DeleteSession(ctx, u, id); err != nil {
			s.abortErr(c, err)
			return
		}
		c.Status(http.StatusNoContent)
	}
}
