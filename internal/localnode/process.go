package localnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// process is one run of a container: a host process that leads its own process group, so that
// everything it starts is signalled with it.
type process struct {
	pid       int
	startedAt time.Time
	logPath   string
	// done is closed once the process has exited and been reaped; exitCode is set before.
	done     chan struct{}
	exitCode int32
	// exitErr is set when the process could not be waited for.
	exitErr error
}

// processSpec is what starting a process takes.
type processSpec struct {
	cmd     hostCommand
	env     []string
	logPath string
}

// startProcess starts a container's process with stdout and stderr appended to its log file.
// Pdeathsig kills the process when nbkube dies, however it dies (even by SIGKILL), so no
// container outlives the node. It reaches the process itself only: a process that starts others
// (`nbkube agent` and its kernel) must set Pdeathsig on them in turn. Pdeathsig fires when the OS
// thread that forked exits, and the Go runtime retires a thread only when a goroutine exits while
// holding runtime.LockOSThread, which nothing in nbkube does (golang.org/issue/27505).
// onExit runs after the process is reaped.
func startProcess(spec processSpec, clk clock.Clock, onExit func(*process)) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(spec.logPath), 0o755); err != nil {
		return nil, fmt.Errorf("creating the log directory: %w", err)
	}
	logFile, err := os.OpenFile(spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log: %w", err)
	}
	// The child has its own copy of the descriptor; ours is not needed once it started.
	defer logFile.Close()
	cmd := &exec.Cmd{
		Path: spec.cmd.path,
		Args: spec.cmd.argv,
		// Never nil: a nil Env would hand the container nbkube's whole environment.
		Env:         append([]string{}, spec.env...),
		Dir:         spec.cmd.dir,
		Stdout:      logFile,
		Stderr:      logFile,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{pid: cmd.Process.Pid, startedAt: clk.Now(), logPath: spec.logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.exitCode, p.exitErr = exitCode(cmd.ProcessState, err)
		// Like a container's init process, the leader takes the rest of its group with it.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		close(p.done)
		onExit(p)
	}()
	return p, nil
}

// exitCode reports a container's exit code the way container runtimes do: 128+N for death by
// signal N.
func exitCode(ps *os.ProcessState, err error) (int32, error) {
	if ps == nil {
		return 128, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int32(128 + ws.Signal()), nil
	}
	return int32(ps.ExitCode()), nil
}

// exited tells whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process's group.
func (p *process) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(-p.pid, sig)
	}
}

// stop sends SIGTERM to the process group, SIGKILL once grace has passed, and returns when the
// process has exited.
func (p *process) stop(grace time.Duration, clk clock.Clock) {
	p.signal(syscall.SIGTERM)
	t := clk.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C():
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// Limits of a termination message, as the kubelet's.
const (
	maxTerminationMessageBytes = 4096
	maxLogTailLines            = 80
	maxLogTailBytes            = 2048
)

// readTerminationMessage reads at most maxTerminationMessageBytes of a terminationMessagePath.
func readTerminationMessage(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessageBytes))
	return string(b)
}

// logTail returns the last lines of a log, bounded like the kubelet's FallbackToLogsOnError
// message: at most 80 lines and 2 KiB.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-maxLogTailBytes, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-maxLogTailLines, 0):], "\n")
}
