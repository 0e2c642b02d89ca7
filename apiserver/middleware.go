package apiserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"
)

// securityHeaders are Jupyter Server's: no sniffing, no framing by other sites, and nothing
// executable from API responses.
func (s *Server) securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	csp := "frame-ancestors 'self'; report-uri " + s.opts.BaseURL + "api/security/csp-report"
	if strings.HasPrefix(c.Request.URL.Path, s.opts.BaseURL+"api") {
		csp += "; default-src 'none'"
	}
	h.Set("Content-Security-Policy", csp)
	c.Next()
}

// limitBody bounds what a handler can read; reading past it fails with *http.MaxBytesError,
// which becomes 413. A body still arriving at Serve's read deadline (Options.ReadTimeout)
// fails with 408.
func (s *Server) limitBody(c *gin.Context) {
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, deadlineBody{c.Request.Body, s.opts.ReadTimeout}, s.opts.MaxBodyBytes)
	}
	c.Next()
}

// deadlineBody tells a body read that ran into the connection's read deadline for what it
// is, the client's fault: without it the handler's error would be the server's, a 500 logged
// as a failure.
type deadlineBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = &apiError{status: http.StatusRequestTimeout, message: fmt.Sprintf("the request body did not arrive within %s", b.timeout)}
	}
	return n, err
}

// stripTrailingSlash redirects GET /x/ to /x, as Jupyter Server does, and lets other methods
// on /x/ reach the route of /x.
func (s *Server) stripTrailingSlash(c *gin.Context) {
	p := c.Request.URL.Path
	if p == s.opts.BaseURL || !strings.HasSuffix(p, "/") {
		c.Next()
		return
	}
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		// This runs before authentication: the target must be a path of this server that no
		// browser reads as another host. Browsers take "\" for "/" and drop tabs and line
		// breaks, so "/\evil.example" would be "//evil.example"; such paths get no redirect
		// (their routes answer 404), and the target keeps the path's encoding, which no
		// browser resolves to a host.
		if strings.ContainsRune(p, '\\') || strings.ContainsFunc(p, unicode.IsControl) {
			c.Next()
			return
		}
		target := "/" + strings.Trim(c.Request.URL.EscapedPath(), "/")
		if c.Request.URL.RawQuery != "" {
			target += "?" + c.Request.URL.RawQuery
		}
		c.Redirect(http.StatusFound, target)
		c.Abort()
		return
	}
	c.Next()
}

// logRequests logs each request at V(1); tokens in the query are not logged.
func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.opts.Log.V(1).Info("Request", "method", c.Request.Method, "path", c.Request.URL.Path,
		"status", c.Writer.Status(), "duration", time.Since(start))
}

// recoverPanics turns a handler panic into a 500 instead of a dropped connection.
func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(r)
			}
			s.abortErr(c, fmt.Errorf("handler panicked: %v", r))
		}
	}()
	c.Next()
}

// measureRequests observes every request in the request histogram, by method, route and
// status, and records the activity of the server. A WebSocket upgrade is observed when the
// connection is taken over, with status 101, as Jupyter Server logs it: the time it stays
// open is the kernel's, not the request's. While it is open it counts as a channels
// connection.
func (s *Server) measureRequests(c *gin.Context) {
	start := s.opts.Clock.Now()
	if websocket.IsWebSocketUpgrade(c.Request) {
		w := &upgradeWatcher{ResponseWriter: c.Writer, taken: func() {
			s.metrics.requests.WithLabelValues(c.Request.Method, s.handlerLabel(c), strconv.Itoa(http.StatusSwitchingProtocols)).
				Observe(s.opts.Clock.Since(start).Seconds())
			s.metrics.channels.Inc()
		}}
		c.Writer = w
		c.Next()
		if w.hijacked {
			s.metrics.channels.Dec()
			return
		}
	} else {
		c.Next()
	}
	handler := s.handlerLabel(c)
	s.metrics.requests.WithLabelValues(c.Request.Method, handler, strconv.Itoa(c.Writer.Status())).
		Observe(s.opts.Clock.Since(start).Seconds())
	if tracksActivity(c, handler) {
		s.metrics.activity(s.opts.Clock.Now())
	}
}

// upgradeWatcher tells when a handler takes the connection over.
type upgradeWatcher struct {
	gin.ResponseWriter
	taken    func()
	hijacked bool
}

func (w *upgradeWatcher) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := w.ResponseWriter.Hijack()
	if err == nil && !w.hijacked {
		w.hijacked = true
		w.taken()
	}
	return conn, rw, err
}
