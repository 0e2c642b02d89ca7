package apiserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/repository"
)

// RSTRenderer renders reStructuredText to HTML for the older interface's /rstservice/render.
// docutils runs in renderer pods where kernels run, never in the API server (see
// internal/builder): a large parser fed with any user's input stays away from the process
// that holds every user's token and the contents volume.
type RSTRenderer interface {
	RenderRST(ctx context.Context, src []byte) ([]byte, error)
}

// rstDeadline bounds one rendering as the API server waits for it: a renderer's own timeout
// and its wait for a free slot fit in it.
const rstDeadline = 30 * time.Second

// renderRST is IPython's POST /rstservice/render: the body is reStructuredText, the answer the
// HTML document docutils makes of it. Invalid reST is 400 with the renderer's reason.
func (s *Server) renderRST(c *gin.Context) error {
	src, err := io.ReadAll(io.LimitReader(c.Request.Body, agentapi.MaxRSTBytes+1))
	if err != nil {
		return err
	}
	if len(src) > agentapi.MaxRSTBytes {
		return domainerr.TooLarge("reST larger than %d bytes", agentapi.MaxRSTBytes)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), rstDeadline)
	defer cancel()
	html, err := s.opts.RST.RenderRST(ctx, src)
	if errors.Is(err, repository.ErrRSTUnavailable) {
		return domainerr.Unavailable("%s", err.Error())
	}
	if err != nil {
		return err
	}
	// The document is made of a user's text: opened on its own it is a page of this origin,
	// and a link in it may be a javascript: URL, so it must not run scripts.
	sandbox(c, "")
	c.Data(http.StatusOK, "text/html; charset=utf-8", html)
	return nil
}
