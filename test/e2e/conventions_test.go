package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/testenv"
)

// How `nbkube local` starts, as a Jupyter user expects a server to: the port, the token, the
// runtime file, the logs, the settings in seconds, and where the agent comes from.

// startupBound is how soon `nbkube local` must hold its port, or give up: before the control
// plane starts, which takes 8 s or more. It takes a fraction of a second, but this machine's
// two cores are shared with other builds.
const startupBound = 5 * time.Second

func TestConventions_TakesTheNextFreePortAndJupyterServerListShowsIt(t *testing.T) {
	busy, port := occupiedPort(t)
	defer busy.Close()
	next := net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))
	runtimeDir := filepath.Join(t.TempDir(), "runtime")
	dataDir, root := t.TempDir(), t.TempDir()
	// At least 32 characters: nbkube refuses shorter tokens.
	const token = "conventions-token-0123456789abcdef"
	// No --listen: Jupyter's port and token variables say where and with what it serves.
	cfg := testenv.LocalConfig{Bin: nbkubeBin, DataDir: dataDir, Root: root, Env: []string{"JUPYTER_PORT=" + strconv.Itoa(port),
		"JUPYTER_RUNTIME_DIR=" + runtimeDir, "JUPYTER_TOKEN=" + token, "JUPYTER_TOKEN_FILE=", "NBKUBE_TOKEN="}}

	// The port is held before the control plane starts: a connection gets through at once.
	started := time.Now()
	held := make(chan time.Duration, 1)
	go func() {
		for time.Since(started) < 3*startupBound {
			if c, err := net.DialTimeout("tcp", next, 200*time.Millisecond); err == nil {
				c.Close()
				held <- time.Since(started)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(held)
	}()
	inst := startLocalWith(t, cfg)
	if d, ok := <-held; !ok || d > startupBound {
		t.Errorf("port %d taken %s after the start (%v), want within %s", port+1, d, ok, startupBound)
	}
	wantURL := "http://" + next + "/"
	log := inst.Log()
	if printed := printedURL(log); printed != wantURL+"?token="+token {
		t.Errorf("printed URL %q, want %q", printed, wantURL+"?token="+token)
	}
	if !strings.Contains(log, fmt.Sprintf("port %d is in use", port)) {
		t.Errorf("the log does not say port %d was in use:\n%s", port, tail([]byte(log)))
	}

	// The runtime file: Jupyter's own `jupyter server list` finds the server, with a URL and
	// token that work, and only its owner can read the token.
	info := filepath.Join(runtimeDir, fmt.Sprintf("jpserver-%d.json", inst.PID()))
	if st, err := os.Stat(info); err != nil {
		t.Errorf("runtime file: %v", err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("runtime file %s has mode %v, want 0600", info, st.Mode())
	}
	servers := jupyterServerList(t, runtimeDir)
	if len(servers) != 1 {
		t.Fatalf("jupyter server list shows %d servers, want nbkube: %v", len(servers), servers)
	}
	want := map[string]any{"url": wantURL, "token": token, "port": float64(port + 1), "hostname": "127.0.0.1",
		"base_url": "/", "root_dir": root, "pid": float64(inst.PID()), "secure": false, "password": false, "sock": ""}
	for k, v := range want {
		if servers[0][k] != v {
			t.Errorf("jupyter server list: %s = %#v, want %#v", k, servers[0][k], v)
		}
	}
	if v, _ := servers[0]["version"].(string); v == "" {
		t.Errorf("jupyter server list: no version in %v", servers[0])
	}
	if err := newJupyterAPI(wantURL, token, 10*time.Second).answers(t); err != nil {
		t.Errorf("the listed URL and token: %v", err)
	}

	// A person at a terminal reads zap's console lines, not JSON.
	if !strings.Contains(log, "\tINFO\t") || strings.Contains(log, `{"level":`) {
		t.Errorf("the log is not in console format:\n%s", tail([]byte(log)))
	}

	inst.stop(t)
	if _, err := os.Stat(info); !os.IsNotExist(err) {
		t.Errorf("runtime file after exit: %v", err)
	}
	if servers := jupyterServerList(t, runtimeDir); len(servers) != 0 {
		t.Errorf("jupyter server list after exit: %v", servers)
	}
}

func TestConventions_ACopiedBinaryRunsKernelsWithTheAgentOnPATH(t *testing.T) {
	alone := binaryAlone(t)
	agentDir := t.TempDir()
	if err := os.Symlink(filepath.Join(filepath.Dir(nbkubeBin), "nbkube-agent"), filepath.Join(agentDir, "nbkube-agent")); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	const fileToken = "file-token-0123456789abcdef0123456789"
	if err := os.WriteFile(tokenFile, []byte(fileToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir, root := t.TempDir(), t.TempDir()
	// Settings in Jupyter's seconds; JSON logs as the chart asks.
	const idle = 5 * time.Second
	inst := startLocalWith(t, testenv.LocalConfig{Bin: alone, DataDir: dataDir, Root: root,
		Args: []string{"--listen", "127.0.0.1:0", "--log-format=json",
			"--cull-idle-timeout", strconv.Itoa(int(idle.Seconds())), "--cull-interval", "1", "--kernel-status-interval", "1"},
		Env: []string{"PATH=" + agentDir + string(filepath.ListSeparator) + os.Getenv("PATH"),
			"JUPYTER_TOKEN_FILE=" + tokenFile, "JUPYTER_TOKEN=", "NBKUBE_TOKEN="}})
	printed := printedURL(inst.Log())
	u, err := url.Parse(printed)
	if err != nil || u.Query().Get("token") != fileToken {
		t.Errorf("printed URL %q (%v), want the token of JUPYTER_TOKEN_FILE", printed, err)
	}

	// The kernel's agent comes from PATH; the kernel answers, then is culled in seconds.
	api := inst.api(t)
	id := api.startKernel(t)
	ready := time.Now()
	testenv.Eventually(t, "kernel culled", 60*time.Second, func() error {
		if status := api.call(t, http.MethodGet, "api/kernels/"+id, nil).status; status != http.StatusNotFound {
			return fmt.Errorf("GET the kernel: HTTP %d", status)
		}
		return nil
	})
	if lived := time.Since(ready); lived < idle-2*time.Second {
		t.Errorf("kernel culled %s after it started, before its idle timeout of %s", lived, idle)
	}

	log := inst.Log()
	jsonLines := 0
	for line := range strings.Lines(log) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] != nil && m["msg"] != nil {
			jsonLines++
		}
	}
	if jsonLines == 0 || strings.Contains(log, "\tINFO\t") {
		t.Errorf("--log-format=json: %d JSON lines in\n%s", jsonLines, tail([]byte(log)))
	}
	inst.stop(t)
}

func TestConventions_AnExplicitPortInUseFailsAtOnce(t *testing.T) {
	busy, port := occupiedPort(t)
	defer busy.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	out, took := runUntilExit(t, exec.Command(nbkubeBin, "local", "--data-dir", t.TempDir(), "--root", t.TempDir(),
		"--kube-bin-dir", testenv.KubeBinDir(), "--listen", addr))
	for _, want := range []string{addr, "address already in use", "--listen"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
	if took > startupBound {
		t.Errorf("gave up after %s, want within %s", took, startupBound)
	}
}

func TestConventions_WithoutTheAgentRefusesToStart(t *testing.T) {
	alone := binaryAlone(t)
	cmd := exec.Command(alone, "local", "--data-dir", t.TempDir(), "--root", t.TempDir(),
		"--kube-bin-dir", testenv.KubeBinDir(), "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	out, took := runUntilExit(t, cmd)
	for _, want := range []string{"nbkube-agent", "make build", "go install github.com/nbkube/nbkube/cmd/nbkube-agent@"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
	if took > startupBound {
		t.Errorf("gave up after %s, want within %s", took, startupBound)
	}
}

// occupiedPort listens on a loopback port whose next port is free.
func occupiedPort(t *testing.T) (net.Listener, int) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if free, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))); err == nil {
			free.Close()
			return l, port
		}
		l.Close()
	}
	t.Fatal("no free pair of ports")
	return nil, 0
}

// binaryAlone is the built nbkube in a directory of its own, as `go install` or a copy leaves
// it: no nbkube-agent beside it.
func binaryAlone(t *testing.T) string {
	t.Helper()
	alone := filepath.Join(t.TempDir(), "nbkube")
	// A hard link, not a symbolic one: the binary finds itself by /proc/self/exe, which
	// resolves symbolic links.
	if err := os.Link(nbkubeBin, alone); err != nil {
		data, err := os.ReadFile(nbkubeBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(alone, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return alone
}

// runUntilExit runs cmd, which should give up, and returns its output and how long it ran.
func runUntilExit(t *testing.T, cmd *exec.Cmd) (string, time.Duration) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("nbkube local exited 0:\n%s", out.String())
		}
		return out.String(), time.Since(started)
	case <-time.After(time.Minute):
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-done
		t.Fatalf("nbkube local still ran after a minute:\n%s", tail(out.Bytes()))
		return "", 0
	}
}

// jupyterServerList is what Debian's `jupyter server list --json` shows of runtimeDir.
func jupyterServerList(t *testing.T, runtimeDir string) []map[string]any {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-m", "jupyter_server", "list", "--json")
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+runtimeDir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jupyter server list: %v\n%s", err, out)
	}
	var servers []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var s map[string]any
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("jupyter server list: %v in %q", err, sc.Text())
		}
		servers = append(servers, s)
	}
	return servers
}

// printedURL is the Jupyter API's URL with its token, as nbkube local printed it when ready.
func printedURL(log string) string {
	for line := range strings.Lines(log) {
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "Jupyter API: "); ok {
			return u
		}
	}
	return ""
}
