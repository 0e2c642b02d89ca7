package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/repository"
)

// The IPython notebook's kernel service: kernels started for a notebook id, actions by
// POST, and one WebSocket per channel. They are the same Kernel resources as /api/kernels.

// legacyKernel is what POST /kernels and restart answered in IPython: where the channels are.
type legacyKernel struct {
	WSURL    string `json:"ws_url"`
	KernelID string `json:"kernel_id"`
}

func wsURL(c *gin.Context) string {
	scheme := "ws://"
	if c.Request.TLS != nil {
		scheme = "wss://"
	}
	return scheme + c.Request.Host
}

// listLegacyKernels is GET /kernels: the ids of the user's kernels.
func (s *Server) listLegacyKernels(c *gin.Context) {
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	list, err := ks.ListKernels(c.Request.Context(), *userOf(c))
	if err != nil {
		s.abortErr(c, err)
		return
	}
	ids := make([]string, 0, len(list))
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	c.JSON(http.StatusOK, ids)
}

// startLegacyKernel is POST /kernels?notebook=<id>: the notebook's kernel, started if it
// has none (IPython kept one kernel per notebook), as a session of the notebook so that
// both interfaces agree on it.
func (s *Server) startLegacyKernel(c *gin.Context) {
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	ctx := c.Request.Context()
	id := c.Query("notebook")
	var kernelID string
	if id != "" && s.opts.Sessions != nil {
		nbPath, err := s.opts.Contents.NotebookPath(ctx, id)
		if err != nil {
			s.abortErr(c, err)
			return
		}
		spec, err := s.resolveKernelSpec(ctx, "")
		if err != nil {
			s.abortErr(c, err)
			return
		}
		m, _, err := s.opts.Sessions.CreateSession(ctx, *userOf(c), repository.SessionChange{Path: &nbPath, KernelSpec: &spec})
		if err != nil {
			s.abortErr(c, err)
			return
		}
		kernelID = m.Kernel.ID
	} else {
		spec, err := s.resolveKernelSpec(ctx, "")
		if err != nil {
			s.abortErr(c, err)
			return
		}
		k, err := ks.StartKernel(ctx, *userOf(c), spec, "")
		if err != nil {
			s.abortErr(c, err)
			return
		}
		kernelID = k.ID
	}
	c.Header("Location", s.opts.BaseURL+"kernels/"+kernelID)
	c.JSON(http.StatusOK, legacyKernel{WSURL: wsURL(c), KernelID: kernelID})
}

// getLegacyKernel is GET /kernels/<id>.
func (s *Server) getLegacyKernel(c *gin.Context) {
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	k, err := ks.GetKernel(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"kernel_id": k.ID, "ws_url": wsURL(c), "name": k.Name,
		"execution_state": k.ExecutionState, "last_activity": k.LastActivity, "connections": k.Connections})
}

// deleteLegacyKernel is DELETE /kernels/<id>.
func (s *Server) deleteLegacyKernel(c *gin.Context) {
	s.deleteKernel(c)
}

// legacyKernelAction is /kernels/<id>/<action>: interrupt, restart and kill by POST, as
// IPython did. The older listing's links used GET; a GET changes a kernel only when a token
// proves the request, never on a cookie alone, or any page could restart kernels with an
// image tag. The channels (shell, iopub, stdin) are WebSockets.
func (s *Server) legacyKernelAction(c *gin.Context) {
	action := c.Param("action")
	switch action {
	case "shell", "iopub", "stdin":
		if c.Request.Method != http.MethodGet {
			abortJSON(c, http.StatusMethodNotAllowed, "Method Not Allowed", nil)
			return
		}
		s.proxyChannels(c, action)
		return
	case "interrupt", "restart", "kill":
	default:
		abortJSON(c, http.StatusNotFound, "Not Found", nil)
		return
	}
	if c.Request.Method == http.MethodGet && !c.GetBool(tokenAuthKey) {
		abortJSON(c, http.StatusForbidden, "kernel actions by GET need the token; use POST", nil)
		return
	}
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	ctx, u, id := c.Request.Context(), *userOf(c), c.Param("id")
	switch action {
	case "interrupt":
		err = ks.InterruptKernel(ctx, u, id)
	case "restart":
		if _, err = ks.RestartKernel(ctx, u, id); err == nil {
			c.Header("Location", s.opts.BaseURL+"kernels/"+id)
			c.JSON(http.StatusOK, legacyKernel{WSURL: wsURL(c), KernelID: id})
			return
		}
	case "kill":
		err = ks.DeleteKernel(ctx, u, id)
	}
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
