package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// forkTimeout bounds asking the fork server for a kernel: its first request waits for it to
// import ipykernel, which on a busy node takes a few seconds. An agent that gets no answer
// hangs up (the server then kills what it forked for it) and starts the kernel itself.
const forkTimeout = 30 * time.Second

// errNotForked marks the fork server's refusals: the kernel is not one it can fork (another
// interpreter, other interpreter settings) and starts as a process of its own.
var errNotForked = errors.New("not forked")

// errNotIPyKernel marks a kernel command that is not ipykernel's, which the fork server is
// not asked for.
var errNotIPyKernel = fmt.Errorf("%w: not ipykernel", errNotForked)

// forkedKernel is a kernel process the node's fork server forked: its parent is the server,
// which reports its exit over conn; closing conn before that kills it.
type forkedKernel struct {
	pid    int
	conn   *net.UnixConn
	stderr sync.WaitGroup
}

// forkRequest is what the fork server is asked for (see internal/localnode/forkserver.py).
type forkRequest struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Cwd   string   `json:"cwd"`
	Umask int      `json:"umask"`
}

type forkReply struct {
	PID     *int    `json:"pid"`
	Refused *string `json:"refused"`
	Exit    *int    `json:"exit"`
}

// forkKernel asks the fork server at socket for the kernel argv with env, in dir, its stdout
// on stdout and its stderr copied to stderr. An error wrapping errNotForked is a refusal;
// any error leaves no process behind.
func forkKernel(socket string, argv, env []string, dir string, stdout *os.File, stderr io.Writer) (*forkedKernel, error) {
	if !agentapi.IPyKernelCommand(argv) {
		// Not worth asking (nor starting a server that imports ipykernel for).
		return nil, fmt.Errorf("%w: not `python -m ipykernel_launcher`", errNotIPyKernel)
	}
	// The server compares the real path of what the agent would run with its own.
	python, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	umask, err := currentUmask()
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(forkRequest{Argv: append([]string{python}, argv[1:]...), Env: env, Cwd: dir, Umask: umask})
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("unixpacket", socket, forkTimeout)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.UnixConn)
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close()
		}
	}()
	_ = conn.SetDeadline(time.Now().Add(forkTimeout))
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	errRead, errWrite, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer errWrite.Close()
	defer func() {
		if !ok {
			errRead.Close()
		}
	}()
	rights := unix.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(errWrite.Fd()))
	if _, _, err := conn.WriteMsgUnix(req, rights, nil); err != nil {
		return nil, err
	}
	rep, err := readForkReply(conn)
	if err != nil {
		return nil, err
	}
	switch {
	case rep.Refused != nil:
		return nil, fmt.Errorf("%w: %s", errNotForked, *rep.Refused)
	case rep.PID == nil || *rep.PID <= 0:
		return nil, errors.New("the fork server answered without a pid")
	}
	_ = conn.SetDeadline(time.Time{})
	k := &forkedKernel{pid: *rep.PID, conn: conn}
	k.stderr.Go(func() {
		_, _ = io.Copy(stderr, errRead)
		errRead.Close()
	})
	ok = true
	return k, nil
}

func readForkReply(conn *net.UnixConn) (forkReply, error) {
	buf := make([]byte, 4096)
	n, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	if err != nil {
		return forkReply{}, err
	}
	if n == 0 {
		return forkReply{}, io.EOF
	}
	var rep forkReply
	if err := json.Unmarshal(buf[:n], &rep); err != nil {
		return forkReply{}, fmt.Errorf("the fork server's answer: %w", err)
	}
	return rep, nil
}

// wait waits for the kernel to exit and returns its status as exec.Cmd's Wait would: nil, or
// a *forkExit. A server that went away without telling took the kernel with it (Pdeathsig).
func (k *forkedKernel) wait() error {
	defer func() { _ = k.conn.Close() }()
	rep, err := readForkReply(k.conn)
	var status error
	switch {
	case err != nil:
		status = &forkExit{status: syscall.WaitStatus(syscall.SIGKILL)}
	case rep.Exit != nil && *rep.Exit != 0:
		status = &forkExit{status: syscall.WaitStatus(*rep.Exit)}
	}
	// The kernel's stderr ends with it, or with the processes it left behind.
	k.stderr.Wait()
	return status
}

// forkExit is the end of a forked kernel that did not exit with 0, as *exec.ExitError is
// for a child of the agent's.
type forkExit struct{ status syscall.WaitStatus }

func (e *forkExit) Error() string {
	if e.status.Signaled() {
		return "signal: " + e.status.Signal().String()
	}
	return "exit status " + strconv.Itoa(e.status.ExitStatus())
}

// waitStatus is the wait status inside the error of a kernel process's wait.
func waitStatus(err error) (syscall.WaitStatus, bool) {
	var fe *forkExit
	if errors.As(err, &fe) {
		return fe.status, true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws, ok := ee.Sys().(syscall.WaitStatus)
		return ws, ok
	}
	return 0, false
}

// currentUmask reads the process's umask without changing it (umask(2) can only set it, and
// setting it back leaves a moment when files other goroutines create get another one).
func currentUmask() (int, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Umask:"); ok {
			m, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32)
			return int(m), err
		}
	}
	return 0, errors.New("no Umask in /proc/self/status")
}
