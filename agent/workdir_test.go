package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// setWorkDir asks the agent, through the API server's client, to move its kernel.
func (ra *runningAgent) setWorkDir(t *testing.T, w agentapi.WorkDir) error {
	t.Helper()
	host, port, _ := net.SplitHostPort(ra.addr)
	p, _ := strconv.Atoi(port)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return agentclient.New().SetWorkDir(ctx, agentclient.Endpoint{Host: host, Port: p, Token: testToken}, w)
}

// postWorkDir sends body to PathWorkDir with token and returns the status and body of the
// answer.
func (ra *runningAgent) postWorkDir(t *testing.T, token, body string) (int, string) {
	t.Helper()
	return ra.post(t, token, agentapi.PathWorkDir, body)
}

// post posts body to the agent's path with token, and returns the answer's status and body.
func (ra *runningAgent) post(t *testing.T, token, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+ra.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", agentapi.AuthScheme+" "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// workDir makes a directory for a kernel to move to inside the kernel's starting directory
// base, and returns it as a PathWorkDir request names it and as the kernel sees it.
func workDir(t *testing.T, base string) (rel, abs string) {
	t.Helper()
	rel = filepath.Join("my notebooks", "2026")
	if err := os.MkdirAll(filepath.Join(base, rel), 0o755); err != nil {
		t.Fatal(err)
	}
	return rel, filepath.Join(base, rel)
}

// startIn starts an agent whose kernel starts in a new directory, and returns both.
func startIn(t *testing.T) (*runningAgent, string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return startAgent(t, func(c *Config) { c.WorkDir = base }), base
}

// chdirCode is the Python that moves a kernel to dir (a Go quoted string is a Python one).
func chdirCode(dir string) string { return fmt.Sprintf("import os; os.chdir(%q)", dir) }

// cwd is the working directory of the kernel process that c talks to.
func (c *client) cwd() string {
	c.t.Helper()
	return strings.TrimSuffix(c.execute("import os; print(os.getcwd())").streams(), "\n")
}

func TestAgent_WorkDirMovesTheRunningKernelUnseen(t *testing.T) {
	ra, base := startIn(t)
	rel, dir := workDir(t, base)
	if err := ra.setWorkDir(t, agentapi.WorkDir{Dir: rel, Code: chdirCode(rel)}); err != nil {
		t.Fatalf("set the working directory: %v", err)
	}
	r := ra.connect(t, "s", false).execute("import os; print(os.getcwd())")
	if got := strings.TrimSuffix(r.streams(), "\n"); got != dir {
		t.Errorf("the kernel runs in %q, want %q", got, dir)
	}
	// The move ran silently: the user's first cell is still the first.
	if n := r.reply["execution_count"]; n != float64(1) {
		t.Errorf("execution count of the first cell after the move: %v", n)
	}
}

func TestAgent_WorkDirIsWhereRestartsStart(t *testing.T) {
	ra, here := startIn(t)
	c := ra.connect(t, "s", false)
	if got := c.cwd(); got != here {
		t.Errorf("the kernel started in %q, want the configured %q", got, here)
	}
	rel, dir := workDir(t, here)
	if err := ra.setWorkDir(t, agentapi.WorkDir{Dir: rel, Env: map[string]string{"KERNEL_USERNAME": "alice"}}); err != nil {
		t.Fatalf("set the working directory: %v", err)
	}
	if got := c.cwd(); got != here {
		t.Errorf("without code the running kernel moved to %q", got)
	}
	if resp := ra.request(t, http.MethodPost, agentapi.PathRestart); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("restart: %s", resp.Status)
	}
	if got := c.cwd(); got != dir {
		t.Errorf("after a restart the kernel runs in %q, want %q", got, dir)
	}
	if got := c.execute("import os; print(os.environ.get('KERNEL_USERNAME'))").streams(); got != "alice\n" {
		t.Errorf("after a restart the kernel's KERNEL_USERNAME is %q, want the env of the move", got)
	}
	c.sendExecute("import os; os.kill(os.getpid(), 9)", false)
	testenv.Eventually(t, "the kernel to be restarted after its death", 30*time.Second, func() error {
		if st := ra.status(t, ""); st.RestartCount != 2 || st.ExecutionState != agentapi.ExecutionIdle {
			return fmt.Errorf("restart count %d, execution state %s", st.RestartCount, st.ExecutionState)
		}
		return nil
	})
	if got := c.cwd(); got != dir {
		t.Errorf("after its death the kernel runs in %q, want %q", got, dir)
	}
}

func TestAgent_WorkDirWhoseCodeFailsIsRefusedAndForgotten(t *testing.T) {
	ra, here := startIn(t)
	c := ra.connect(t, "s", false)
	rel, _ := workDir(t, here)
	err := ra.setWorkDir(t, agentapi.WorkDir{Dir: rel, Code: chdirCode("/nonexistent/nbkube")})
	var ae *agentclient.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || !strings.Contains(ae.Message, "FileNotFoundError") {
		t.Fatalf("code that raises: %v, want 422 naming FileNotFoundError", err)
	}
	if resp := ra.request(t, http.MethodPost, agentapi.PathRestart); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("restart: %s", resp.Status)
	}
	if got := c.cwd(); got != here {
		t.Errorf("after a refused move the restarted kernel runs in %q, want %q", got, here)
	}
}

func TestAgent_WorkDirRefusals(t *testing.T) {
	// A kernel that takes a second before it starts, so that a move can come too early.
	cfg, addr := testConfig(t, append([]string{"/bin/sh", "-c", `sleep 1; exec "$0" "$@"`}, ipykernel...)...)
	cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	ra := runAgent(t, cfg, addr)
	valid := `{"dir":"."}`
	if code, body := ra.postWorkDir(t, testToken, valid); code != http.StatusConflict {
		t.Errorf("move before the kernel started: %d %s, want 409", code, body)
	}
	for _, c := range []struct {
		token, body string
		want        int
	}{
		{testToken, `not json`, http.StatusBadRequest},
		{testToken, `{}`, http.StatusBadRequest},
		{testToken, `{"dir":"/tmp"}`, http.StatusBadRequest},
		{testToken, `{"dir":"../etc"}`, http.StatusBadRequest},
		{testToken, `{"dir":"a/../../b"}`, http.StatusBadRequest},
		{testToken, `{"dir":"a//b"}`, http.StatusBadRequest},
		{testToken, `{"dir":".","env":{"NBKUBE_TOKEN":"x"}}`, http.StatusBadRequest},
		{testToken, `{"dir":".","env":{"HOME":"/"}}`, http.StatusBadRequest},
		{testToken, `{"dir":".","env":{"1=2":"x"}}`, http.StatusBadRequest},
		{testToken, `{"dir":".","code":"` + strings.Repeat("x", agentapi.MaxWorkDirBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"wrong", valid, http.StatusForbidden},
	} {
		if code, body := ra.postWorkDir(t, c.token, c.body); code != c.want {
			t.Errorf("%.40s (token %s): %d %s, want %d", c.body, c.token, code, body, c.want)
		}
	}
	ra.status(t, "?"+agentapi.QueryWait+"="+agentapi.WaitReady)
	if code, body := ra.postWorkDir(t, testToken, `{"dir":"nonexistent/nbkube"}`); code != http.StatusUnprocessableEntity {
		t.Errorf("move to a missing directory: %d %s, want 422", code, body)
	}
}
