package apiserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// Admission by bytes: a request with a body waits, before anything reads it, until the bytes
// it will hold fit in the server's budget for bodies (Options.BodyMemory). Counting requests
// would let a few large saves hold many copies of a large notebook at once (the body, its
// decoded form, the encoded file) and the kernel's OOM killer end the replica and every
// WebSocket on it; counting bytes lets many small requests through at once and makes large ones
// take turns. A request is counted as its declared length (the largest body allowed when it
// declares none) times bodyCopies, and never as more than the whole budget, so that one
// request of the largest size still runs, alone. A request that waits longer than
// AdmissionWait gets 503 with Retry-After.

// bodyCopies is how many times its length a request's body is held while it is handled, at
// most: the body as read, its decoded form, the file's encoding.
const bodyCopies = 4

// DefaultBodyMemory is the budget for request bodies when none is configured and the
// container's memory limit is unknown.
const DefaultBodyMemory = 512 << 20

// DefaultAdmissionWait is how long a request waits for room before it is refused.
const DefaultAdmissionWait = 30 * time.Second

// errBusy answers a request that found no room in time: 503 with Retry-After, as for any
// refusal that a retry may get past (abortErr).
var errBusy = &domainerr.Error{Kind: domainerr.ErrUnavailable,
	Message: "The server is handling too many large requests at once; try again in a few seconds"}

// admitBodies is the middleware that admits requests with bodies by bytes.
func (s *Server) admitBodies(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	n := r.ContentLength
	if n < 0 || n > s.opts.MaxBodyBytes {
		n = s.opts.MaxBodyBytes
	}
	weight := min(n*bodyCopies, s.opts.BodyMemory)
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.AdmissionWait)
	err := s.bodies.Acquire(ctx, weight)
	cancel()
	if err != nil {
		if errors.Is(r.Context().Err(), context.Canceled) {
			c.Abort() // the client is gone
			return
		}
		s.metrics.refusedBusy.Inc()
		s.abortErr(c, errBusy)
		return
	}
	defer s.bodies.Release(weight)
	c.Next()
}
