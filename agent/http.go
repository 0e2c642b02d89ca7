package agent

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
	"github.com/nbkube/nbkube/internal/wsbatch"
)

// maxReadyWait bounds how long a readiness probe may be held (agentapi.QueryWait).
const maxReadyWait = 30 * time.Second

// handler serves the agent's endpoints. The probes tell nothing about the kernel beyond
// that, so the kubelet probes them without a token; everything else needs the kernel's agent
// token, which only the API server and the controllers have.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+agentapi.PathHealthz, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET "+agentapi.PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		// A wait holds the probe until the kernel answers, at most that long (and never
		// beyond maxReadyWait): a kernel that starts within it is ready at once and without a
		// failed probe, whose event the kubelet would write every period.
		if d, err := time.ParseDuration(r.URL.Query().Get(agentapi.QueryWait)); err == nil && d > 0 {
			t := time.NewTimer(min(d, maxReadyWait))
			select {
			case <-a.ready:
			case <-t.C:
			case <-r.Context().Done():
			}
			t.Stop()
		}
		if !a.isReady() {
			http.Error(w, "the kernel has not answered yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.Handle("GET "+agentapi.PathStatus, a.authorized(a.serveStatus))
	mux.Handle("GET "+agentapi.PathChannels, a.authorized(a.serveChannels))
	mux.Handle("POST "+agentapi.PathInterrupt, a.authorized(func(w http.ResponseWriter, r *http.Request) {
		a.answer(w, a.interrupt(r.Context()))
	}))
	mux.Handle("POST "+agentapi.PathRestart, a.authorized(func(w http.ResponseWriter, r *http.Request) {
		a.answer(w, a.restart(r.Context()))
	}))
	mux.Handle("POST "+agentapi.PathWorkDir, a.authorized(a.serveWorkDir))
	mux.Handle("POST "+agentapi.PathNotebook, a.authorized(a.serveNotebookMove))
	mux.Handle("POST "+agentapi.PathExecute, a.authorized(a.serveExecute))
	mux.Handle("POST "+agentapi.PathShutdown, a.authorized(func(w http.ResponseWriter, _ *http.Request) {
		a.stop()
		w.WriteHeader(http.StatusNoContent)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		select {
		case a.done <- nil:
		default:
		}
	}))
	return mux
}

// readBody reads a request's body of at most limit bytes; a larger one is answered 413
// (what names the body in the message), a failed read not at all (the client is gone).
func readBody(w http.ResponseWriter, r *http.Request, limit int64, what string) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s larger than %d bytes", what, limit))
		}
		return nil, false
	}
	return body, true
}

func (a *Agent) isReady() bool {
	select {
	case <-a.ready:
		return true
	default:
		return false
	}
}

func (a *Agent) authorized(h http.HandlerFunc) http.Handler { return authorizedBy(a.token, h) }

// authorizedBy lets through requests that carry token, compared in constant time.
func authorizedBy(token []byte, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, tok, _ := strings.Cut(auth, " ")
		if len(token) == 0 || (!strings.EqualFold(scheme, agentapi.AuthScheme) && !strings.EqualFold(scheme, "token")) ||
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), token) != 1 {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		h(w, r)
	})
}

func (a *Agent) answer(w http.ResponseWriter, err error) {
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(agentapi.ErrorBody{Message: err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveStatus reports the kernel's state; asked to wait for readiness, it first waits (as
// long as the request lasts) until the kernel has answered, so a caller learns of readiness
// at once instead of polling.
func (a *Agent) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get(agentapi.QueryWait) == agentapi.WaitReady {
		// A kernel that fails to start ends the agent, and with it this request.
		select {
		case <-a.ready:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a.Status())
}

// Status is the kernel's current state.
func (a *Agent) Status() agentapi.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Expired sessions go first, so that their bytes are not reported as held until the
	// next sweep.
	a.evictLocked()
	conns := 0
	var replay int64
	for _, s := range a.sessions {
		if s.conn != nil {
			conns++
		}
		replay += int64(s.bufBytes)
	}
	st := agentapi.Status{ExecutionState: a.state, LastActivity: a.lastActivity.UTC(), Connections: conns,
		RestartCount: int(a.restarts.Load()), Ready: a.isReady(), ReplayBytes: replay,
		MemoryBytes: a.mem.used()}
	if !a.unusedSince.IsZero() {
		since := a.unusedSince.UTC()
		st.UnusedSince = &since
	}
	if a.lastDeath != nil {
		d := *a.lastDeath
		st.LastDeath = &d
	}
	if a.outputsWritten != nil {
		w := *a.outputsWritten
		st.OutputsWritten = &w
	}
	return st
}

var upgrader = websocket.Upgrader{
	Subprotocols: []string{wire.ProtocolV1},
	// The API server is the only client and it authenticates with the agent token; the
	// browser's origin was checked there.
	CheckOrigin:       func(*http.Request) bool { return true },
	EnableCompression: false,
}

// serveChannels is the kernel's channels WebSocket: the query names the client session (to
// get what it missed while away), may make a single-channel connection of the older
// interface, and carries the iopub rate limits.
func (a *Agent) serveChannels(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	only := q.Get(agentapi.QueryChannel)
	switch only {
	case "", wire.Shell, wire.IOPub, wire.Stdin, wire.Control:
	default:
		http.Error(w, "unknown channel", http.StatusBadRequest)
		return
	}
	limits := agentapi.RateLimitsFromQuery(q, agentapi.DefaultRateLimits)
	hw := wsbatch.NewHijacker(w)
	ws, err := upgrader.Upgrade(hw, r, nil)
	if err != nil {
		return
	}
	c := newConn(a, ws, only, limits)
	c.batch = hw.Conn()
	if nb := q.Get(agentapi.QueryNotebook); validNotebook(nb) {
		c.notebook = nb
	}
	a.attach(c, q.Get(agentapi.QuerySessionID))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.writeLoop()
	}()
	c.readLoop()
	a.detach(c)
	<-wrote
}
