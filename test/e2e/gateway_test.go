package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// gatewayRequestTimeout is the Jupyter Server's GatewayClient.request_timeout: a kernel start
// through it waits for nbkube to run a pod and the kernel to answer, which on a loaded machine
// takes longer than Jupyter's default of 42 s.
const gatewayRequestTimeout = 120 * time.Second

// TestGatewayMode runs Debian's Jupyter Server 1.23 in gateway mode (--gateway-url) in front
// of `nbkube local`, as a user with a Jupyter Server of their own would: through that Jupyter
// Server, nbkube's kernel specs are listed, a kernel starts on nbkube, runs code over the
// Jupyter Server's channels WebSocket, is interrupted and restarted, and is shut down.
func TestGatewayMode(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	nbkube := gatewayBackend(t, inst)
	jupyter := startJupyterGateway(t, nbkube)
	ctx := context.Background()

	// The kernel specs are nbkube's, passed through unchanged, their logos included.
	var direct, proxied struct {
		Default     string                    `json:"default"`
		KernelSpecs map[string]map[string]any `json:"kernelspecs"`
	}
	nbkube.getJSON(t, "api/kernelspecs", &direct)
	jupyter.getJSON(t, "api/kernelspecs", &proxied)
	if len(direct.KernelSpecs) == 0 || !reflect.DeepEqual(proxied.KernelSpecs, direct.KernelSpecs) {
		t.Errorf("kernel specs through Jupyter Server:\n%v\nnbkube's:\n%v", proxied.KernelSpecs, direct.KernelSpecs)
	}
	if _, ok := proxied.KernelSpecs[proxied.Default]; !ok {
		t.Errorf("the default kernel spec %q through Jupyter Server is not listed", proxied.Default)
	}
	python3, ok := proxied.KernelSpecs["python3"]
	if !ok {
		t.Fatalf("no python3 kernel spec through Jupyter Server: %v", proxied.KernelSpecs)
	}
	resources, _ := python3["resources"].(map[string]any)
	for name, link := range resources {
		path, _ := link.(string)
		want := nbkube.call(t, http.MethodGet, strings.TrimPrefix(path, "/"), nil, http.StatusOK)
		if got := jupyter.call(t, http.MethodGet, strings.TrimPrefix(path, "/"), nil, http.StatusOK); len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("kernel spec resource %s (%s) through Jupyter Server: %d bytes, nbkube serves %d", name, path, len(got), len(want))
		}
	}

	// A kernel started through Jupyter Server is nbkube's: in its API and a Kernel resource.
	var started struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(jupyter.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}, http.StatusCreated), &started); err != nil {
		t.Fatal(err)
	}
	if started.ID == "" || started.Name != "python3" {
		t.Fatalf("kernel started through Jupyter Server: %+v", started)
	}
	if !slices.Contains(kernelIDs(t, nbkube), started.ID) {
		t.Errorf("nbkube does not list kernel %s, started through Jupyter Server", started.ID)
	}
	kernel := &nbv1.Kernel{}
	if err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: started.ID}, kernel); err != nil {
		t.Fatalf("Kernel resource of the kernel started through Jupyter Server: %v", err)
	}
	if kernel.Spec.KernelSpec != "python3" {
		t.Errorf("Kernel %s runs spec %q, want python3", kernel.Name, kernel.Spec.KernelSpec)
	}

	// Code runs over Jupyter Server's channels WebSocket, which it relays to nbkube's.
	// Jupyter Server 1.23 drops a message that reaches it before its own connection to the
	// gateway is under way (GatewayWebSocketClient.on_message queues it on a future that is
	// never resolved when _connect has not run yet), so the client first asks for kernel_info,
	// again while it is unanswered. (JupyterLab, too, asks for it on every new connection.)
	ch := dialGatewayChannels(t, jupyter, started.ID)
	if err := ch.awaitKernelInfo(t, 60*time.Second); err != nil {
		// Jupyter Server's log shows only that its connection to nbkube closed; say why.
		k := &nbv1.Kernel{}
		_ = inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: started.ID}, k)
		t.Fatalf("through Jupyter Server: %v; nbkube answers its channels request with %s; the Kernel's status: %+v",
			err, channelsAnswer(nbkube, started.ID), k.Status)
	}
	run := ch.execute(t, "1+1", nil)
	if run.reply["status"] != "ok" || run.result() != "2" {
		t.Errorf("1+1: reply %v, result %q, want ok and \"2\"", run.reply, run.result())
	}
	if kinds := run.kinds(); len(kinds) < 2 || kinds[0] != "status:busy" || kinds[len(kinds)-1] != "status:idle" {
		t.Errorf("1+1: iopub %v, want busy first and idle last", kinds)
	}
	if out := ch.execute(t, `print("hello"); x = 41`, nil).stdout(); out != "hello\n" {
		t.Errorf("print: stdout %q, want \"hello\\n\"", out)
	}

	// An interrupt through Jupyter Server reaches the kernel. ipykernel turns SIGINT into
	// KeyboardInterrupt only while it runs code, so the cell prints once it is inside.
	interrupted := false
	start := time.Now()
	run = ch.execute(t, "import time\nprint('sleeping', flush=True)\ntime.sleep(60)", func(m gatewayMsg) {
		if !interrupted && m.Header.MsgType == "stream" && strings.Contains(m.text(), "sleeping") {
			interrupted = true
			jupyter.call(t, http.MethodPost, "api/kernels/"+started.ID+"/interrupt", nil, http.StatusNoContent)
		}
	})
	if run.reply["status"] != "error" || run.reply["ename"] != "KeyboardInterrupt" || time.Since(start) > 45*time.Second {
		t.Errorf("interrupted cell: reply %v after %s, want a KeyboardInterrupt well before 60 s", run.reply, time.Since(start))
	}

	// A restart through Jupyter Server gives the same kernel a fresh process.
	var restarted struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(jupyter.call(t, http.MethodPost, "api/kernels/"+started.ID+"/restart", nil, http.StatusOK), &restarted); err != nil {
		t.Fatal(err)
	}
	if restarted.ID != started.ID {
		t.Errorf("restart answered kernel %q, want %q", restarted.ID, started.ID)
	}
	if err := ch.awaitKernelInfo(t, 60*time.Second); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if run := ch.execute(t, "x", nil); run.reply["ename"] != "NameError" {
		t.Errorf("after a restart, x: reply %v, want a NameError", run.reply)
	}

	// Jupyter Server lists the kernel from nbkube's list, parsing nbkube's model as it goes.
	type listedKernel struct {
		ID             string `json:"id"`
		ExecutionState string `json:"execution_state"`
	}
	var listed []listedKernel
	jupyter.getJSON(t, "api/kernels", &listed)
	if !slices.ContainsFunc(listed, func(k listedKernel) bool { return k.ID == started.ID && k.ExecutionState != "" }) {
		t.Errorf("Jupyter Server lists %+v, want kernel %s with an execution state", listed, started.ID)
	}

	// Shut down through Jupyter Server, the kernel is gone from nbkube.
	ch.close(t)
	jupyter.call(t, http.MethodDelete, "api/kernels/"+started.ID, nil, http.StatusNoContent)
	nbkube.call(t, http.MethodGet, "api/kernels/"+started.ID, nil, http.StatusNotFound)
	if slices.Contains(kernelIDs(t, nbkube), started.ID) {
		t.Errorf("nbkube still lists kernel %s after its shutdown through Jupyter Server", started.ID)
	}
	testenv.Eventually(t, "Kernel resource deleted", 30*time.Second, func() error {
		err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: started.ID}, &nbv1.Kernel{})
		if err == nil {
			return errors.New("it still exists")
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %w", err)
		}
		return nil
	})
	if left := kernelIDs(t, jupyter); len(left) != 0 {
		t.Errorf("Jupyter Server still lists kernels %v after the shutdown", left)
	}
}

// kernelIDs are the ids of the kernels an API lists.
func kernelIDs(t *testing.T, api gatewayAPI) []string {
	t.Helper()
	var list []struct {
		ID string `json:"id"`
	}
	api.getJSON(t, "api/kernels", &list)
	ids := make([]string, len(list))
	for i, k := range list {
		ids[i] = k.ID
	}
	return ids
}

// gatewayAPI is one of the Jupyter APIs of the gateway test: the Jupyter Server the user
// talks to, or nbkube behind it.
type gatewayAPI struct {
	// base is the API's base URL, ending in "/".
	base, token string
}

// gatewayBackend is the Jupyter API of a running `nbkube local`.
func gatewayBackend(t *testing.T, inst *instance) gatewayAPI {
	t.Helper()
	u, err := url.Parse(inst.apiURL)
	if err != nil || inst.apiURL == "" {
		t.Fatalf("nbkube local printed no API URL: %q", inst.apiURL)
	}
	token := u.Query().Get("token")
	u.RawQuery = ""
	return gatewayAPI{base: u.String(), token: token}
}

// gatewayHTTP waits as long as Jupyter Server may wait for nbkube, plus a margin, so that a
// slow nbkube shows up as Jupyter's error rather than as this client's.
var gatewayHTTP = &http.Client{Timeout: gatewayRequestTimeout + 10*time.Second}

// call sends a request with the API's token and returns the body of the answer, which must
// have status want. A non-nil body is sent as JSON.
func (a gatewayAPI) call(t *testing.T, method, path string, body any, want int) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := gatewayHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, a.base+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatalf("%s %s: %v", method, a.base+path, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, a.base+path, resp.StatusCode, want, data)
	}
	return data
}

// channelsURL is the WebSocket URL of a kernel's channels.
func (a gatewayAPI) channelsURL(kernelID string) string {
	return "ws" + strings.TrimPrefix(a.base, "http") + "api/kernels/" + url.PathEscape(kernelID) + "/channels"
}

func (a gatewayAPI) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(a.call(t, http.MethodGet, path, nil, http.StatusOK), v); err != nil {
		t.Fatalf("GET %s: %v", a.base+path, err)
	}
}

// startJupyterGateway runs Debian's Jupyter Server with nbkube as its gateway, in throw-away
// directories so that neither the machine's Jupyter setup nor an earlier run leaks in, and
// returns its API once it answers. It is stopped (SIGTERM, as a user stops it) at cleanup,
// and its log is shown if the test failed.
func startJupyterGateway(t *testing.T, nbkube gatewayAPI) gatewayAPI {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"root", "config", "data", "runtime", "ipython"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	jupyter := gatewayAPI{token: gatewayID()}
	host, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	jupyter.base = "http://" + net.JoinHostPort(host, port) + "/"
	cmd := exec.Command("/usr/bin/python3", "-m", "jupyter_server", "--no-browser", "--allow-root",
		"--ip="+host, "--port="+port, "--port-retries=0",
		"--ServerApp.token="+jupyter.token, "--ServerApp.root_dir="+filepath.Join(dir, "root"),
		"--gateway-url="+strings.TrimSuffix(nbkube.base, "/"),
		fmt.Sprintf("--GatewayClient.request_timeout=%d", int(gatewayRequestTimeout.Seconds())))
	// Inherited JUPYTER_* and KERNEL_* variables would configure the server or be forwarded
	// to nbkube in every kernel start; the gateway token goes in the environment rather than
	// in the process list.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JUPYTER_") && !strings.HasPrefix(kv, "KERNEL_") && !strings.HasPrefix(kv, "IPYTHONDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"JUPYTER_GATEWAY_AUTH_TOKEN="+nbkube.token,
		"JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"), "JUPYTER_DATA_DIR="+filepath.Join(dir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"), "IPYTHONDIR="+filepath.Join(dir, "ipython"))
	logFile, err := os.Create(filepath.Join(dir, "jupyter-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// Cleanups run last-in first-out: the log is shown after the server has stopped.
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("Jupyter Server log:\n%s", tail(log))
		}
	})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, jupyter.base+"api/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "token "+jupyter.token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return jupyter
			}
		}
		select {
		case <-exited:
			t.Fatalf("Jupyter Server exited before it answered")
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jupyter Server did not answer %s within a minute: %v", jupyter.base, err)
		}
	}
}

// gatewayID is a random hex string, for tokens and message ids.
func gatewayID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// gatewayMsg is a message of Jupyter's WebSocket JSON protocol, as far as the test reads it.
// The test decodes with encoding/json rather than nbkube's own codec, so that it checks
// nbkube's output independently.
type gatewayMsg struct {
	Channel string `json:"channel"`
	Header  struct {
		MsgType string `json:"msg_type"`
	} `json:"header"`
	ParentHeader struct {
		MsgID string `json:"msg_id"`
	} `json:"parent_header"`
	Content map[string]any `json:"content"`
}

// text is a stream message's text.
func (m gatewayMsg) text() string {
	s, _ := m.Content["text"].(string)
	return s
}

// gatewayChannels is a client's channels WebSocket to a kernel. One goroutine reads (so that
// a wait can time out without a read deadline, which would break the connection); the test
// goroutine is the only writer.
type gatewayChannels struct {
	conn    *websocket.Conn
	session string
	msgs    chan gatewayMsg
	// readErr is why reading stopped; it is set before msgs is closed.
	readErr error
	closed  chan struct{}
	done    chan struct{}
}

// gatewayMaxMessage bounds a message the test reads: its outputs are a few bytes.
const gatewayMaxMessage = 1 << 20

// dialGatewayChannels opens the kernel's channels on api as JupyterLab 3 does: token in the
// header, a session id, no subprotocol (Jupyter Server 1.23 knows none), the JSON protocol.
func dialGatewayChannels(t *testing.T, api gatewayAPI, kernelID string) *gatewayChannels {
	t.Helper()
	session := gatewayID()
	u := api.channelsURL(kernelID) + "?session_id=" + session
	header := http.Header{"Authorization": {"token " + api.token}}
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, resp, err := dialer.Dial(u, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("channels WebSocket %s: %v (status %d)", u, err, status)
	}
	conn.SetReadLimit(gatewayMaxMessage)
	c := &gatewayChannels{conn: conn, session: session, msgs: make(chan gatewayMsg, 64),
		closed: make(chan struct{}), done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() { c.close(t) })
	return c
}

func (c *gatewayChannels) read() {
	defer close(c.done)
	defer close(c.msgs)
	for {
		typ, data, err := c.conn.ReadMessage()
		if err != nil {
			c.readErr = err
			return
		}
		if typ != websocket.TextMessage {
			// The JSON protocol sends binary frames only for messages with buffers.
			c.readErr = fmt.Errorf("a binary frame (%d bytes) where no message has buffers", len(data))
			return
		}
		var m gatewayMsg
		if err := json.Unmarshal(data, &m); err != nil {
			c.readErr = fmt.Errorf("decode %q: %w", data, err)
			return
		}
		select {
		case c.msgs <- m:
		case <-c.closed:
			return
		}
	}
}

// close closes the WebSocket and waits for the reader to stop; it may be called again.
func (c *gatewayChannels) close(t *testing.T) {
	t.Helper()
	select {
	case <-c.closed:
		return
	default:
	}
	close(c.closed)
	_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = c.conn.Close()
	<-c.done
}

// send sends a request on a channel and returns its msg_id.
func (c *gatewayChannels) send(t *testing.T, channel, msgType string, content any) string {
	t.Helper()
	id := gatewayID()
	msg := map[string]any{
		"header": map[string]any{"msg_id": id, "msg_type": msgType, "session": c.session, "username": "gateway-test",
			"date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content,
		"channel": channel, "buffers": []any{},
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.conn.WriteJSON(msg); err != nil {
		t.Fatalf("send %s: %v", msgType, err)
	}
	return id
}

// next is the next message, or false when none came within d.
func (c *gatewayChannels) next(t *testing.T, d time.Duration) (gatewayMsg, bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			t.Fatalf("channels WebSocket closed: %v", c.readErr)
		}
		return m, true
	case <-timer.C:
		return gatewayMsg{}, false
	}
}

// gatewayRun is what an execute_request brought back.
type gatewayRun struct {
	reply map[string]any
	iopub []gatewayMsg
}

func (r gatewayRun) result() string {
	for _, m := range r.iopub {
		if m.Header.MsgType == "execute_result" {
			data, _ := m.Content["data"].(map[string]any)
			s, _ := data["text/plain"].(string)
			return s
		}
	}
	return ""
}

func (r gatewayRun) stdout() string {
	var b strings.Builder
	for _, m := range r.iopub {
		if m.Header.MsgType == "stream" && m.Content["name"] == "stdout" {
			b.WriteString(m.text())
		}
	}
	return b.String()
}

// kinds are the iopub message types in order, statuses with their state.
func (r gatewayRun) kinds() []string {
	var kinds []string
	for _, m := range r.iopub {
		k := m.Header.MsgType
		if k == "status" {
			k += ":" + fmt.Sprint(m.Content["execution_state"])
		}
		kinds = append(kinds, k)
	}
	return kinds
}

// execute runs code and returns once both its execute_reply and its idle status arrived;
// onIOPub, when set, sees each of the request's iopub messages as it arrives.
func (c *gatewayChannels) execute(t *testing.T, code string, onIOPub func(gatewayMsg)) gatewayRun {
	t.Helper()
	id := c.send(t, "shell", "execute_request", map[string]any{"code": code, "silent": false,
		"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	var run gatewayRun
	idle := false
	deadline := time.Now().Add(60 * time.Second)
	for run.reply == nil || !idle {
		m, ok := c.next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("execute %q: no reply and idle within a minute; got reply %v, iopub %v", code, run.reply, run.kinds())
		}
		if m.ParentHeader.MsgID != id {
			continue
		}
		switch {
		case m.Channel == "shell" && m.Header.MsgType == "execute_reply":
			run.reply = m.Content
		case m.Channel == "iopub":
			run.iopub = append(run.iopub, m)
			idle = m.Header.MsgType == "status" && m.Content["execution_state"] == "idle"
			if onIOPub != nil {
				onIOPub(m)
			}
		}
	}
	return run
}

// awaitKernelInfo asks for kernel_info until the kernel answers: on a new connection and
// after a restart a request may get no answer (a new connection's first messages may be
// dropped by Jupyter Server's gateway relay; a kernel process being replaced answers nothing).
func (c *gatewayChannels) awaitKernelInfo(t *testing.T, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	asked := map[string]bool{}
	for time.Now().Before(deadline) {
		asked[c.send(t, "shell", "kernel_info_request", map[string]any{})] = true
		retry := time.Now().Add(3 * time.Second)
		for {
			m, ok := c.next(t, time.Until(retry))
			if !ok {
				break
			}
			if m.Header.MsgType == "kernel_info_reply" && asked[m.ParentHeader.MsgID] {
				return nil
			}
		}
	}
	return fmt.Errorf("no kernel_info_reply within %s", within)
}

// channelsAnswer is how nbkube answers the request Jupyter Server's gateway client makes for
// a kernel's channels: a WebSocket upgrade with the gateway token and no subprotocol.
func channelsAnswer(nbkube gatewayAPI, kernelID string) string {
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, resp, err := dialer.Dial(nbkube.channelsURL(kernelID), http.Header{"Authorization": {"token " + nbkube.token}})
	if err == nil {
		conn.Close()
		return "101 Switching Protocols"
	}
	if resp == nil {
		return err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return fmt.Sprintf("%s: %s", resp.Status, body)
}
