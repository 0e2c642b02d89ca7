package agent

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/wire"
	"github.com/nbkube/nbkube/internal/wsbatch"
)

// Status is what GET /status reports: the kernel model's live fields.
type Status struct {
	ExecutionState string    `json:"execution_state"`
	LastActivity   time.Time `json:"last_activity"`
	Connections    int       `json:"connections"`
	RestartCount   int       `json:"restart_count"`
	Ready          bool      `json:"ready"`
}

// maxReadyWait bounds how long a readiness probe may be held (?wait=).
const maxReadyWait = 30 * time.Second

// handler serves the agent's endpoints. /healthz and /readyz tell nothing about the kernel
// beyond that, so the kubelet probes them without a token; everything else needs the
// kernel's agent token, which only the API server has.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		// ?wait=<duration> holds the probe until the kernel answers, at most that long (and
		// never beyond maxReadyWait): a kernel that starts within it is ready at once and
		// without a failed probe, whose event the kubelet would write every period.
		if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && d > 0 {
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
	mux.Handle("GET /status", a.authorized(a.serveStatus))
	mux.Handle("GET /channels", a.authorized(a.serveChannels))
	mux.Handle("POST /interrupt", a.authorized(func(w http.ResponseWriter, r *http.Request) {
		a.answer(w, a.interrupt(r.Context()))
	}))
	mux.Handle("POST /restart", a.authorized(func(w http.ResponseWriter, r *http.Request) {
		a.answer(w, a.restart(r.Context()))
	}))
	mux.Handle("POST /shutdown", a.authorized(func(w http.ResponseWriter, _ *http.Request) {
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

func (a *Agent) isReady() bool {
	select {
	case <-a.ready:
		return true
	default:
		return false
	}
}

func (a *Agent) authorized(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		scheme, tok, _ := strings.Cut(auth, " ")
		if len(a.token) == 0 || (!strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token")) ||
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), a.token) != 1 {
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
		_ = json.NewEncoder(w).Encode(map[string]string{"message": err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveStatus reports the kernel's state; with ?wait=ready it first waits (as long as the
// request lasts) until the kernel has answered, so a caller learns of readiness at once
// instead of polling.
func (a *Agent) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("wait") == "ready" {
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
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	conns := 0
	for _, s := range a.sessions {
		if s.conn != nil {
			conns++
		}
	}
	return Status{ExecutionState: a.state, LastActivity: a.lastActivity.UTC(), Connections: conns,
		RestartCount: int(a.restarts.Load()), Ready: a.isReady()}
}

var upgrader = websocket.Upgrader{
	Subprotocols: []string{wire.ProtocolV1},
	// The API server is the only client and it authenticates with the agent token; the
	// browser's origin was checked there.
	CheckOrigin:       func(*http.Request) bool { return true },
	EnableCompression: false,
}

// serveChannels is the kernel's channels WebSocket: ?session_id= names the client session
// (to get what it missed while away), ?channel= makes a single-channel connection of the
// older interface, and the iopub rate limits come as Jupyter Server's setting names.
func (a *Agent) serveChannels(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	only := q.Get("channel")
	switch only {
	case "", wire.Shell, wire.IOPub, wire.Stdin, wire.Control:
	default:
		http.Error(w, "unknown channel", http.StatusBadRequest)
		return
	}
	limits := DefaultRateLimits
	if v, err := strconv.ParseFloat(q.Get("iopub_msg_rate_limit"), 64); err == nil && v >= 0 {
		limits.MsgRate = v
	}
	if v, err := strconv.ParseFloat(q.Get("iopub_data_rate_limit"), 64); err == nil && v >= 0 {
		limits.DataRate = v
	}
	if v, err := strconv.ParseFloat(q.Get("rate_limit_window"), 64); err == nil && v > 0 && v < 3600 {
		limits.Window = time.Duration(v * float64(time.Second))
	}
	hw := wsbatch.NewHijacker(w)
	ws, err := upgrader.Upgrade(hw, r, nil)
	if err != nil {
		return
	}
	c := newConn(a, ws, only, limits)
	c.batch = hw.Conn()
	a.attach(c, q.Get("session_id"))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.writeLoop()
	}()
	c.readLoop()
	a.detach(c)
	<-wrote
}
