// Package agent is the process that runs in every kernel pod (`nbkube agent -- <argv>`): it
// writes the kernel's connection file from the pod's Secret, starts the kernel, speaks the
// Jupyter messaging protocol to it over ZeroMQ, and serves the kernel's channels as a
// WebSocket (Jupyter's JSON protocol and the v1.kernel.websocket.jupyter.org subprotocol) to
// the API server, along with interrupt, restart, shutdown, status and health.
//
// One set of ZeroMQ sockets serves every client: replies and stdin requests go to the client
// whose session sent the request (by the parent header's session), iopub goes to everyone.
// While a client's session is disconnected its messages are kept in a bounded buffer and
// replayed when it reconnects, through whichever API server replica it comes back by.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// Agent bridges one kernel to its WebSocket clients.
type Agent struct {
	cfg        Config
	key, token []byte
	signer     *wire.Signer
	// identity routes the kernel's shell and stdin replies to the agent's sockets.
	identity string
	// session is the Jupyter session of the agent's own requests (kernel_info nudges,
	// interrupt and shutdown requests); their replies are not for any client.
	session    string
	runtimeDir string
	restarts   atomic.Int32
	badSigs    atomic.Int64
	stderrTail *tail
	// mem is charged with what the agent holds for clients.
	mem budget
	// rec writes the outputs of runs whose client is away into their notebooks; nil when
	// the agent knows no contents directory.
	rec *recorder
	// exec sends the cells of server-side execution (PathExecute).
	exec *executor

	// life serializes starting, restarting, interrupting and stopping the kernel.
	life sync.Mutex

	mu sync.Mutex
	// inc is the kernel incarnation clients talk to; nil while one is being started, when
	// client messages are held and sent once it answers.
	inc          *incarnation
	held         []heldMessage
	state        string
	lastActivity time.Time
	hbDead       bool
	// unusedSince is when the agent started, until a client first connects to the channels
	// (then zero): an API server that died before its client came leaves such a kernel.
	unusedSince time.Time
	sessions    map[string]*clientSession
	// route maps the session ids found in client message headers to the client session
	// that sent them, so that replies find their way back.
	route   map[string]*clientSession
	pending map[string]chan *wire.Message
	// autoRestarts counts restarts after deaths since the kernel last ran for a while.
	autoRestarts int
	// lastDeath is the kernel's last death nobody asked for (Status.LastDeath).
	lastDeath *agentapi.Death
	// outputsWritten is the recorder's last write into a notebook (Status.OutputsWritten).
	outputsWritten *agentapi.OutputsWrite
	stopping       bool
	// workDir is where later incarnations start: Config.WorkDir, then where PathWorkDir moved
	// the kernel; empty, the agent's own.
	workDir string
	// extraEnv is added to later incarnations' environment (PathWorkDir), "name=value".
	extraEnv []string

	ready     chan struct{}
	readyOnce sync.Once
	// done receives the agent's end: nil after a requested shutdown, the kernel's exit
	// when it died for good.
	done chan error
}

type heldMessage struct {
	channel string
	frames  [][]byte
	// size is what the message is charged against the memory budget.
	size int64
}

// Run runs the kernel until it exits for good, a client asks for shutdown, or ctx ends
// (then the kernel is shut down gracefully).
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if len(cfg.Argv) == 0 {
		return errors.New("no kernel command: nbkube agent -- <argv>")
	}
	key, err := os.ReadFile(filepath.Join(cfg.SecretDir, agentapi.SecretKeyHMAC))
	if err != nil {
		return fmt.Errorf("kernel key: %w", err)
	}
	token, err := os.ReadFile(filepath.Join(cfg.SecretDir, agentapi.SecretKeyToken))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("agent token: %w", err)
	}
	if cfg.Cluster.Profile != "" {
		// Without the file the kernel still works; only ipyparallel.Client fails, and says so.
		if err := linkClusterFile(cfg.Cluster.IPythonDir, cfg.Cluster.Profile, cfg.Cluster.File); err != nil {
			cfg.Log.Error(err, "Linking the cluster's connection file", "cluster", cfg.Cluster.Profile)
		}
	}
	dir, err := os.MkdirTemp(cfg.RuntimeDir, "nbkube-kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a := &Agent{
		cfg: cfg, key: []byte(strings.TrimSpace(string(key))), token: []byte(strings.TrimSpace(string(token))),
		identity: newID(), session: newID(), runtimeDir: dir, state: agentapi.ExecutionStarting,
		sessions: map[string]*clientSession{}, route: map[string]*clientSession{}, pending: map[string]chan *wire.Message{},
		ready: make(chan struct{}), done: make(chan error, 1), stderrTail: &tail{max: 2048}, workDir: cfg.WorkDir,
	}
	a.mem.limit = cfg.MemoryBudget
	a.signer = wire.NewSigner(a.key)
	a.rec = a.newRecorder(cfg.ContentsDir)
	a.exec = newExecutor()
	defer a.stopRecording()
	a.lastActivity = time.Now()
	a.unusedSince = a.lastActivity

	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("agent listen: %w", err)
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error(err, "Agent HTTP server stopped")
		}
	}()
	defer srv.Close()
	stopSweep := a.sweepSessions()
	defer stopSweep()

	started := make(chan error, 1)
	go func() {
		a.life.Lock()
		defer a.life.Unlock()
		started <- a.launch()
	}()
	select {
	case err := <-started:
		if err != nil {
			a.writeTerminationLog(err)
			return err
		}
		a.readyOnce.Do(func() { close(a.ready) })
		cfg.Log.Info("Kernel is ready", "kernel", cfg.KernelID)
	case <-ctx.Done():
		// Stopped while starting: launch ends when its process is stopped.
		a.stop()
		// The launch fails once its process is stopped; that is no failure of the pod.
		if err := <-started; err != nil {
			cfg.Log.V(1).Info("Kernel start ended by the stop", "error", err.Error())
		}
		return nil
	}
	select {
	case err := <-a.done:
		return err
	case <-ctx.Done():
		a.stop()
		return nil
	}
}

// requestInto sends one of the agent's own requests; its reply goes to reply (if not nil).
func (a *Agent) requestInto(inc *incarnation, channel, msgType, content string, reply chan *wire.Message) (string, error) {
	m := a.newMessage(msgType, nil, content)
	h, _ := wire.ParseHeader(m.Header)
	if reply != nil {
		a.mu.Lock()
		a.pending[h.MsgID] = reply
		a.mu.Unlock()
	}
	if err := inc.send(channel, wire.EncodeZMQ(m, a.signer)); err != nil {
		a.mu.Lock()
		delete(a.pending, h.MsgID)
		a.mu.Unlock()
		return "", fmt.Errorf("send %s: %w", msgType, err)
	}
	return h.MsgID, nil
}

// newMessage makes a message of the agent's own session.
func (a *Agent) newMessage(msgType string, parent json.RawMessage, content string) *wire.Message {
	header := fmt.Sprintf(`{"msg_id":%q,"username":"nbkube","session":%q,"date":%q,"msg_type":%q,"version":"5.3"}`,
		newID(), a.session, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), msgType)
	if parent == nil {
		parent = json.RawMessage(`{}`)
	}
	return &wire.Message{Header: json.RawMessage(header), ParentHeader: parent, Metadata: json.RawMessage(`{}`), Content: json.RawMessage(content)}
}

// setState records an execution state the agent decides (restarting, dead) and, when
// broadcast, tells every client with a status message as Jupyter Server does.
func (a *Agent) setState(state string, broadcast bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state = state
	if broadcast {
		m := a.newMessage("status", nil, fmt.Sprintf(`{"execution_state":%q}`, state))
		m.Channel = wire.IOPub
		a.broadcastLocked(m, wire.Header{MsgType: "status"})
	}
}
