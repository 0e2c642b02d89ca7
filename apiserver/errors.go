package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// apiError is an error a handler answers with as is.
type apiError struct {
	status  int
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, message: fmt.Sprintf(format, args...)}
}

// statusOf maps the domain errors of the stores and repositories to HTTP, the one place
// where that happens.
func statusOf(err error) int {
	var api *apiError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &api):
		return api.status
	case errors.Is(err, repository.ErrInvalid):
		return http.StatusBadRequest
	case errors.As(err, &tooLarge), errors.Is(err, contents.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, contents.ErrNotFound), errors.Is(err, repository.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, contents.ErrExists), errors.Is(err, repository.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, contents.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, contents.ErrForbidden):
		return http.StatusForbidden
	default:
		return http.StatusInternalServerError
	}
}

// abortErr answers with the Jupyter error body for err. Unexpected errors are logged and
// answered without their details, which may name server paths.
func (s *Server) abortErr(c *gin.Context, err error) {
	status := statusOf(err)
	msg := err.Error()
	var reason *string
	var ce *contents.Error
	var se *repository.StartError
	var ae *agentclient.Error
	switch {
	case errors.As(err, &ce) && ce.Reason != "":
		reason = &ce.Reason
	case errors.As(err, &se):
		// Jupyter answers a kernel that fails to start with 500; the reason says why.
		reason = &se.Reason
		abortJSON(c, http.StatusInternalServerError, se.Message, reason)
		return
	case errors.As(err, &ae):
		status := ae.Status
		if status < 400 || status == http.StatusForbidden {
			// The agent refusing the API server's token is a server fault, not the user's.
			status = http.StatusBadGateway
		}
		abortJSON(c, status, ae.Message, nil)
		return
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		msg = fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit)
	case status == http.StatusInternalServerError:
		s.opts.Log.Error(err, "Request failed", "method", c.Request.Method, "path", c.Request.URL.Path)
		msg = "Unhandled error"
	}
	abortJSON(c, status, msg, reason)
}

// abortJSON answers with {"message": ..., "reason": ...}.
func abortJSON(c *gin.Context, status int, message string, reason *string) {
	c.AbortWithStatusJSON(status, jupyter.Error{Message: message, Reason: reason})
}
