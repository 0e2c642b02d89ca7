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

	"github.com/nbkube/nbkube/internal/podns"
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
	// control reaches into the process's sandbox; nil when it has none.
	control *podns.Control
}

// processSpec is what starting a process takes: a host command, or a sandbox.
type processSpec struct {
	cmd     hostCommand
	env     []string
	sandbox *podns.Spec
	// spawner starts the sandbox.
	spawner *podns.Spawner
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
	var cmd *exec.Cmd
	var sandbox *podns.Command
	if spec.sandbox != nil {
		if err := os.RemoveAll(spec.sandbox.Root); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(spec.sandbox.Root, 0o700); err != nil {
			return nil, err
		}
		if sandbox, err = spec.spawner.NewCommand(*spec.sandbox); err != nil {
			return nil, err
		}
		cmd = sandbox.Cmd
	} else {
		cmd = &exec.Cmd{
			Path: spec.cmd.path,
			Args: spec.cmd.argv,
			// Never nil: a nil Env would hand the container nbkube's whole environment.
			Env:         append([]string{}, spec.env...),
			Dir:         spec.cmd.dir,
			SysProcAttr: &syscall.SysProcAttr{},
		}
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	// proc is the started process; wait waits for it, its error being that of waiting.
	var proc *os.Process
	var wait func() (*os.ProcessState, error)
	if sandbox != nil {
		if err := sandbox.Start(); err != nil {
			sandbox.Close()
			return nil, err
		}
		proc, wait = sandbox.Process(), sandbox.Wait
	} else {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		proc, wait = cmd.Process, func() (*os.ProcessState, error) {
			err := cmd.Wait()
			if _, ok := errors.AsType[*exec.ExitError](err); ok {
				err = nil
			}
			return cmd.ProcessState, err
		}
	}
	p := &process{pid: proc.Pid, startedAt: clk.Now(), logPath: spec.logPath, done: make(chan struct{})}
	if sandbox != nil {
		if p.control, err = sandbox.Started(); err != nil {
			_ = proc.Kill()
			_, _ = wait()
			return nil, err
		}
	}
	go func() {
		ps, err := wait()
		p.exitCode, p.exitErr = exitCode(ps, err)
		// Like a container's init process, the leader takes the rest of its group with it.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		if p.control != nil {
			_ = p.control.Close()
		}
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
