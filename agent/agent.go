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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// Config is what the agent needs to know; cmd/ fills it from the pod's environment.
type Config struct {
	// KernelID names the kernel (the Kernel resource).
	KernelID string
	// Listen is the address of the agent's HTTP server, pod IP and agent port.
	Listen string
	// SecretDir holds the kernel's Secret: the HMAC key and the agent token.
	SecretDir string
	// Argv is the kernel's command line; "{connection_file}" is substituted.
	Argv []string
	// RuntimeDir is where the connection file is written (a private directory is made in it).
	RuntimeDir string
	// StopGrace is how long the kernel has to exit after a shutdown request, and again after
	// SIGTERM.
	StopGrace time.Duration
	// InterruptMode is "signal" (SIGINT to the kernel's process group) or "message" (an
	// interrupt_request on the control channel), the kernel spec's interrupt_mode.
	InterruptMode string
	// StartTimeout bounds how long a kernel may take to answer its first kernel_info_request.
	StartTimeout time.Duration
	// HeartbeatInterval is how often the kernel's heartbeat is checked; three missed beats in
	// a row report the kernel dead.
	HeartbeatInterval time.Duration
	// MaxRestarts is how many times in a row a kernel that dies by itself is restarted, as
	// Jupyter's restarter does, before the agent gives up and exits as the kernel did.
	MaxRestarts int
	// Replay bounds the messages kept for a disconnected client session.
	Replay ReplayLimits
	// MaxMessageBytes bounds one WebSocket message from a client.
	MaxMessageBytes int64
	// TerminationLog, when set, receives why the kernel could not start (the container's
	// terminationMessagePath), so that the pod's status says it without the agent's logs.
	TerminationLog string
	// Cluster is the ipyparallel cluster the kernel is attached to, if any.
	Cluster ClusterConfig
	// Log receives the agent's structured log.
	Log logr.Logger
}

// ClusterConfig says where a kernel attached to an ipyparallel cluster finds it.
type ClusterConfig struct {
	// Profile is the cluster's name, the IPython profile its client file goes into; empty
	// when the kernel is attached to no cluster.
	Profile string
	// File is the cluster's client connection file.
	File string
	// IPythonDir is the kernel's IPython directory ($IPYTHONDIR, else ~/.ipython).
	IPythonDir string
}

// ReplayLimits bound what the agent keeps for disconnected client sessions.
type ReplayLimits struct {
	// Messages and Bytes bound one session's buffer; the oldest messages go first.
	Messages int
	Bytes    int
	// TTL is how long a disconnected session is kept at all.
	TTL time.Duration
	// Sessions bounds the number of disconnected sessions kept.
	Sessions int
}

func (c *Config) setDefaults() {
	if c.StopGrace <= 0 {
		c.StopGrace = 5 * time.Second
	}
	if c.InterruptMode == "" {
		c.InterruptMode = "signal"
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 5
	}
	if c.Replay.Messages <= 0 {
		c.Replay.Messages = 10000
	}
	if c.Replay.Bytes <= 0 {
		c.Replay.Bytes = 64 << 20
	}
	if c.Replay.TTL <= 0 {
		c.Replay.TTL = time.Hour
	}
	if c.Replay.Sessions <= 0 {
		c.Replay.Sessions = 64
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 256 << 20
	}
}

// ConnectionInfo is Jupyter's connection file.
type ConnectionInfo struct {
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	IP              string `json:"ip"`
	Key             string `json:"key"`
	Transport       string `json:"transport"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// ExitError carries the kernel's exit code out of Run, so that the pod's container exits as
// the kernel did.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("kernel exited with code %d", e.Code) }

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
	sessions     map[string]*clientSession
	// route maps the session ids found in client message headers to the client session
	// that sent them, so that replies find their way back.
	route   map[string]*clientSession
	pending map[string]chan *wire.Message
	// autoRestarts counts restarts after deaths since the kernel last ran for a while.
	autoRestarts int
	stopping     bool

	ready     chan struct{}
	readyOnce sync.Once
	// done receives the agent's end: nil after a requested shutdown, the kernel's exit
	// when it died for good.
	done chan error
}

type heldMessage struct {
	channel string
	frames  [][]byte
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
		ready: make(chan struct{}), done: make(chan error, 1), stderrTail: &tail{max: 2048},
	}
	a.signer = wire.NewSigner(a.key)
	a.lastActivity = time.Now()

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
			cfg.Log.V(1).Info("Kernel start ended by the stop", "status", err.Error())
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

// launch starts a kernel incarnation and makes it the one clients talk to once it answers
// kernel_info. The caller holds a.life. When the process fails first, the error is its exit.
func (a *Agent) launch() error {
	inc, err := a.startIncarnation()
	if err != nil {
		return err
	}
	a.cfg.Log.Info("Started kernel", "kernel", a.cfg.KernelID, "pid", inc.cmd.Process.Pid, "restart", a.restarts.Load())
	go a.watch(inc)
	fail := func(err error) error {
		inc.close()
		if !inc.alive() {
			if exit := exitError(inc.exitErr); exit != nil {
				return exit
			}
		}
		inc.kill()
		return err
	}
	if err := inc.connect(a.identity); err != nil {
		return fail(err)
	}
	for _, ch := range []string{wire.Shell, wire.Control, wire.Stdin, wire.IOPub} {
		go a.recvLoop(inc, ch)
	}
	requests, err := a.nudge(inc)
	if err != nil {
		return fail(err)
	}
	a.cfg.Log.Info("Kernel answered kernel_info", "kernel", a.cfg.KernelID, "requests", requests,
		"afterStart", time.Since(inc.started).Round(time.Millisecond).String())
	go a.heartbeat(inc, heartbeatEchoes(inc))
	a.mu.Lock()
	a.inc = inc
	held := a.held
	a.held = nil
	a.mu.Unlock()
	for _, h := range held {
		if err := inc.send(h.channel, h.frames); err != nil {
			a.cfg.Log.Error(err, "Send held message", "channel", h.channel)
		}
	}
	return nil
}

// nudge asks for kernel_info until the kernel replies and iopub has delivered a message:
// only then is the iopub subscription known to be live (the late-joiner problem). A request on
// the connected shell socket waits there until the kernel reads it, so until a first reply it
// is only asked again every unansweredResend: a kernel still initialising answers every request
// it finds queued, each with a reply and two status messages. With twenty kernels starting at
// once, asking again after 5, 10, 20 ... ms made six or seven requests per kernel; now the
// wait for a reply starts at unansweredResend and doubles up to four times that. A reply with
// nothing on iopub means the subscription missed its status messages; then the next request
// follows quickly.
func (a *Agent) nudge(inc *incarnation) (requests int, err error) {
	deadline := time.NewTimer(a.cfg.StartTimeout)
	defer deadline.Stop()
	replies := make(chan *wire.Message, 64)
	var ids []string
	defer func() {
		a.mu.Lock()
		for _, id := range ids {
			delete(a.pending, id)
		}
		a.mu.Unlock()
	}()
	replied := false
	delay, unanswered := 5*time.Millisecond, unansweredResend
	for {
		id, err := a.requestInto(inc, wire.Shell, "kernel_info_request", `{}`, replies)
		if err != nil {
			return len(ids), err
		}
		ids = append(ids, id)
		wait := unanswered
		unanswered = min(unanswered*2, 4*unansweredResend)
		if replied {
			wait = delay
			delay = min(delay*2, 500*time.Millisecond)
		}
		tick := time.NewTimer(wait)
		for waiting := true; waiting; {
			select {
			case <-replies:
				if !replied {
					replied = true
					a.mu.Lock()
					a.state = agentapi.ExecutionIdle
					a.mu.Unlock()
				}
				select {
				case <-inc.iopubSeen:
					tick.Stop()
					return len(ids), nil
				default:
				}
				tick.Reset(delay)
			case <-inc.iopubSeen:
				if replied {
					tick.Stop()
					return len(ids), nil
				}
			case <-tick.C:
				waiting = false
			case <-inc.exited:
				tick.Stop()
				return len(ids), errors.New("the kernel exited before answering kernel_info")
			case <-deadline.C:
				tick.Stop()
				return len(ids), fmt.Errorf("the kernel did not answer kernel_info within %s", a.cfg.StartTimeout)
			}
		}
	}
}

// unansweredResend is how long nudge first waits for a reply before it asks again, as
// jupyter_client's wait_for_ready does.
const unansweredResend = time.Second

// watch handles the end of an incarnation's process: a death nobody asked for restarts the
// kernel, as Jupyter's restarter does, or ends the agent after too many.
func (a *Agent) watch(inc *incarnation) {
	<-inc.exited
	a.mu.Lock()
	current := a.inc == inc
	stopping := a.stopping
	a.mu.Unlock()
	if !current || stopping {
		// Stopped on purpose, or it never became the current one (launch reports that).
		return
	}
	a.life.Lock()
	defer a.life.Unlock()
	a.mu.Lock()
	if a.inc != inc || a.stopping {
		a.mu.Unlock()
		return
	}
	a.inc = nil
	ranFor := time.Since(inc.started)
	if ranFor > time.Minute {
		a.autoRestarts = 0
	}
	a.autoRestarts++
	giveUp := a.autoRestarts > a.cfg.MaxRestarts
	a.mu.Unlock()
	inc.close()
	a.cfg.Log.Info("Kernel died", "kernel", a.cfg.KernelID, "status", fmt.Sprint(inc.exitErr), "ranFor", ranFor.Round(time.Millisecond))
	if giveUp {
		a.setState(agentapi.ExecutionDead, true)
		a.done <- exitError(inc.exitErr)
		return
	}
	a.setState(agentapi.ExecutionRestarting, true)
	if err := a.launch(); err != nil {
		a.cfg.Log.Error(err, "Restart after the kernel died failed")
		a.setState(agentapi.ExecutionDead, true)
		a.done <- err
		return
	}
	a.restarts.Add(1)
}

// restart replaces the kernel process with a new one: same kernel, same clients, who see
// "restarting" and then the new kernel's "starting"/"idle".
func (a *Agent) restart(ctx context.Context) error {
	a.life.Lock()
	defer a.life.Unlock()
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		return errors.New("the kernel is shutting down")
	}
	old := a.inc
	a.inc = nil
	a.mu.Unlock()
	a.setState(agentapi.ExecutionRestarting, true)
	if old != nil {
		a.stopIncarnation(old, true)
	}
	if err := a.launch(); err != nil {
		a.setState(agentapi.ExecutionDead, true)
		a.done <- err
		return err
	}
	a.restarts.Add(1)
	return ctx.Err()
}

// stopIncarnation asks the kernel to shut down and, once it has answered (its shutdown hooks
// have run), ends the process rather than waiting for ipykernel to wind down its event loop
// by itself, which takes a few hundred milliseconds; it returns once the process has exited.
func (a *Agent) stopIncarnation(inc *incarnation, restart bool) {
	defer inc.close()
	if !inc.alive() {
		return
	}
	content := `{"restart":false}`
	if restart {
		content = `{"restart":true}`
	}
	reply := make(chan *wire.Message, 1)
	if _, err := a.requestInto(inc, wire.Control, "shutdown_request", content, reply); err == nil {
		t := time.NewTimer(a.cfg.StopGrace)
		select {
		case <-reply:
		case <-inc.exited:
		case <-t.C:
		}
		t.Stop()
	}
	if inc.wait(20 * time.Millisecond) {
		return
	}
	_ = inc.signal(syscall.SIGTERM)
	if !inc.wait(a.cfg.StopGrace) {
		inc.kill()
	}
}

// stop shuts the kernel down for good and closes every client connection.
func (a *Agent) stop() {
	a.mu.Lock()
	a.stopping = true
	inc := a.inc
	a.mu.Unlock()
	a.life.Lock()
	defer a.life.Unlock()
	a.mu.Lock()
	if a.inc != nil {
		inc = a.inc
	}
	a.mu.Unlock()
	if inc != nil {
		a.stopIncarnation(inc, false)
	}
	a.setState(agentapi.ExecutionDead, false)
	a.closeAll()
}

// interrupt interrupts the running cell as the kernel spec says.
func (a *Agent) interrupt(ctx context.Context) error {
	a.mu.Lock()
	inc := a.inc
	a.mu.Unlock()
	if inc == nil {
		return errors.New("the kernel is not running")
	}
	if a.cfg.InterruptMode == "message" {
		reply := make(chan *wire.Message, 1)
		if _, err := a.requestInto(inc, wire.Control, "interrupt_request", `{}`, reply); err != nil {
			return err
		}
		select {
		case <-reply:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the kernel did not answer interrupt_request")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return inc.signal(syscall.SIGINT)
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

// writeTerminationLog says why the kernel did not start, with the end of its stderr.
func (a *Agent) writeTerminationLog(err error) {
	if a.cfg.TerminationLog == "" {
		return
	}
	msg := "the kernel did not start: " + err.Error()
	var exit *ExitError
	if errors.As(err, &exit) {
		msg = fmt.Sprintf("the kernel exited with code %d before it answered", exit.Code)
	}
	if t := a.stderrTail.String(); t != "" {
		msg += "; its last output:\n" + t
	}
	if werr := os.WriteFile(a.cfg.TerminationLog, []byte(msg), 0o644); werr != nil {
		a.cfg.Log.Error(werr, "Write the termination message")
	}
}

func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return &ExitError{Code: code}
	}
	return err
}

// kernelIP is the address the kernel's ports are bound to: 127.0.0.1, private to the pod,
// unless the agent itself listens on a loopback address. Then the pod shares the host's
// network (the local node gives each pod its own 127.0.0.N), and the kernel takes the pod's
// address, so that kernels starting side by side never pick the same port.
func kernelIP(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return ip.String()
	}
	return "127.0.0.1"
}

// newConnectionInfo picks five free ports on ip. The kernel binds them right after; the
// short window in which another process could take one is Jupyter's own, accepted practice.
func newConnectionInfo(ip, key, kernelID string) (ConnectionInfo, error) {
	ports := make([]int, 5)
	listeners := make([]net.Listener, 0, 5)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return ConnectionInfo{}, fmt.Errorf("pick kernel port: %w", err)
		}
		listeners = append(listeners, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ConnectionInfo{
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		IP: ip, Key: key, Transport: "tcp", SignatureScheme: "hmac-sha256", KernelName: kernelID,
	}, nil
}

func substitute(args []string, connFile string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "{connection_file}", connFile)
	}
	return out
}

// kernelEnv is the agent's environment without its own settings: the kernel runs user code,
// which has no use for them.
func kernelEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, agentapi.EnvPrefix) {
			out = append(out, kv)
		}
	}
	return out
}
