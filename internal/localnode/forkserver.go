package localnode

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// forkServerScript is the kernel fork server: a Python process that imported ipykernel once
// and forks a kernel per request (see forkserver.py and docs/local.md).
//
//go:embed forkserver.py
var forkServerScript []byte

// forkServerIdle is how long the fork server stays without a kernel before it exits; the
// next kernel starts it again.
const forkServerIdle = 10 * time.Minute

// forkServerSteady is how long a fork server must have run for its failure to be taken for an
// accident rather than a server that cannot work.
const forkServerSteady = time.Minute

// maxSocketPath is the longest path a Unix socket address holds (sun_path, with its NUL).
const maxSocketPath = 107

// forkServer owns the fork server's socket and starts the server when a connection waits
// for it (socket activation), so that a node that runs no kernel pays nothing for it. An
// agent whose kernel is `<python> -m ipykernel_launcher ...` asks it for the kernel process
// and starts the interpreter itself when it cannot (see agent/forkserver.go).
type forkServer struct {
	ForkServerOptions
	// socket is where agents connect, set by listen: in Dir, or in a private directory of
	// the temporary directory (socketDir, removed at the end) when Dir's path is too long
	// for a Unix socket address.
	socket, socketDir string
}

// ForkServerOptions say how to run a kernel fork server.
type ForkServerOptions struct {
	// Python is the interpreter; Dir holds the socket, the script, the log and the server's
	// HOME.
	Python, Dir string
	// Env is the server's environment besides PATH and HOME: the interpreter settings
	// (PYTHON*, LANG, LC_*) the kernels it forks must have too. A node's pods get none.
	Env []string
	// Idle is how long the server stays without a kernel before it exits; default 10 min.
	Idle time.Duration
	// SandboxedOnly refuses agents that are not in a sandbox: on a node that sandboxes
	// every pod, such a request could only come through a sandbox's connection whose process
	// ended (its PID taken by another), and must not become a kernel on the host.
	SandboxedOnly bool
	// SandboxIDs are the first and the number of the users of the machine that sandboxes
	// may run as (see sandboxHostIDs): agents of those users may connect too, from a
	// sandbox only. Zero: none.
	SandboxIDs [2]uint32
}

// newForkServer is the fork server of opts.
func newForkServer(opts ForkServerOptions) *forkServer {
	if opts.Idle <= 0 {
		opts.Idle = forkServerIdle
	}
	return &forkServer{ForkServerOptions: opts}
}

// ServeForkServer runs a kernel fork server outside a node (tests of agents use it) until
// ctx ends, and returns the socket to give agents; done is closed when it stopped.
func ServeForkServer(ctx context.Context, opts ForkServerOptions) (socket string, done <-chan struct{}, err error) {
	f := newForkServer(opts)
	ln, err := f.listen()
	if err != nil {
		return "", nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		f.serve(ctx, ln)
	}()
	return f.socket, stopped, nil
}

// listen makes the socket, which only this user may connect to (the server checks the peer's
// user too): whoever can ask for a kernel runs code as nbkube's user.
func (f *forkServer) listen() (*net.UnixListener, error) {
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(f.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(f.Dir, "forkserver.py"), forkServerScript, 0o600); err != nil {
		return nil, err
	}
	f.socket = filepath.Join(f.Dir, "kernel-fork.sock")
	if len(f.socket) > maxSocketPath {
		dir, err := os.MkdirTemp("", "nbkube-fork-")
		if err != nil {
			return nil, err
		}
		f.socket, f.socketDir = filepath.Join(dir, "kernel-fork.sock"), dir
	}
	if err := os.Remove(f.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: f.socket, Net: "unixpacket"})
	if err != nil {
		if f.socketDir != "" {
			_ = os.Remove(f.socketDir)
		}
		return nil, err
	}
	return ln, nil
}

// serve starts the server whenever a connection waits on ln and none runs, until ctx ends;
// then it stops the server, which takes the kernels it forked with it. A server that exits
// with an error (the interpreter lacks ipykernel, say) is not started again: ln is closed,
// and agents start their kernels themselves.
func (f *forkServer) serve(ctx context.Context, ln *net.UnixListener) {
	logger := log.FromContext(ctx).WithName("forkserver")
	defer func() {
		_ = os.Remove(f.socket)
		if f.socketDir != "" {
			_ = os.Remove(f.socketDir)
		}
	}()
	defer func() { _ = ln.Close() }()
	file, err := ln.File()
	if err != nil {
		logger.Error(err, "Fork server off")
		return
	}
	defer file.Close()
	stop := context.AfterFunc(ctx, func() { _ = file.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		if !waitConnection(file) {
			if ctx.Err() == nil {
				logger.Error(errors.New("cannot wait for connections"), "Fork server off; agents start their kernels themselves")
			}
			return
		}
		began := time.Now()
		err := f.run(ctx, file)
		switch {
		case err == nil:
		case time.Since(began) < forkServerSteady:
			// It could not even start (no ipykernel for that interpreter, say): starting it
			// for every kernel would only make each start wait for the failure.
			logger.Error(err, "Fork server failed; agents start their kernels themselves", "log", filepath.Join(f.Dir, "forkserver.log"))
			return
		default:
			// It ran for a while (and was killed, say): the next kernel starts it again.
			logger.Error(err, "Fork server ended; the next kernel starts it again", "log", filepath.Join(f.Dir, "forkserver.log"))
		}
	}
}

// waitConnection waits until a connection is pending on the listening socket ln, without
// accepting it; false when ln's read deadline passed or it was closed. (A listener's own
// RawConn cannot wait to read; a file of its socket can.)
func waitConnection(ln *os.File) bool {
	rc, err := ln.SyscallConn()
	if err != nil {
		return false
	}
	pending := false
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, perr := unix.Poll(fds, 0)
		pending = perr == nil && n > 0
		return pending
	})
	return err == nil && pending
}

// run runs the server with the listening socket as its fd 3 until it exits or ctx ends.
func (f *forkServer) run(ctx context.Context, listener *os.File) error {
	logFile, err := os.OpenFile(filepath.Join(f.Dir, "forkserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	home := filepath.Join(f.Dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(f.Python, filepath.Join(f.Dir, "forkserver.py"))
	cmd.Dir = f.Dir
	// What a kernel pod's process gets from the node besides its own variables (processEnv):
	// the kernels it forks compare their interpreter settings with these.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		fmt.Sprintf("NBKUBE_FORK_SERVER_IDLE=%g", f.Idle.Seconds())}, f.Env...)
	if f.SandboxedOnly {
		cmd.Env = append(cmd.Env, "NBKUBE_FORK_SERVER_SANDBOXED_ONLY=1")
	}
	if ids := f.SandboxIDs; ids[1] > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("NBKUBE_FORK_SERVER_SANDBOX_IDS=%d:%d", ids[0], ids[1]))
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{listener}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", f.Python, err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		err = waitErr
	case <-ctx.Done():
		// Its kernels die with it (they set Pdeathsig); the node stopped their pods first.
		_ = cmd.Process.Kill()
		<-done
		return nil
	}
	if err != nil {
		return fmt.Errorf("fork server exited after %s: %w", time.Since(began).Round(time.Millisecond), err)
	}
	return nil
}
