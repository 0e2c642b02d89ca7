// Package agent is the process that runs in every kernel pod (`nbkube agent -- <argv>`): it
// writes the kernel's connection file from the pod's Secret, starts the kernel, serves health
// and readiness for the kubelet, and passes termination on to the kernel.
//
// The Jupyter messaging bridge (the channels WebSocket over ZeroMQ) is built on this skeleton
// by the kernels issue; today readiness means the kernel process runs and listens on its
// shell port.
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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
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
	// StopGrace is how long the kernel has to exit after SIGTERM.
	StopGrace time.Duration
	// Log receives the agent's structured log.
	Log logr.Logger
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

// Run runs the kernel until it exits or ctx ends (then it is stopped with SIGTERM, and SIGKILL
// after the grace period).
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Argv) == 0 {
		return errors.New("no kernel command: nbkube agent -- <argv>")
	}
	key, err := os.ReadFile(filepath.Join(cfg.SecretDir, "key"))
	if err != nil {
		return fmt.Errorf("kernel key: %w", err)
	}
	info, err := newConnectionInfo(strings.TrimSpace(string(key)), cfg.KernelID)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(cfg.RuntimeDir, "nbkube-kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	connFile := filepath.Join(dir, "kernel-"+cfg.KernelID+".json")
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := os.WriteFile(connFile, data, 0o600); err != nil {
		return err
	}

	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("agent listen: %w", err)
	}
	var running atomic.Bool
	srv := &http.Server{Handler: handler(&running, info), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error(err, "Agent HTTP server stopped")
		}
	}()
	defer srv.Close()

	cmd := exec.Command(cfg.Argv[0], substitute(cfg.Argv[1:], connFile)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = kernelEnv(os.Environ())
	// Its own process group so that stopping reaches the kernel's children too; Pdeathsig so
	// it never outlives the agent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kernel %q: %w", cfg.Argv[0], err)
	}
	running.Store(true)
	cfg.Log.Info("Started kernel", "kernel", cfg.KernelID, "pid", cmd.Process.Pid, "argv", cfg.Argv)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	select {
	case err := <-exited:
		running.Store(false)
		return exitError(err)
	case <-ctx.Done():
	}
	running.Store(false)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	// Asked to stop, the kernel's exit status is no failure of the pod's.
	select {
	case err := <-exited:
		cfg.Log.Info("Stopped kernel", "kernel", cfg.KernelID, "status", err)
	case <-time.After(cfg.StopGrace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := <-exited
		cfg.Log.Info("Killed kernel after the grace period", "kernel", cfg.KernelID, "grace", cfg.StopGrace, "status", err)
	}
	return nil
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

// handler serves /healthz (the agent is alive) and /readyz (the kernel listens). Neither
// tells anything about the kernel beyond that, so the kubelet may probe them without the
// agent's token.
func handler(running *atomic.Bool, info ConnectionInfo) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !running.Load() {
			http.Error(w, "kernel not running", http.StatusServiceUnavailable)
			return
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(info.IP, strconv.Itoa(info.ShellPort)), 500*time.Millisecond)
		if err != nil {
			http.Error(w, "kernel not listening yet", http.StatusServiceUnavailable)
			return
		}
		conn.Close()
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

// newConnectionInfo picks five free loopback ports. The kernel binds them right after; the
// short window in which another process could take one is Jupyter's own, accepted practice.
func newConnectionInfo(key, kernelID string) (ConnectionInfo, error) {
	ports := make([]int, 5)
	listeners := make([]net.Listener, 0, 5)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ConnectionInfo{}, fmt.Errorf("pick kernel port: %w", err)
		}
		listeners = append(listeners, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ConnectionInfo{
		ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2], ControlPort: ports[3], HBPort: ports[4],
		IP: "127.0.0.1", Key: key, Transport: "tcp", SignatureScheme: "hmac-sha256", KernelName: kernelID,
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
		if !strings.HasPrefix(kv, "NBKUBE_") {
			out = append(out, kv)
		}
	}
	return out
}
