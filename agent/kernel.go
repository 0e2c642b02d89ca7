package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// incarnation is one run of the kernel process with the ZeroMQ sockets connected to it. A
// restart makes a new incarnation on new ports rather than reconnecting the old sockets:
// go-zeromq does not reconnect reliably (see docs/agent.md), and fresh ports also keep a
// request queued for the old process from reaching the new one.
type incarnation struct {
	info     ConnectionInfo
	connFile string
	// pid is the kernel process's, the leader of its process group.
	pid int
	// forked says that the node's fork server started the process (see forkKernel).
	forked  bool
	started time.Time
	// exited is closed when the process has exited; exitErr is then its status.
	exited  chan struct{}
	exitErr error

	// ctx ends the sockets' goroutines; cancel is called when the incarnation is closed.
	ctx    context.Context
	cancel context.CancelFunc

	// sockets by channel; shell and stdin share one routing identity, or the kernel sends
	// input_request nowhere.
	sockets map[string]zmq4.Socket
	sendMu  map[string]*sync.Mutex
	// connRead is closed when something first opened the connection file after it was
	// written: the kernel reads it just before it binds its ports. Nil when the file could
	// not be watched.
	connRead <-chan struct{}
	// iopubSeen is closed when the first iopub message arrives: the subscription is live.
	iopubSeen     chan struct{}
	iopubSeenOnce sync.Once
	// output tells the iopub reader that the kernel streams output; streamRun counts the
	// stream messages in a row, the last at lastStream. Only the iopub receiver uses them.
	output     outputHint
	streamRun  int
	lastStream time.Time

	closeOnce sync.Once
}

// startIncarnation writes a connection file with fresh ports and starts the kernel process.
// The sockets are connected by connect.
func (a *Agent) startIncarnation() (*incarnation, error) {
	info, err := newConnectionInfo(kernelIP(a.cfg.Listen), string(a.key), a.cfg.KernelID)
	if err != nil {
		return nil, err
	}
	connFile := filepath.Join(a.runtimeDir, "kernel-"+a.cfg.KernelID+"-"+strconv.Itoa(int(a.restarts.Load()))+".json")
	if err := info.write(connFile); err != nil {
		return nil, err
	}
	argv := append([]string{a.cfg.Argv[0]}, substitute(a.cfg.Argv[1:], connFile)...)
	env := kernelEnv(os.Environ())
	a.mu.Lock()
	dir := a.workDir
	env = append(env, a.extraEnv...)
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	connRead, err := watchOpen(ctx, connFile)
	if err != nil {
		// inotify can be out of instances; waitListening then probes at its fast pace throughout.
		a.cfg.Log.V(1).Info("Cannot watch the connection file", "error", err.Error())
	}
	pid, wait, forked, err := a.startProcess(argv, env, dir)
	if err != nil {
		cancel()
		_ = os.Remove(connFile)
		return nil, fmt.Errorf("start kernel %q: %w", a.cfg.Argv[0], err)
	}
	inc := &incarnation{
		info: info, connFile: connFile, pid: pid, forked: forked, started: time.Now(), exited: make(chan struct{}),
		ctx: ctx, cancel: cancel, sockets: map[string]zmq4.Socket{}, sendMu: map[string]*sync.Mutex{},
		connRead: connRead, iopubSeen: make(chan struct{}),
	}
	go func() {
		inc.exitErr = wait()
		close(inc.exited)
		// Dials still retrying toward a dead process give up.
		cancel()
	}()
	return inc, nil
}

// startProcess starts the kernel's process: forked by the node's fork server when there is
// one and it can (see forkKernel), else as a child of the agent's. wait waits for its end.
func (a *Agent) startProcess(argv, env []string, dir string) (pid int, wait func() error, forked bool, err error) {
	stderr := io.MultiWriter(os.Stderr, a.stderrTail)
	if a.cfg.ForkServer != "" {
		k, err := forkKernel(a.cfg.ForkServer, argv, env, dir, os.Stdout, stderr)
		switch {
		case err == nil:
			return k.pid, k.wait, true, nil
		case errors.Is(err, errNotIPyKernel):
			a.cfg.Log.V(1).Info("Not an ipykernel command; starting the kernel as a new process")
		default:
			a.cfg.Log.Info("The fork server did not start the kernel; starting it as a new process", "reason", err.Error())
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, stderr
	cmd.Env, cmd.Dir = env, dir
	// Its own process group so that signals reach the kernel's children too, as Jupyter's
	// provisioner does; Pdeathsig so it never outlives the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, nil, false, err
	}
	return cmd.Process.Pid, cmd.Wait, false, nil
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

// connect dials the kernel's ports once the kernel listens on them. The incarnation's
// context ends the wait if the process exits first.
func (inc *incarnation) connect(identity string) error {
	if err := inc.waitListening(); err != nil {
		return err
	}
	opts := func(extra ...zmq4.Option) []zmq4.Option {
		return append([]zmq4.Option{zmq4.WithDialerRetry(5 * time.Millisecond), zmq4.WithDialerMaxRetries(200),
			zmq4.WithDialerTimeout(5 * time.Second)}, extra...)
	}
	id := zmq4.SocketIdentity(identity)
	socks := []struct {
		channel string
		sock    zmq4.Socket
		port    int
	}{
		{wire.Shell, zmq4.NewDealer(inc.ctx, opts(zmq4.WithID(id))...), inc.info.ShellPort},
		{wire.Stdin, zmq4.NewDealer(inc.ctx, opts(zmq4.WithID(id))...), inc.info.StdinPort},
		{wire.Control, zmq4.NewDealer(inc.ctx, opts(zmq4.WithID(zmq4.SocketIdentity(identity+"-control")))...), inc.info.ControlPort},
		{wire.IOPub, zmq4.NewSub(withOutputHint(inc.ctx, &inc.output), opts()...), inc.info.IOPubPort},
		// The heartbeat is an echo (a ROUTER queue device in ipykernel). A DEALER rather than
		// Jupyter's REQ: a missed echo leaves a REQ unable to send again, a DEALER not.
		{channelHB, zmq4.NewDealer(inc.ctx, opts()...), inc.info.HBPort},
	}
	for _, s := range socks {
		inc.sockets[s.channel] = s.sock
		inc.sendMu[s.channel] = &sync.Mutex{}
	}
	if err := inc.sockets[wire.IOPub].SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return fmt.Errorf("subscribe to iopub: %w", err)
	}
	for _, s := range socks {
		if err := s.sock.Dial(endpoint(inc.info, s.port)); err != nil {
			return fmt.Errorf("connect %s channel: %w", s.channel, err)
		}
	}
	return nil
}

// waitListening waits until the kernel accepts connections on its heartbeat port, which
// ipykernel binds after the other four. A kernel reads its connection file only once its
// imports are done, just before it binds, so until then one probe every slowProbe is enough;
// from that read on it probes every millisecond for fastProbes, then with a pause growing to
// 20 ms. Without the watch, the fast probes come first. Probing every few milliseconds
// through a whole start would take CPU, the probes and the Go runtime's wake-ups around
// them, from the very kernels the agents wait for when many start side by side.
func (inc *incarnation) waitListening() error {
	addr, err := sockaddr(inc.info.IP, inc.info.HBPort)
	if err != nil {
		return err
	}
	read := inc.connRead
	pause, fast := slowProbe, 0
	if read == nil {
		pause = time.Millisecond
	}
	for {
		err := probeListening(addr)
		if err == nil {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-inc.ctx.Done():
			t.Stop()
			return fmt.Errorf("the kernel exited before it listened: %w", err)
		case <-read:
			t.Stop()
			read, pause = nil, time.Millisecond
			continue
		case <-t.C:
		}
		if read == nil {
			if fast++; fast > fastProbes {
				pause = min(pause*2, 20*time.Millisecond)
			}
		}
	}
}

// slowProbe is waitListening's pace until the kernel has read its connection file: a kernel
// that reads it in a way inotify does not see still gets found.
const slowProbe = 250 * time.Millisecond

// fastProbes is how many probes waitListening makes a millisecond apart once the kernel is
// about to bind.
const fastProbes = 50

// watchOpen closes the returned channel when something next opens path (inotify IN_OPEN), or
// when the watch ends with ctx. The watch holds an inotify instance only until then.
func watchOpen(ctx context.Context, path string) (<-chan struct{}, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	// Non-blocking, so the read waits in Go's poller and Close ends it.
	f := os.NewFile(uintptr(fd), "inotify")
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	opened := make(chan struct{})
	go func() {
		buf := make([]byte, unix.SizeofInotifyEvent+unix.NAME_MAX+1)
		_, err := f.Read(buf)
		if stop() {
			_ = f.Close()
		}
		if err == nil {
			close(opened)
		}
	}()
	return opened, nil
}

// probeListening tells, with a nil error, whether something accepts TCP connections at addr.
// A plain blocking connect, without Go's poller: the kernel is on this pod's own address, so
// the answer comes at once (the send timeout bounds it anyway), and it costs much less than a
// net.Dial, whose setup around the poller dominates the agents' CPU when many kernels start
// side by side.
func probeListening(addr syscall.Sockaddr) error {
	family := syscall.AF_INET
	if _, ok := addr.(*syscall.SockaddrInet6); ok {
		family = syscall.AF_INET6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Close(fd) }()
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &syscall.Timeval{Sec: 1}); err != nil {
		return err
	}
	return syscall.Connect(fd, addr)
}

// sockaddr is ip:port for a raw socket.
func sockaddr(ip string, port int) (syscall.Sockaddr, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, fmt.Errorf("kernel address %q: %w", ip, err)
	}
	if a.Is4() || a.Is4In6() {
		return &syscall.SockaddrInet4{Port: port, Addr: a.Unmap().As4()}, nil
	}
	return &syscall.SockaddrInet6{Port: port, Addr: a.As16()}, nil
}

// noteOutput follows the kind of each iopub message: outputRun stream messages in a row, each
// within outputGap of the one before, tell the iopub reader to moderate, and it goes on until
// a message of another kind arrives. Once reads are moderated the messages come in batches,
// further apart than outputGap, which does not end the stream.
func (inc *incarnation) noteOutput(msgType string, now time.Time) {
	if msgType != "stream" {
		inc.streamRun = 0
		inc.output.streaming.Store(false)
		return
	}
	if now.Sub(inc.lastStream) > outputGap {
		inc.streamRun = 0
	}
	inc.lastStream = now
	if inc.streamRun++; inc.streamRun >= outputRun {
		inc.output.streaming.Store(true)
	}
}

// channelHB names the heartbeat socket among the channels.
const channelHB = "hb"

func endpoint(info ConnectionInfo, port int) string {
	return fmt.Sprintf("%s://%s:%d", transportName, info.IP, port)
}

// send signs m and sends it on channel.
func (inc *incarnation) send(channel string, frames [][]byte) error {
	sock, ok := inc.sockets[channel]
	if !ok {
		return fmt.Errorf("no %s channel", channel)
	}
	mu := inc.sendMu[channel]
	mu.Lock()
	defer mu.Unlock()
	return sock.SendMulti(zmq4.NewMsgFrom(frames...))
}

// close ends the sockets (the process is stopped separately).
func (inc *incarnation) close() {
	inc.closeOnce.Do(func() {
		inc.cancel()
		for _, s := range inc.sockets {
			_ = s.Close()
		}
		_ = os.Remove(inc.connFile)
	})
}

// signal sends sig to the kernel's process group.
func (inc *incarnation) signal(sig syscall.Signal) error {
	if err := syscall.Kill(-inc.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal kernel: %w", err)
	}
	return nil
}

// wait waits for the process to exit, at most d; it tells whether it did.
func (inc *incarnation) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-inc.exited:
		return true
	case <-t.C:
		return false
	}
}

// kill stops the process group for good and waits for the process.
func (inc *incarnation) kill() {
	_ = inc.signal(syscall.SIGKILL)
	<-inc.exited
}

// alive tells whether the process still runs.
func (inc *incarnation) alive() bool {
	select {
	case <-inc.exited:
		return false
	default:
		return true
	}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	// A UUID-shaped string, as Jupyter's ids are.
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// tail keeps the last bytes written to it: the kernel's last words, for the reason a pod
// gives when the kernel fails to start.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
