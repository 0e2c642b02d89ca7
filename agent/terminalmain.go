package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// TerminalMain is `nbkube-agent terminal [flags] -- SHELL ARGS...`: a terminal's agent (see
// agentapi.CommandTerminal). It returns once the shell has ended, or ctx has, after which it
// hangs the shell up.
func TerminalMain(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name+" "+agentapi.CommandTerminal, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the shell's working directory (default: HOME)")
	grace := fs.Duration("stop-grace", 5*time.Second, "time the shell's processes have to exit after a hang-up before they are killed")
	verbosity := fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)})).WithName("terminal")
	port := getenv(agentapi.EnvAgentPort)
	if port == "" {
		return errors.New(agentapi.EnvAgentPort + " is not set")
	}
	shell := fs.Args()
	if len(shell) == 0 {
		shell = []string{defaultShell(getenv, isFile)}
	}
	wd := *dir
	if wd == "" {
		wd = getenv("HOME")
	}
	err := RunTerminal(ctx, TerminalConfig{
		Listen: net.JoinHostPort(getenv(agentapi.EnvPodIP), port), SecretDir: getenv(agentapi.EnvSecretDir),
		Shell: shell, Dir: wd, Env: terminalEnv(os.Environ()), StopGrace: *grace, Log: log,
	})
	if err != nil && getenv(agentapi.EnvTerminationLog) != "" {
		_ = os.WriteFile(getenv(agentapi.EnvTerminationLog), []byte(err.Error()), 0o644)
	}
	return err
}

// defaultShell is the shell of a terminal whose pod names none: $SHELL where the image sets
// it, as Jupyter's terminals run, else bash where the image has it (Jupyter's images do, and
// set no $SHELL: a user expects its line editing and history), else the POSIX shell every
// image has.
func defaultShell(getenv func(string) string, exists func(string) bool) string {
	if s := getenv("SHELL"); s != "" {
		return s
	}
	if exists("/bin/bash") {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// isFile says whether p names a file that is not a directory.
func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// terminalEnv is the shell's environment: the pod's, with a terminal type xterm.js renders,
// and without the agent's own settings.
func terminalEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	term := false
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		switch {
		case k == agentapi.EnvSecretDir || k == agentapi.EnvAgentPort || (k == "TERM" && v == ""):
			continue
		case k == "TERM":
			term = true
		}
		out = append(out, e)
	}
	if !term {
		out = append(out, "TERM=xterm-256color")
	}
	return out
}

// TerminalConfig is what RunTerminal serves.
type TerminalConfig struct {
	// Listen is the agent's address; SecretDir holds the token clients present.
	Listen, SecretDir string
	// Shell is the command line run on the pty, in Dir with Env.
	Shell []string
	Dir   string
	Env   []string
	// StopGrace is how long the shell's processes have after a hang-up.
	StopGrace time.Duration
	Log       logr.Logger
}

// RunTerminal starts the shell and serves it until it ends or ctx does.
func RunTerminal(ctx context.Context, cfg TerminalConfig) error {
	token, err := os.ReadFile(filepath.Join(cfg.SecretDir, agentapi.SecretKeyToken))
	if err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("terminal listen: %w", err)
	}
	t, err := StartTerminal(cfg.Shell, cfg.Dir, cfg.Env, cfg.Log)
	if err != nil {
		l.Close()
		return fmt.Errorf("starting %s on a terminal: %w", cfg.Shell[0], err)
	}
	cfg.Log.Info("Started terminal", "shell", cfg.Shell, "dir", cfg.Dir)
	stop := make(chan struct{}, 1)
	srv := &http.Server{Handler: terminalHandler(t, []byte(strings.TrimSpace(string(token))), stop), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	select {
	case <-t.Ended():
	case <-ctx.Done():
		t.Stop(cfg.StopGrace)
	case <-stop:
		t.Stop(cfg.StopGrace)
	}
	cfg.Log.Info("Terminal ended")
	shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return nil
}

// terminalUpgrader takes the API server's WebSocket, authenticated by the agent token (the
// browser's origin was checked there).
var terminalUpgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func terminalHandler(t *Terminal, token []byte, stop chan<- struct{}) http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("GET "+agentapi.PathHealthz, ok)
	mux.HandleFunc("GET "+agentapi.PathReadyz, ok)
	mux.Handle("GET "+agentapi.PathStatus, authorizedBy(token, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(agentapi.TerminalStatus{LastActivity: t.LastActivity().UTC(), Connections: t.Clients()})
	}))
	mux.Handle("GET "+agentapi.PathTerminal, authorizedBy(token, func(w http.ResponseWriter, r *http.Request) {
		ws, err := terminalUpgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		t.Attach(ws)
	}))
	mux.Handle("POST "+agentapi.PathShutdown, authorizedBy(token, func(w http.ResponseWriter, _ *http.Request) {
		select {
		case stop <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return mux
}
