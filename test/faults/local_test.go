//go:build faults

package faults

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

var (
	agentBuild    sync.Once
	agentBuildErr error
)

// localBinaries builds nbkube and, beside it, the nbkube-agent that `nbkube local` runs in
// its kernel pods; it returns nbkube.
func localBinaries(t *testing.T) string {
	t.Helper()
	bin := nbkubeBinary(t)
	agentBuild.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, agentapi.BinaryName), "../../cmd/"+agentapi.BinaryName).CombinedOutput()
		if err != nil {
			agentBuildErr = fmt.Errorf("go build ./cmd/%s: %w\n%s", agentapi.BinaryName, err, out)
		}
	})
	if agentBuildErr != nil {
		t.Fatal(agentBuildErr)
	}
	return bin
}

// localStack is one `nbkube local` run as a process: a real control plane (etcd,
// kube-apiserver, kube-controller-manager as its children), the controllers, the Jupyter API
// and the local node, whose kernel pods are processes of this machine.
type localStack struct {
	t       *testing.T
	cmd     *exec.Cmd
	dataDir string
	base    string
	token   string
	client  client.Client
	logPath string
	done    chan struct{}
	hc      *http.Client
}

// startLocal runs `nbkube local` with its own data directory, contents root and port, and
// waits until it is ready. Missing kernels (python3-ipykernel) stop the test as testenv.Missing
// says.
func startLocal(t *testing.T) *localStack {
	t.Helper()
	// nbkube local offers the first of these that has ipykernel.
	if exec.Command("python3", "-c", "import ipykernel").Run() != nil && exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run() != nil {
		testenv.Missing(t, "python3 with ipykernel is not installed (hack/install-test-deps.sh)")
	}
	bin := localBinaries(t)
	dir := t.TempDir()
	dataDir, root := filepath.Join(dir, "data"), filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(bin, "local", "--data-dir", dataDir, "--root", root, "--kube-bin-dir", testenv.KubeBinDir(),
		"--listen", addr, "--token", token)
	// nbkube local leaves a Jupyter server file in the runtime directory, as Jupyter does.
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "nbkube-local.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &localStack{t: t, cmd: cmd, dataDir: dataDir, base: "http://" + addr + "/", token: token, logPath: logPath,
		done: make(chan struct{}), hc: &http.Client{Timeout: 2 * time.Minute}}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		readyOnce := sync.Once{}
		for sc.Scan() {
			// The last line of the ready message names kubectl.
			if strings.HasPrefix(strings.TrimSpace(sc.Text()), "kubectl ") {
				readyOnce.Do(func() { close(ready) })
			}
		}
		_ = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(s.stop)
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("nbkube local exited before it was ready:\n%s", s.logTail())
	case <-time.After(3 * time.Minute):
		t.Fatalf("nbkube local not ready after 3 minutes:\n%s", s.logTail())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	// Bounded: the scenarios stop the control plane, and a read must not hang the test.
	cfg.Timeout = 20 * time.Second
	if s.client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		t.Fatal(err)
	}
	return s
}

// stop ends nbkube local as Ctrl-C does, then kills whatever is left of it: its children
// die with it (Pdeathsig), but a test that failed half-way must leave nothing running.
func (s *localStack) stop() {
	procs := testenv.Descendants(s.cmd.Process.Pid)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		s.t.Errorf("nbkube local did not stop within a minute of SIGINT")
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGCONT)
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if s.t.Failed() {
		s.t.Logf("nbkube local's log:\n%s", s.logTail())
	}
}

// logTail is the start and the end of nbkube local's log.
func (s *localStack) logTail() string {
	data, _ := os.ReadFile(s.logPath)
	if len(data) > 16000 {
		return string(data[:4000]) + "\n...\n" + string(data[len(data)-12000:])
	}
	return string(data)
}

// childNamed is the pid of nbkube local's descendant process whose command is name (etcd,
// kube-apiserver).
func (s *localStack) childNamed(name string) int {
	s.t.Helper()
	for _, p := range testenv.Descendants(s.cmd.Process.Pid) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			return p
		}
	}
	s.t.Fatalf("no process %s under nbkube local (pid %d)", name, s.cmd.Process.Pid)
	return 0
}

// apiAnswer is an answer of the Jupyter API.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// call sends a request to the Jupyter API with the token; err is a failure to get an answer.
func (s *localStack) call(hc *http.Client, method, route string, body any) (apiAnswer, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return apiAnswer{}, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.base+route, r)
	if err != nil {
		return apiAnswer{}, err
	}
	req.Header.Set("Authorization", "token "+s.token)
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return apiAnswer{took: time.Since(began)}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: data, took: time.Since(began)}, err
}

// startKernel starts a python3 kernel through POST /api/kernels and returns its id.
func (s *localStack) startKernel() string {
	s.t.Helper()
	a, err := s.call(s.hc, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
	if err != nil || a.status != http.StatusCreated {
		s.t.Fatalf("POST /api/kernels: %d %s (%v)", a.status, a.body, err)
	}
	var k struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(a.body, &k); err != nil || k.ID == "" {
		s.t.Fatalf("POST /api/kernels: %s (%v)", a.body, err)
	}
	return k.ID
}

// kernelState is GET /api/kernels/<id>'s execution_state, or the status when it is not 200.
func (s *localStack) kernelState(id string) string {
	s.t.Helper()
	a, err := s.call(&http.Client{Timeout: 10 * time.Second}, http.MethodGet, "api/kernels/"+id, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	if a.status != http.StatusOK {
		return fmt.Sprintf("HTTP %d", a.status)
	}
	var k struct {
		State string `json:"execution_state"`
	}
	_ = json.Unmarshal(a.body, &k)
	return k.State
}

// channels is a client of a kernel's channels WebSocket in Jupyter's JSON protocol, as
// JupyterLab speaks it: one goroutine reads into msgs, the test's goroutine writes.
type channels struct {
	t       *testing.T
	conn    *websocket.Conn
	session string
	msgs    chan *jmsg
	// closed is closed when reading ends (the server closed the connection, or it broke).
	closed  chan struct{}
	readErr error
}

// jmsg is one message of Jupyter's JSON protocol.
type jmsg struct {
	Channel      string          `json:"channel"`
	Header       jheader         `json:"header"`
	ParentHeader jheader         `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	// at is when the client read it.
	at time.Time
}

type jheader struct {
	MsgID    string `json:"msg_id,omitempty"`
	MsgType  string `json:"msg_type,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"`
	Version  string `json:"version,omitempty"`
}

// executionState is a status message's execution_state, else "".
func (m *jmsg) executionState() string {
	if m.Header.MsgType != "status" {
		return ""
	}
	var c struct {
		State string `json:"execution_state"`
	}
	_ = json.Unmarshal(m.Content, &c)
	return c.State
}

// openChannels opens the kernel's channels; the test fails if it cannot.
func (s *localStack) openChannels(id string) *channels {
	s.t.Helper()
	c, err := s.tryChannels(id)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// tryChannels opens the kernel's channels with a session of its own, as JupyterLab does.
func (s *localStack) tryChannels(id string) (*channels, error) {
	session := randomHex()
	u := "ws" + strings.TrimPrefix(s.base, "http") + "api/kernels/" + id + "/channels?session_id=" + session
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, resp, err := d.Dial(u, http.Header{"Authorization": {"token " + s.token}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, fmt.Errorf("open the channels of kernel %s: %w (HTTP %d)", id, err, status)
	}
	conn.SetReadLimit(16 << 20)
	c := &channels{t: s.t, conn: conn, session: session, msgs: make(chan *jmsg, 4096), closed: make(chan struct{})}
	go func() {
		defer close(c.closed)
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				c.readErr = err
				return
			}
			m := &jmsg{at: time.Now()}
			if err := json.Unmarshal(data, m); err != nil {
				c.t.Errorf("undecodable frame %.200q: %v", data, err)
				continue
			}
			select {
			case c.msgs <- m:
			default:
				c.t.Errorf("the test fell 4096 messages behind")
				return
			}
		}
	}()
	s.t.Cleanup(func() {
		_ = conn.Close()
		<-c.closed
	})
	return c, nil
}

// send sends a request on the shell channel and returns its msg_id.
func (c *channels) send(msgType string, content any) string {
	c.t.Helper()
	body, err := json.Marshal(content)
	if err != nil {
		c.t.Fatal(err)
	}
	m := jmsg{Channel: "shell", Metadata: json.RawMessage(`{}`), Content: body, Header: jheader{
		MsgID: randomHex(), MsgType: msgType, Session: c.session, Username: "faults",
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Version: "5.3"}}
	data, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.conn.WriteMessage(websocket.TextMessage, data); err != nil {
		c.t.Fatalf("send %s: %v", msgType, err)
	}
	return m.Header.MsgID
}

// execution is what the kernel answered to one execute_request.
type execution struct {
	status  string // the reply's: ok, error, aborted
	result  string // the execute_result's text/plain
	idle    bool
	replied bool
}

// execute runs code and waits up to timeout for its reply and the kernel's return to idle;
// seen gets every message read meanwhile. It returns an error when no answer came.
func (c *channels) execute(code string, timeout time.Duration, seen func(*jmsg)) (execution, error) {
	id := c.send("execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": false})
	var e execution
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !e.replied || !e.idle {
		select {
		case m := <-c.msgs:
			if seen != nil {
				seen(m)
			}
			if m.ParentHeader.MsgID != id {
				continue
			}
			var content map[string]any
			_ = json.Unmarshal(m.Content, &content)
			switch {
			case m.Header.MsgType == "execute_reply":
				e.replied = true
				e.status, _ = content["status"].(string)
			case m.Header.MsgType == "execute_result":
				data, _ := content["data"].(map[string]any)
				e.result, _ = data["text/plain"].(string)
			case m.executionState() == "idle":
				e.idle = true
			}
		case <-c.closed:
			return e, fmt.Errorf("%q: the connection ended (%w)", code, c.readErr)
		case <-deadline.C:
			return e, fmt.Errorf("%q: no answer within %s (replied %t, idle %t)", code, timeout, e.replied, e.idle)
		}
	}
	return e, nil
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
