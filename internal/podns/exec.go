package podns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// execStart asks the init's main thread, the one without capabilities, to start an exec'd
// command; the reply says what it started.
type execStart struct {
	req   *Exec
	reply chan execStarted
}

type execStarted struct {
	pid int
	// out is the read end of the pipe the command writes its stdout and stderr to.
	out *os.File
	// status receives the command's wait status once the init has reaped it.
	status chan syscall.WaitStatus
	err    error
}

// defaultExecTimeout bounds an exec that names no timeout.
const defaultExecTimeout = time.Minute

// answerExec runs an exec request's command through the init's main thread, collects the
// start of its output, waits for its end (killing its process group at the timeout) and
// answers.
func answerExec(conn *net.UnixConn, req dialRequest, execs chan<- execStart) {
	rep := dialReply{ID: req.ID}
	res, err := runExec(req.Exec, execs)
	if err != nil {
		rep.Error = err.Error()
	} else {
		rep.Exec = &res
	}
	b, _ := json.Marshal(rep)
	_, _, _ = conn.WriteMsgUnix(b, nil, nil)
}

func runExec(e *Exec, execs chan<- execStart) (ExecResult, error) {
	reply := make(chan execStarted, 1)
	execs <- execStart{req: e, reply: reply}
	started := <-reply
	if started.err != nil {
		return ExecResult{}, started.err
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = defaultExecTimeout
	}
	timedOut := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		close(timedOut)
		_ = syscall.Kill(-started.pid, syscall.SIGKILL)
	})
	out, _ := io.ReadAll(io.LimitReader(started.out, MaxExecOutput))
	// The rest is read and dropped, or a command that writes much would block on the pipe.
	_, _ = io.Copy(io.Discard, started.out)
	started.out.Close()
	ws := <-started.status
	timer.Stop()
	res := ExecResult{Output: out, ExitCode: ws.ExitStatus()}
	if ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
	}
	select {
	case <-timedOut:
		res.TimedOut = true
	default:
	}
	return res, nil
}

// startExec starts an exec'd command. It runs on the init's main thread.
func startExec(e *Exec) execStarted {
	path, err := lookPath(e.Argv[0], e.Env)
	if err != nil {
		return execStarted{err: err}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return execStarted{err: err}
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		r.Close()
		w.Close()
		return execStarted{err: err}
	}
	dir := e.Dir
	if dir == "" {
		dir = "/"
	}
	proc, err := os.StartProcess(path, e.Argv, &os.ProcAttr{
		Dir:   dir,
		Env:   e.Env,
		Files: []*os.File{devNull, w, w},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	devNull.Close()
	w.Close()
	if err != nil {
		r.Close()
		return execStarted{err: fmt.Errorf("exec %s: %w", e.Argv[0], err)}
	}
	started := execStarted{pid: proc.Pid, out: r, status: make(chan syscall.WaitStatus, 1)}
	// The init reaps it (Wait4 of any child); the Process only holds a pidfd.
	_ = proc.Release()
	return started
}

// lookPath finds name as a shell would with env's PATH, inside the sandbox.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: %w", name, errNotFound)
}

var errNotFound = errors.New("executable file not found in $PATH")
