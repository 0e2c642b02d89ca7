package agent

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// rstScript renders the reST on its stdin with docutils; see its header for the exit codes.
//
//go:embed rst.py
var rstScript string

// Exit codes of rstScript.
const (
	rstExitInvalid  = 2
	rstExitNoModule = 3
)

// RSTConfig is what the reStructuredText renderer needs; cmd/ fills it from the pod's
// environment.
type RSTConfig struct {
	// Listen is the address of the renderer's HTTP server, pod IP and agent port.
	Listen string
	// SecretDir holds the renderer's Secret: its token.
	SecretDir string
	// Python are the interpreters to try, in order: the first that imports docutils renders.
	Python []string
	// Timeout bounds one rendering; the interpreter's process group is killed after it.
	Timeout time.Duration
	// Concurrency bounds the renderings at once; a request waits for a slot at most
	// Timeout, then is refused with 503.
	Concurrency int
	// TerminationLog, when set, receives why the renderer could not start.
	TerminationLog string
	// Log receives the renderer's structured log; never the reST or the HTML.
	Log logr.Logger
}

func (c *RSTConfig) setDefaults() {
	if len(c.Python) == 0 {
		c.Python = []string{"python3"}
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 2
	}
}

// RenderRSTMain is `nbkube-agent render-rst [flags]`: flags, then the pod's environment,
// then RunRSTRenderer. It logs JSON lines to stderr.
func RenderRSTMain(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name+" "+agentapi.CommandRenderRST, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var python []string
	fs.Func("python", "a Python interpreter to try (repeatable; the first that imports docutils renders; default python3)", func(s string) error {
		python = append(python, s)
		return nil
	})
	timeout := fs.Duration("timeout", 10*time.Second, "time one rendering may take")
	concurrency := fs.Int("concurrency", 2, "renderings at once")
	verbosity := fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	port := getenv(agentapi.EnvAgentPort)
	if port == "" {
		return errors.New(agentapi.EnvAgentPort + " is not set")
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)})).WithName("rst-renderer")
	return RunRSTRenderer(ctx, RSTConfig{
		Listen:         net.JoinHostPort(getenv(agentapi.EnvPodIP), port),
		SecretDir:      getenv(agentapi.EnvSecretDir),
		Python:         python,
		Timeout:        *timeout,
		Concurrency:    *concurrency,
		TerminationLog: getenv(agentapi.EnvTerminationLog),
		Log:            log,
	})
}

// RunRSTRenderer serves PathRenderRST until ctx ends. It first finds an interpreter with
// docutils, and fails (saying so in the termination log) when there is none.
func RunRSTRenderer(ctx context.Context, cfg RSTConfig) error {
	cfg.setDefaults()
	r, err := newRSTRenderer(ctx, cfg)
	if err != nil {
		if cfg.TerminationLog != "" {
			_ = os.WriteFile(cfg.TerminationLog, []byte(err.Error()), 0o644)
		}
		return err
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("renderer listen: %w", err)
	}
	srv := &http.Server{Handler: r.handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	cfg.Log.Info("Rendering reStructuredText", "listen", cfg.Listen, "python", r.python)
	select {
	case err := <-errc:
		return fmt.Errorf("renderer serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.Timeout+time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

type rstRenderer struct {
	cfg    RSTConfig
	token  []byte
	python string
	slots  chan struct{}
}

func newRSTRenderer(ctx context.Context, cfg RSTConfig) (*rstRenderer, error) {
	token, err := os.ReadFile(filepath.Join(cfg.SecretDir, agentapi.SecretKeyToken))
	if err != nil {
		return nil, fmt.Errorf("renderer token: %w", err)
	}
	r := &rstRenderer{cfg: cfg, token: bytes.TrimSpace(token), slots: make(chan struct{}, cfg.Concurrency)}
	if len(r.token) == 0 {
		return nil, errors.New("renderer token: empty")
	}
	for _, p := range cfg.Python {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		check, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = exec.CommandContext(check, path, "-I", "-c", "import docutils.core").Run()
		cancel()
		if err == nil {
			r.python = path
			return r, nil
		}
	}
	return nil, fmt.Errorf("no Python interpreter with docutils among %s", strings.Join(cfg.Python, ", "))
}

// handler serves the probes without a token (they tell nothing) and renders for the holder
// of the token only: the API server.
func (r *rstRenderer) handler() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("GET "+agentapi.PathHealthz, ok)
	// Ready as soon as it serves: an interpreter with docutils was found before.
	mux.HandleFunc("GET "+agentapi.PathReadyz, ok)
	mux.Handle("POST "+agentapi.PathRenderRST, authorizedBy(r.token, r.serveRender))
	return mux
}

// rstError is a refusal of the renderer, answered with its status.
type rstError struct {
	status  int
	message string
}

func (e *rstError) Error() string { return e.message }

func (r *rstRenderer) serveRender(w http.ResponseWriter, req *http.Request) {
	src, ok := readBody(w, req, agentapi.MaxRSTBytes, "reST")
	if !ok {
		return
	}
	html, err := r.render(req.Context(), src)
	if err != nil {
		if req.Context().Err() != nil {
			return // The caller went away.
		}
		var re *rstError
		if !errors.As(err, &re) {
			r.cfg.Log.Error(err, "Rendering failed")
			re = &rstError{status: http.StatusInternalServerError, message: "rendering failed"}
		}
		writeError(w, re.status, re.message)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(html)
}

// render runs docutils in a process of its own: a parser fed with anyone's input is kept
// apart from the server, bounded in time (its process group is killed) and in output.
func (r *rstRenderer) render(ctx context.Context, src []byte) ([]byte, error) {
	wait := time.NewTimer(r.cfg.Timeout)
	defer wait.Stop()
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-wait.C:
		return nil, &rstError{status: http.StatusServiceUnavailable, message: "the renderer is busy"}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeoutCause(ctx, r.cfg.Timeout, errRenderTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.python, "-I", "-B", "-c", rstScript)
	cmd.Dir = "/"
	cmd.Env = []string{"LANG=C.UTF-8", "PYTHONIOENCODING=utf-8"}
	cmd.Stdin = bytes.NewReader(src)
	out := &boundedBuffer{max: agentapi.MaxRSTHTMLBytes, overflow: cancel}
	errOut := &boundedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Output still held open by a killed group's stray process does not hold the answer.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case out.over:
		return nil, &rstError{status: http.StatusRequestEntityTooLarge, message: fmt.Sprintf("the HTML would be larger than %d bytes", agentapi.MaxRSTHTMLBytes)}
	case errors.Is(context.Cause(ctx), errRenderTimeout):
		return nil, &rstError{status: http.StatusServiceUnavailable, message: fmt.Sprintf("rendering did not finish within %s", r.cfg.Timeout)}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		msg := strings.TrimSpace(errOut.String())
		switch exit.ExitCode() {
		case rstExitInvalid:
			return nil, &rstError{status: http.StatusBadRequest, message: "Invalid RST: " + msg}
		case rstExitNoModule:
			return nil, &rstError{status: http.StatusServiceUnavailable, message: msg}
		}
		return nil, fmt.Errorf("docutils exited with %d: %s", exit.ExitCode(), msg)
	}
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var errRenderTimeout = errors.New("rendering timed out")

// boundedBuffer keeps at most max bytes. Past them it calls overflow (which stops the writer)
// and refuses more, or without overflow drops the rest.
type boundedBuffer struct {
	bytes.Buffer
	max      int
	over     bool
	overflow func()
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) <= b.max {
		return b.Buffer.Write(p)
	}
	if b.overflow == nil {
		// Keep the start and let the writer go on: it is only a message.
		b.Buffer.Write(p[:b.max-b.Len()])
		return len(p), nil
	}
	if !b.over {
		b.overflow()
	}
	b.over = true
	return 0, errors.New("output too large")
}

func writeError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(agentapi.ErrorBody{Message: message})
}
