package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
)

func TestTerminalMain_ServesTheShellToTokenHoldersAndEndsWithIt(t *testing.T) {
	// The pod sets no terminal type: the agent gives one.
	t.Setenv("TERM", "")
	secrets, home := t.TempDir(), t.TempDir()
	const token = "terminal-token-for-the-test"
	if err := os.WriteFile(filepath.Join(secrets, agentapi.SecretKeyToken), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := map[string]string{agentapi.EnvAgentPort: strconv.Itoa(port), agentapi.EnvPodIP: "127.0.0.1",
		agentapi.EnvSecretDir: secrets, "HOME": home}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, "nbkube-agent", []string{agentapi.CommandTerminal, "--", "/bin/sh"}, func(k string) string { return env[k] }, io.Discard)
	}()
	base := "127.0.0.1:" + strconv.Itoa(port)
	waitUntil(t, "the agent to listen", func() bool {
		resp, err := http.Get("http://" + base + agentapi.PathReadyz)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	// Without the token: refused, the socket and the status alike.
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+base+agentapi.PathTerminal, nil); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a WebSocket without the token: %v, %v", resp, err)
	}
	auth := http.Header{"Authorization": {agentapi.AuthScheme + " " + token}}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+base+agentapi.PathTerminal, auth)
	if err != nil {
		t.Fatal(err)
	}
	s := &termSession{t, ws}
	if msg := s.next(); msg[0] != "setup" {
		t.Fatalf("first message %v", msg)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+base+agentapi.PathStatus, nil)
	req.Header = auth
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st agentapi.TerminalStatus
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Connections != 1 || st.LastActivity.IsZero() {
		t.Errorf("status %+v, %v; want one connection and a last activity", st, err)
	}
	// The shell runs in the home with a terminal type xterm.js renders, and nothing of the
	// agent's settings.
	s.send("stdin", "echo \"<$TERM|$(pwd)|$"+agentapi.EnvSecretDir+">\"; exit\n")
	s.until("<xterm-256color|" + home + "|>")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the agent ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not end with its shell")
	}
}

// A pod that names no shell gets $SHELL, else bash where the image has it, else sh.
func TestDefaultShell_IsShellElseBashElseSh(t *testing.T) {
	for _, tc := range []struct {
		shell string
		bash  bool
		want  string
	}{
		{shell: "/usr/bin/zsh", bash: true, want: "/usr/bin/zsh"},
		{bash: true, want: "/bin/bash"},
		{want: "/bin/sh"},
	} {
		getenv := func(k string) string {
			if k == "SHELL" {
				return tc.shell
			}
			return ""
		}
		exists := func(p string) bool { return p == "/bin/bash" && tc.bash }
		if got := defaultShell(getenv, exists); got != tc.want {
			t.Errorf("SHELL %q, bash %v: %s, want %s", tc.shell, tc.bash, got, tc.want)
		}
	}
	// The check of the image's files: a directory is no shell.
	if !isFile("/bin/sh") || isFile("/") || isFile("/no/such/shell") {
		t.Error("isFile is wrong about /bin/sh, / or a missing file")
	}
}
