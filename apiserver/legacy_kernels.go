package apiserver

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// The IPython notebook's kernel service: kernels started for a notebook id, actions by
// POST, and one WebSocket per channel. They are the same Kernel resources as /api/kernels.

func (s *Server) wsURL(c *gin.Context) string {
	scheme := "ws://"
	if s.viaHTTPS(c.Request) {
		scheme = "wss://"
	}
	return scheme + c.Request.Host
}

// listLegacyKernels is GET /kernels: the ids of the user's kernels.
func (s *Server) listLegacyKernels(c *gin.Context) error {
	list, err := s.opts.Kernels.ListKernels(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(list))
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	c.JSON(http.StatusOK, ids)
	return nil
}

// startLegacyKernel is POST /kernels?notebook=<id>: the notebook's kernel, started if it
// has none (IPython kept one kernel per notebook).
func (s *Server) startLegacyKernel(c *gin.Context) error {
	id, err := s.startNotebookKernel(c.Request.Context(), *userOf(c), c.Query("notebook"))
	if err != nil {
		return err
	}
	s.renderLegacyKernel(c, id)
	return nil
}

// startNotebookKernel starts a kernel of the default spec for the notebook of notebookID, as
// a session of the notebook so that both interfaces agree on it (the session's kernel when
// it has one already); without a notebook, a kernel of its own.
func (s *Server) startNotebookKernel(ctx context.Context, u User, notebookID string) (string, error) {
	if notebookID == "" {
		spec, err := s.kernelName(ctx, u, "")
		if err != nil {
			return "", err
		}
		k, err := s.opts.Kernels.StartKernel(ctx, u, repository.KernelStart{Name: spec})
		return k.ID, err
	}
	nbPath, err := s.store(ctx).NotebookPath(ctx, notebookID)
	if err != nil {
		return "", err
	}
	spec, err := s.kernelName(ctx, u, "")
	if err != nil {
		return "", err
	}
	m, _, err := s.opts.Sessions.CreateSession(ctx, u, repository.SessionChange{Path: &nbPath, KernelSpec: &spec})
	if err != nil {
		return "", err
	}
	return m.Kernel.ID, nil
}

// renderLegacyKernel answers where the kernel's channels are, as IPython did.
func (s *Server) renderLegacyKernel(c *gin.Context, id string) {
	c.Header("Location", s.opts.BaseURL+"kernels/"+id)
	c.JSON(http.StatusOK, jupyter.LegacyKernel{WSURL: s.wsURL(c), KernelID: id})
}

// getLegacyKernel is GET /kernels/<id>.
func (s *Server) getLegacyKernel(c *gin.Context) error {
	k, err := s.opts.Kernels.GetKernel(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, jupyter.LegacyKernelModel{
		LegacyKernel: jupyter.LegacyKernel{WSURL: s.wsURL(c), KernelID: k.ID},
		Name:         k.Name, ExecutionState: k.ExecutionState, LastActivity: k.LastActivity, Connections: k.Connections,
	})
	return nil
}

// legacyKernelAction is /kernels/<id>/<action>: interrupt, restart and kill by POST, as
// IPython did. The older listing's links used GET; a GET changes a kernel only when a token
// proves the request, never on a cookie alone, or any page could restart kernels with an
// image tag. The channels (shell, iopub, stdin) are WebSockets.
func (s *Server) legacyKernelAction(c *gin.Context) error {
	action := c.Param("action")
	switch action {
	case "shell", "iopub", "stdin":
		if c.Request.Method != http.MethodGet {
			return errMethodNotAllowed
		}
		return s.proxyChannels(c, action)
	case "interrupt", "restart", "kill":
	default:
		return errNotFound
	}
	if c.Request.Method == http.MethodGet && !c.GetBool(tokenAuthKey) {
		return domainerr.Forbidden("kernel actions by GET need the token; use POST")
	}
	ctx, u, id := c.Request.Context(), *userOf(c), c.Param("id")
	var err error
	switch action {
	case "interrupt":
		err = s.opts.Kernels.InterruptKernel(ctx, u, id)
	case "restart":
		if _, err := s.opts.Kernels.RestartKernel(ctx, u, id); err != nil {
			return err
		}
		s.renderLegacyKernel(c, id)
		return nil
	case "kill":
		err = s.opts.Kernels.DeleteKernel(ctx, u, id)
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
