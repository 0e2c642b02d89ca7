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
	"sync/atomic"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/domainerr"
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

// limitBody bounds what a handler can read, and how long it waits for it, and answers at once
// what is answered without the body.
//
// Reading past MaxBodyBytes fails with *http.MaxBytesError, which becomes 413; a body that
// declares more is refused before anything is read. A body read that waits BodyIdleTimeout
// for a byte, or runs into Serve's read deadline (ReadTimeout), fails with 408: a client
// that stalls holds the connection for seconds, not for the read timeout.
//
// net/http reads what a handler left of a body before it writes the answer, so that the
// connection can serve the next request: a refusal that did not need the body (401, 403,
// 404, 413) would wait for the client to send it, up to the read timeout. An answer that
// starts before the body has been read to its end closes the connection instead, and is
// written at once (earlyAnswer).
func (s *Server) limitBody(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		c.Next()
		return
	}
	rc := http.NewResponseController(c.Writer)
	original := r.Body
	b := &deadlineBody{ReadCloser: r.Body, rc: rc, idle: s.opts.BodyIdleTimeout,
		total: s.opts.ReadTimeout, end: time.Now().Add(s.opts.ReadTimeout)}
	w := &earlyAnswer{ResponseWriter: c.Writer, body: b, http1: r.ProtoMajor == 1}
	c.Writer = w
	r.Body = http.MaxBytesReader(w, b, s.opts.MaxBodyBytes)
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.abortErr(c, &http.MaxBytesError{Limit: s.opts.MaxBodyBytes})
	} else {
		c.Next()
	}
	// Nothing written yet (gin writes the status after the handlers): the same as an answer
	// that starts now.
	w.answering()
	// net/http tells a body closed early by its own type: with it back, the server closes
	// the connection as it does for such bodies, its write side first.
	r.Body = original
	if w.early {
		w.linger()
	}
}

// lingerAfterEarlyAnswer is how long the server still reads, and drops, what a client sends
// of a body after an answer given without it, before it closes the connection: closing on
// data that has not been read makes the client's system reset the connection, which can
// lose it the answer (RFC 9112 9.6).
const lingerAfterEarlyAnswer = time.Second

// deadlineBody bounds the wait for each read of a body by the idle timeout, within the
// read timeout, and tells a read that ran into either for what it is, the client's fault:
// without it the handler's error would be the server's, a 500 logged as a failure.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
	// idle bounds the wait for a byte; total is the read timeout, which ends at end.
	idle, total time.Duration
	end         time.Time
	// done is set once a read ended the body (its end, or an error) or an answer began
	// without it: net/http owns the connection's read deadline again, and lifts it at the
	// body's end for the connection's background read, which a deadline set later would
	// cut.
	done atomic.Bool
	// idleDeadline tells whether the deadline of the last read was the idle timeout's.
	idleDeadline bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	if b.idle > 0 {
		d := time.Now().Add(b.idle)
		b.idleDeadline = d.Before(b.end)
		if !b.idleDeadline {
			d = b.end
		}
		// Not every connection has deadlines (a test's ResponseRecorder): then only the
		// read timeout, where there is one, bounds the body.
		_ = b.rc.SetReadDeadline(d)
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done.Store(true)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		msg := fmt.Sprintf("the request body did not arrive within %s", b.total)
		if b.idleDeadline {
			msg = fmt.Sprintf("the request body stalled: nothing of it arrived for %s", b.idle)
		}
		err = domainerr.New(domainerr.ErrTimeout, "%s", msg)
	}
	return n, err
}

// earlyAnswer closes the connection of an answer that starts before the request's body
// has been read to its end: net/http then writes the answer at once rather than wait to read
// the rest of the body first. It reads, and drops, what the client still sends for
// lingerAfterEarlyAnswer after the answer, then closes.
type earlyAnswer struct {
	gin.ResponseWriter
	body    *deadlineBody
	http1   bool
	decided bool
	// early is set when the answer started before the body's end.
	early bool
}

// answering is called before anything of the answer is written.
func (w *earlyAnswer) answering() {
	if w.decided {
		return
	}
	w.decided = true
	if w.body.done.Swap(true) || !w.http1 {
		// HTTP/2 answers a stream without waiting for its body, and has no Connection header.
		return
	}
	w.early = true
	w.Header().Set("Connection", "close")
	_ = w.body.rc.SetReadDeadline(time.Now().Add(lingerAfterEarlyAnswer))
}

// linger sends the early answer, then reads and drops the rest of the body until it ends or
// the read deadline answering set passes: a client still sending meets no reset before it
// has had the time to read the answer.
func (w *earlyAnswer) linger() {
	w.ResponseWriter.Flush()
	_, _ = io.Copy(io.Discard, w.body.ReadCloser)
}

func (w *earlyAnswer) WriteHeaderNow() {
	w.answering()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *earlyAnswer) Write(p []byte) (int, error) {
	w.answering()
	return w.ResponseWriter.Write(p)
}

func (w *earlyAnswer) WriteString(s string) (int, error) {
	w.answering()
	return w.ResponseWriter.WriteString(s)
}

func (w *earlyAnswer) Flush() {
	w.answering()
	w.ResponseWriter.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *earlyAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// stripTrailingSlash redirects GET /x/ to /x, as Jupyter Server does, and lets other methods
// on /x/ reach the route of /x.
func (s *Server) stripTrailingSlash(c *gin.Context) {
	p := c.Request.URL.Path
	if p == s.opts.BaseURL || !strings.HasSuffix(p, "/") || strings.HasPrefix(p, s.opts.BaseURL+"dask/") {
		// A dask dashboard's paths are the scheduler's, which tells /x/ from /x.
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
		// A terminal's WebSocket is no kernel's channels.
		channels := s.handlerLabel(c) != "/"+terminalSocketRoute
		w := &upgradeWatcher{ResponseWriter: c.Writer, taken: func() {
			s.metrics.requests.WithLabelValues(c.Request.Method, s.handlerLabel(c), strconv.Itoa(http.StatusSwitchingProtocols)).
				Observe(s.opts.Clock.Since(start).Seconds())
			if channels {
				s.metrics.channels.Inc()
			}
		}}
		c.Writer = w
		c.Next()
		if w.hijacked {
			if channels {
				s.metrics.channels.Dec()
			}
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
