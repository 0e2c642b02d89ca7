package testenv

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/jpserver"
)

// LocalConfig is how StartLocal runs `nbkube local`.
type LocalConfig struct {
	// Bin is the nbkube binary; nbkube-agent must lie beside it or on PATH (BuildCommands
	// builds both).
	Bin string
	// DataDir and Root are its --data-dir and --root.
	DataDir, Root string
	// Args are its other flags, after --data-dir, --root and --kube-bin-dir (KubeBinDir):
	// --listen, --token, --auth and the like.
	Args []string
	// Env is added to this process's environment for it. Unless Env names
	// JUPYTER_RUNTIME_DIR, the runtime file goes to jupyter-runtime/ in DataDir, not into
	// the home directory.
	Env []string
	// LogPath is the file that gets its standard output and error, one after the other as
	// they come; empty discards them.
	LogPath string
	// ReadyTimeout bounds the wait until it is ready: 3 minutes when zero.
	ReadyTimeout time.Duration
}

// Local is one `nbkube local` that StartLocal ran and found ready.
type Local struct {
	// URL is the Jupyter API's base URL, ending in "/", without the token; Token is its token.
	URL, Token string
	// Kubeconfig is the kubeconfig of its control plane, as cluster admin.
	Kubeconfig string
	// Info is its Jupyter server info file, as `jupyter server list` reads it.
	Info jpserver.Info
	// Cmd is the process.
	Cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// StartLocal runs `nbkube local` for the test and waits until it is ready; the test fails
// when it is not. Its output goes to cfg.LogPath, by default a file in a temporary directory
// of the test's. When the test ends, it is stopped as Ctrl-C stops it unless the test did so,
// the processes it had started are killed should any be left, and on failure its output goes
// to the test's log.
func StartLocal(t testing.TB, cfg LocalConfig) *Local {
	t.Helper()
	if cfg.LogPath == "" {
		cfg.LogPath = filepath.Join(t.TempDir(), "nbkube-local.log")
	}
	l, err := LaunchLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-l.exited:
		default:
			// Pdeathsig takes its children along, but a test that stopped one of them
			// (SIGSTOP) or failed half-way must leave nothing running.
			procs := Descendants(l.PID())
			if err := l.Stop(); err != nil {
				t.Errorf("nbkube local: %v", err)
			}
			for _, p := range procs {
				_ = syscall.Kill(p, syscall.SIGCONT)
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("nbkube local's output (%s):\n%s", l.logPath, l.LogExcerpt())
		}
	})
	return l
}

// LaunchLocal is StartLocal for a program that is not a test (the benchmarks): it returns
// an error where StartLocal fails the test, and stopping it is the caller's part.
//
// Ready means what nbkube local says by its server info file: the control plane, the
// controllers, the local node and the API server are up, the file names the API's URL and
// token, and the API answers GET /api/status with that token.
func LaunchLocal(cfg LocalConfig) (*Local, error) {
	runtimeDir := envValue(cfg.Env, "JUPYTER_RUNTIME_DIR")
	env := append(os.Environ(), cfg.Env...)
	if runtimeDir == "" {
		runtimeDir = filepath.Join(cfg.DataDir, "jupyter-runtime")
		env = append(env, "JUPYTER_RUNTIME_DIR="+runtimeDir)
	}
	args := append([]string{"local", "--data-dir", cfg.DataDir, "--root", cfg.Root, "--kube-bin-dir", KubeBinDir()}, cfg.Args...)
	cmd := exec.Command(cfg.Bin, args...)
	cmd.Env = env
	// Without a log file, the output goes to /dev/null (exec's nil).
	var log *os.File
	if cfg.LogPath != "" {
		var err error
		if log, err = os.Create(cfg.LogPath); err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = log, log
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	l := &Local{Cmd: cmd, Kubeconfig: filepath.Join(cfg.DataDir, "kubeconfig"), logPath: cfg.LogPath, exited: make(chan struct{})}
	go func() {
		l.waitErr = cmd.Wait()
		log.Close()
		close(l.exited)
	}()
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	if err := l.awaitReady(filepath.Join(runtimeDir, jpserver.FileName(cmd.Process.Pid)), timeout); err != nil {
		l.Kill()
		return nil, fmt.Errorf("nbkube local in %s: %w\n%s", cfg.DataDir, err, l.LogExcerpt())
	}
	return l, nil
}

// awaitReady waits until the server info file at path names the API and the API answers.
func (l *Local) awaitReady(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 10 * time.Second}
	status := "no server info file " + path
	for {
		select {
		case <-l.exited:
			return fmt.Errorf("exited before it was ready: %w", cmp.Or(l.waitErr, errors.New("exit status 0")))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s: %s", timeout, status)
		}
		if l.URL == "" {
			// The file appears whole (jpserver.Write renames it into place).
			if data, err := os.ReadFile(path); err == nil {
				if err := json.Unmarshal(data, &l.Info); err != nil {
					return fmt.Errorf("server info file %s: %w", path, err)
				}
				l.URL, l.Token = strings.TrimSuffix(l.Info.URL, "/")+"/", l.Info.Token
			}
		}
		if l.URL != "" {
			if status = l.answers(hc); status == "" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answers is "" when GET /api/status answers 200, else what it answered.
func (l *Local) answers(hc *http.Client) string {
	req, err := http.NewRequest(http.MethodGet, l.URL+"api/status", nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "token "+l.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return "GET /api/status: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("GET /api/status: %s", resp.Status)
	}
	return ""
}

// PID is the process id of nbkube local.
func (l *Local) PID() int { return l.Cmd.Process.Pid }

// Exited is closed once the process has exited; ExitErr then says how.
func (l *Local) Exited() <-chan struct{} { return l.exited }

// ExitErr is the process's exit error (nil for status 0), once Exited is closed.
func (l *Local) ExitErr() error {
	<-l.exited
	return l.waitErr
}

// Stop stops nbkube local as Ctrl-C does and waits for it to exit, then returns its exit
// error. After a minute it kills it and says so.
func (l *Local) Stop() error {
	if err := l.Cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-l.exited:
		return l.waitErr
	case <-time.After(time.Minute):
		l.Kill()
		return errors.New("did not stop within a minute of SIGINT: killed")
	}
}

// Kill kills nbkube local (SIGKILL) and waits for it to exit.
func (l *Local) Kill() {
	_ = l.Cmd.Process.Kill()
	<-l.exited
}

// Log is its output so far, standard output and error as they came ("" when discarded).
func (l *Local) Log() string {
	if l.logPath == "" {
		return ""
	}
	data, _ := os.ReadFile(l.logPath)
	return string(data)
}

// LogExcerpt is the start and the end of its output, for a failure message.
func (l *Local) LogExcerpt() string {
	log := l.Log()
	if len(log) > 16000 {
		return log[:4000] + "\n...\n" + log[len(log)-12000:]
	}
	return log
}

// BuildCommands builds the commands of cmd/ that are named (nbkube, nbkube-agent) into dir.
func BuildCommands(dir string, names ...string) error {
	for _, name := range names {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/nbkube/nbkube/cmd/"+name).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// envValue is the value of name in env (KEY=value entries, the last one winning).
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
