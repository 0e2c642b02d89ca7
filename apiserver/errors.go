package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/nbconvert"
)

// Tornado's answers for a path or method that nothing serves.
var (
	errNotFound         = domainerr.NotFound("Not Found")
	errMethodNotAllowed = domainerr.New(domainerr.ErrMethodNotAllowed, "Method Not Allowed")
)

// domainErrors are the kinds of refusal (of the handlers, the contents store and the
// repositories), with the status each is answered with.
var domainErrors = []struct {
	kind   error
	status int
}{
	{domainerr.ErrNotFound, http.StatusNotFound},
	{domainerr.ErrConflict, http.StatusConflict},
	{domainerr.ErrInvalid, http.StatusBadRequest},
	{domainerr.ErrForbidden, http.StatusForbidden},
	{domainerr.ErrTooLarge, http.StatusRequestEntityTooLarge},
	// Jupyter answers a full disk with 500 "Unexpected error while saving file"; 507 tells
	// the client that the server, not its request, is at fault, and that a retry may work.
	{domainerr.ErrNoSpace, http.StatusInsufficientStorage},
	// As Jupyter answers a kernel that fails to start; the reason says why.
	{domainerr.ErrStartFailed, http.StatusInternalServerError},
	// The control plane did not answer: the request was fine and may be sent again
	// (retryAfter), which a 500 would not say.
	{domainerr.ErrUnavailable, http.StatusServiceUnavailable},
	{domainerr.ErrMethodNotAllowed, http.StatusMethodNotAllowed},
	{domainerr.ErrTimeout, http.StatusRequestTimeout},
}

// retryAfter is the Retry-After of an answer for domainerr.ErrUnavailable, in seconds: a
// control plane that restarts is back within seconds.
const retryAfter = "5"

// answerTo decides how the API answers err: the status and Jupyter's error body. It is the one
// place where the errors of the handlers, the contents store, the repositories and the kernel
// agents become HTTP. An error of none of theirs is a failure of the server: failed is true,
// and the body says no more than "Unhandled error", since the error may name server paths.
func answerTo(err error) (status int, body jupyter.Error, failed bool) {
	var (
		tooLarge *http.MaxBytesError
		agent    *agentclient.Error
	)
	switch {
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, jupyter.Error{Message: fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit)}, false
	case errors.As(err, &agent):
		status := agent.Status
		if status < 400 || status == http.StatusForbidden {
			// The agent refusing the API server's token is a server fault, not the user's.
			status = http.StatusBadGateway
		}
		return status, jupyter.Error{Message: agent.Message}, false
	case errors.Is(err, nbconvert.ErrUnreadable), errors.Is(err, nbconvert.ErrTooLarge), errors.Is(err, errExportTimeout):
		// As Jupyter answers an exporter that fails.
		return http.StatusInternalServerError, jupyter.Error{Message: "nbconvert failed: " + err.Error()}, false
	case errors.Is(err, agentclient.ErrUnreachable):
		// The dial's error names the pod's address, of no use to the client.
		return http.StatusServiceUnavailable, jupyter.Error{Message: "the kernel is not reachable"}, false
	}
	for _, d := range domainErrors {
		if errors.Is(err, d.kind) {
			return d.status, jupyter.Error{Message: err.Error(), Reason: reasonOf(err)}, false
		}
	}
	return http.StatusInternalServerError, jupyter.Error{Message: "Unhandled error"}, true
}

// reasonOf is the short reason a refusal gives; nil (null) when it gives none.
func reasonOf(err error) *string {
	var de *domainerr.Error
	if !errors.As(err, &de) || de.Reason == "" {
		return nil
	}
	return &de.Reason
}

// abortErr answers with the Jupyter error body for err. Failures of the server are logged;
// other errors the server answers with 5xx (a kernel that did not start, an agent that did
// not answer) at V(1), since they are the user's kernel's, not the server's.
func (s *Server) abortErr(c *gin.Context, err error) {
	status, body, failed := answerTo(err)
	switch {
	case failed:
		s.opts.Log.Error(err, "Request failed", "method", c.Request.Method, "path", c.Request.URL.Path)
	case status >= http.StatusInternalServerError:
		s.opts.Log.V(1).Info("Request refused", "method", c.Request.Method, "path", c.Request.URL.Path, "status", status, "error", err.Error())
	}
	if errors.Is(err, domainerr.ErrUnavailable) {
		c.Header("Retry-After", retryAfter)
	}
	c.AbortWithStatusJSON(status, body)
}

// handle adapts a handler that returns its error to Gin: abortErr answers the error.
func (s *Server) handle(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.abortErr(c, err)
		}
	}
}
