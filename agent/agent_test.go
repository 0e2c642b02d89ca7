package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/go-zeromq/zmq4/transport"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

const testToken = "agent-token-0123"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testConfig(t *testing.T, argv ...string) (Config, string) {
	t.Helper()
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("0123abcd\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "token"), []byte(testToken+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return Config{KernelID: "k1", Listen: addr, SecretDir: secret, Argv: argv, RuntimeDir: t.TempDir(),
		StopGrace: 5 * time.Second, Log: logr.Discard()}, addr
}

var ipykernel = []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}

// runningAgent is an agent with a real ipykernel, ready.
type runningAgent struct {
	addr string
	done chan error
	stop context.CancelFunc
}

func startAgent(t *testing.T, mutate func(*Config)) *runningAgent {
	t.Helper()
	cfg, addr := testConfig(t, ipykernel...)
	cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ra := &runningAgent{addr: addr, done: make(chan error, 1), stop: cancel}
	go func() { ra.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ra.done:
		case <-time.After(20 * time.Second):
			t.Error("the agent did not stop")
		}
	})
	// Wait for the agent to listen, then for the kernel.
	testenvEventually(t, "listening", 10*time.Second, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	ra.status(t, "?wait=ready")
	return ra
}

func (ra *runningAgent) request(t *testing.T, method, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+ra.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func (ra *runningAgent) status(t *testing.T, query string) agentapi.Status {
	t.Helper()
	resp := ra.request(t, http.MethodGet, "/status"+query)
	defer resp.Body.Close()
	var st agentapi.Status
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// client is a Jupyter client over the agent's WebSocket, JSON protocol unless v1.
type client struct {
	t       *testing.T
	ws      *websocket.Conn
	session string
	v1      bool
	msgs    chan *wire.Message
	// backlog holds messages read ahead by waitOutput, for collect.
	backlog []*wire.Message
}

// waitOutput reads until a stream output of id contains text; what it reads stays for
// collect.
func (c *client) waitOutput(id, text string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.t.Fatal("connection closed")
			}
			c.backlog = append(c.backlog, m)
			p, _ := wire.ParseHeader(m.ParentHeader)
			h, _ := wire.ParseHeader(m.Header)
			if p.MsgID == id && h.MsgType == "stream" && strings.Contains(string(m.Content), text) {
				return
			}
		case <-deadline:
			c.t.Fatalf("no output %q within %s", text, timeout)
		}
	}
}

// next is the next message, from the backlog first.
func (c *client) next(deadline <-chan time.Time) (*wire.Message, bool) {
	if len(c.backlog) > 0 {
		m := c.backlog[0]
		c.backlog = c.backlog[1:]
		return m, true
	}
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("connection closed")
		}
		return m, true
	case <-deadline:
		return nil, false
	}
}

func (ra *runningAgent) connect(t *testing.T, session string, v1 bool) *client {
	t.Helper()
	return ra.connectWith(t, session, v1, "")
}

// connectWith is connect with more query parameters (query starts with '&').
func (ra *runningAgent) connectWith(t *testing.T, session string, v1 bool, query string) *client {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if v1 {
		d.Subprotocols = []string{wire.ProtocolV1}
	}
	u := "ws://" + ra.addr + "/channels?session_id=" + url.QueryEscape(session) + query
	ws, resp, err := d.Dial(u, http.Header{"Authorization": {"Bearer " + testToken}})
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	if got := ws.Subprotocol(); (got == wire.ProtocolV1) != v1 {
		t.Fatalf("subprotocol %q negotiated, v1 asked: %v", got, v1)
	}
	c := &client{t: t, ws: ws, session: session, v1: v1, msgs: make(chan *wire.Message, 100000)}
	go func() {
		defer close(c.msgs)
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var m *wire.Message
			switch {
			case v1:
				m, err = wire.DecodeV1(data, wire.Limits{})
			case typ == websocket.BinaryMessage:
				m, err = wire.DecodeBinary(data, wire.Limits{})
			default:
				m, err = wire.DecodeJSON(data, wire.Limits{})
			}
			if err != nil {
				t.Errorf("undecodable message from the agent: %v", err)
				return
			}
			c.msgs <- m
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return c
}

func (c *client) send(msgType string, content any) string {
	c.t.Helper()
	id := newID()
	header := map[string]string{"msg_id": id, "username": "test", "session": c.session,
		"date": time.Now().UTC().Format(time.RFC3339Nano), "msg_type": msgType, "version": "5.3"}
	hb, _ := json.Marshal(header)
	cb, _ := json.Marshal(content)
	m := &wire.Message{Channel: wire.Shell, Header: hb, ParentHeader: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`), Content: cb}
	var err error
	if c.v1 {
		err = c.ws.WriteMessage(websocket.BinaryMessage, wire.EncodeV1(m))
	} else {
		var data []byte
		if data, err = wire.EncodeJSON(m); err == nil {
			err = c.ws.WriteMessage(websocket.TextMessage, data)
		}
	}
	if err != nil {
		c.t.Fatalf("send %s: %v", msgType, err)
	}
	return id
}

// reply is what one request produced: its reply and the iopub messages of that request up
// to idle.
type reply struct {
	reply  map[string]any
	iopub  []*wire.Message
	states []string
	stdin  []*wire.Message
}

func (r reply) streams() string {
	var b strings.Builder
	for _, m := range r.iopub {
		if h, _ := wire.ParseHeader(m.Header); h.MsgType == "stream" {
			var c struct{ Text string }
			_ = json.Unmarshal(m.Content, &c)
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func (r reply) of(msgType string) []map[string]any {
	var out []map[string]any
	for _, m := range r.iopub {
		if h, _ := wire.ParseHeader(m.Header); h.MsgType == msgType {
			var c map[string]any
			_ = json.Unmarshal(m.Content, &c)
			out = append(out, c)
		}
	}
	return out
}

// collect reads until the reply to id and the idle status of id have arrived; onStdin is
// called for input requests of id.
func (c *client) collect(id string, timeout time.Duration, onStdin func(*wire.Message)) reply {
	c.t.Helper()
	r, ok := c.tryCollect(id, timeout, onStdin)
	if !ok {
		c.t.Fatalf("no complete answer to %s within %s (reply %v, states %v)", id, timeout, r.reply, r.states)
	}
	return r
}

// tryCollect is collect that tells, instead of failing, when the answer is not complete in time.
func (c *client) tryCollect(id string, timeout time.Duration, onStdin func(*wire.Message)) (reply, bool) {
	var r reply
	idle := false
	deadline := time.After(timeout)
	for r.reply == nil || !idle {
		m, ok := c.next(deadline)
		if !ok {
			return r, false
		}
		{
			p, _ := wire.ParseHeader(m.ParentHeader)
			if p.MsgID != id {
				continue
			}
			h, _ := wire.ParseHeader(m.Header)
			switch m.Channel {
			case wire.IOPub:
				r.iopub = append(r.iopub, m)
				if h.MsgType == "status" {
					var st struct {
						ExecutionState string `json:"execution_state"`
					}
					_ = json.Unmarshal(m.Content, &st)
					r.states = append(r.states, st.ExecutionState)
					idle = idle || st.ExecutionState == "idle"
				}
			case wire.Stdin:
				r.stdin = append(r.stdin, m)
				if onStdin != nil {
					onStdin(m)
				}
			default:
				_ = json.Unmarshal(m.Content, &r.reply)
			}
		}
	}
	return r, true
}

func (c *client) execute(code string) reply {
	c.t.Helper()
	id := c.send("execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": true, "stop_on_error": true})
	return c.collect(id, 60*time.Second, nil)
}

func TestAgent_KernelInfoAndExecuteOverBothProtocols(t *testing.T) {
	ra := startAgent(t, nil)
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			c := ra.connect(t, "s-"+newID(), v1)
			info := c.collect(c.send("kernel_info_request", map[string]any{}), 30*time.Second, nil)
			if v, _ := info.reply["protocol_version"].(string); !strings.HasPrefix(v, "5.") {
				t.Errorf("kernel_info_reply %v", info.reply)
			}

			r := c.execute("print('hello'); 1+1")
			if r.reply["status"] != "ok" {
				t.Errorf("execute_reply %v", r.reply)
			}
			if got := r.streams(); got != "hello\n" {
				t.Errorf("stream %q", got)
			}
			results := r.of("execute_result")
			if len(results) != 1 || results[0]["data"].(map[string]any)["text/plain"] != "2" {
				t.Errorf("execute_result %v", results)
			}
			if len(r.states) < 2 || r.states[0] != "busy" || r.states[len(r.states)-1] != "idle" {
				t.Errorf("status sequence %v, want busy … idle", r.states)
			}

			r = c.execute("1/0")
			if r.reply["status"] != "error" || r.reply["ename"] != "ZeroDivisionError" {
				t.Errorf("execute_reply of an error %v", r.reply)
			}
			if errs := r.of("error"); len(errs) != 1 || errs[0]["ename"] != "ZeroDivisionError" {
				t.Errorf("error output %v", errs)
			}
		})
	}
	st := ra.status(t, "")
	if st.ExecutionState != agentapi.ExecutionIdle || !st.Ready || st.RestartCount != 0 {
		t.Errorf("status %+v", st)
	}
}

// A kernel that has bound its ports but is still initialising gets one kernel_info_request,
// not one every few milliseconds: it would answer every request it found queued.
func TestAgent_AsksAKernelStillInitialisingForKernelInfoOnce(t *testing.T) {
	// IPython runs its startup files after the kernel bound its ports, before it reads them.
	ipythonDir := t.TempDir()
	startup := filepath.Join(ipythonDir, "profile_default", "startup")
	if err := os.MkdirAll(startup, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(startup, "slow.py"), []byte("import time\ntime.sleep(0.7)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IPYTHONDIR", ipythonDir)
	var mu sync.Mutex
	var answered []string
	startAgent(t, func(c *Config) {
		c.Log = funcr.New(func(_, args string) {
			if strings.Contains(args, `"msg"="Kernel answered kernel_info"`) {
				mu.Lock()
				answered = append(answered, args)
				mu.Unlock()
			}
		}, funcr.Options{})
	})
	mu.Lock()
	defer mu.Unlock()
	if len(answered) != 1 || !strings.Contains(answered[0], `"requests"=1 `) {
		t.Errorf("kernel_info answers logged: %q; want one, after one request", answered)
	}
}

func TestAgent_BinaryBuffersReachTheClient(t *testing.T) {
	ra := startAgent(t, nil)
	for _, v1 := range []bool{false, true} {
		c := ra.connect(t, "s-"+newID(), v1)
		// A comm message with a binary buffer, as ipywidgets sends.
		r := c.execute(`from ipykernel.comm import Comm
c = Comm(target_name="nbkube-test", data={})
c.send(data={"n": 1}, buffers=[b"\x00\x01binary"])`)
		var found bool
		for _, m := range r.iopub {
			if h, _ := wire.ParseHeader(m.Header); h.MsgType == "comm_msg" {
				found = len(m.Buffers) == 1 && string(m.Buffers[0]) == "\x00\x01binary"
			}
		}
		if !found {
			t.Errorf("v1=%v: no comm_msg with the buffer among %d iopub messages", v1, len(r.iopub))
		}
	}
}

func TestAgent_InputRequestGoesToTheSessionThatAsked(t *testing.T) {
	ra := startAgent(t, nil)
	asker := ra.connect(t, "asker", false)
	other := ra.connect(t, "other", false)
	id := asker.send("execute_request", map[string]any{"code": "x = input('name? ')", "silent": false,
		"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": true, "stop_on_error": true})
	r := asker.collect(id, 30*time.Second, func(m *wire.Message) {
		var c struct{ Prompt string }
		_ = json.Unmarshal(m.Content, &c)
		if c.Prompt != "name? " {
			t.Errorf("input_request prompt %q", c.Prompt)
		}
		h, _ := wire.ParseHeader(m.Header)
		reply := map[string]any{"value": "nbkube", "status": "ok"}
		hdr, _ := json.Marshal(map[string]string{"msg_id": newID(), "username": "test", "session": "asker",
			"date": time.Now().UTC().Format(time.RFC3339Nano), "msg_type": "input_reply", "version": "5.3"})
		parent, _ := json.Marshal(map[string]string{"msg_id": h.MsgID, "session": h.Session, "msg_type": "input_request"})
		content, _ := json.Marshal(reply)
		data, _ := wire.EncodeJSON(&wire.Message{Channel: wire.Stdin, Header: hdr, ParentHeader: parent, Metadata: json.RawMessage(`{}`), Content: content})
		if err := asker.ws.WriteMessage(websocket.TextMessage, data); err != nil {
			t.Error(err)
		}
	})
	if len(r.stdin) != 1 || r.reply["status"] != "ok" {
		t.Fatalf("stdin %d, reply %v", len(r.stdin), r.reply)
	}
	if v := asker.execute("x").of("execute_result"); len(v) != 1 || v[0]["data"].(map[string]any)["text/plain"] != "'nbkube'" {
		t.Errorf("x = %v", v)
	}
	// The other client saw the iopub traffic of the asker's request but no stdin or reply.
	sawIOPub := false
	for len(other.msgs) > 0 {
		m := <-other.msgs
		if p, _ := wire.ParseHeader(m.ParentHeader); p.MsgID == id {
			if m.Channel != wire.IOPub {
				t.Errorf("the other client got the asker's %s message", m.Channel)
			}
			sawIOPub = true
		}
	}
	if !sawIOPub {
		t.Error("the other client did not see the asker's iopub messages")
	}
}

func TestAgent_InterruptStopsASleepingCell(t *testing.T) {
	for _, mode := range []string{"signal", "message"} {
		t.Run(mode, func(t *testing.T) {
			ra := startAgent(t, func(c *Config) { c.InterruptMode = mode })
			c := ra.connect(t, "s", false)
			id := c.send("execute_request", map[string]any{"code": "import time; print('sleeping', flush=True); time.sleep(60)", "silent": false,
				"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
			// Interrupting before the cell runs would hit ipykernel between requests, where
			// it ignores SIGINT.
			c.waitOutput(id, "sleeping", 30*time.Second)
			if st := ra.status(t, ""); st.ExecutionState != agentapi.ExecutionBusy {
				t.Errorf("state while sleeping %q", st.ExecutionState)
			}
			start := time.Now()
			// Once in about sixty CI runs the kernel acknowledged the interrupt and slept on: a
			// SIGINT that Linux hands to another of ipykernel's threads does not wake the main
			// thread's time.sleep (CPython), under Jupyter Server as here. A user interrupts
			// again, and so does the test; the cell must still end with KeyboardInterrupt.
			var r reply
			for attempt := 1; ; attempt++ {
				if resp := ra.request(t, http.MethodPost, "/interrupt"); resp.StatusCode != http.StatusNoContent {
					t.Fatalf("interrupt: %s", resp.Status)
				}
				var ok bool
				if r, ok = c.tryCollect(id, 4*time.Second, nil); ok {
					break
				}
				if attempt == 3 {
					t.Fatalf("three interrupts did not end the cell (states %v)", r.states)
				}
				t.Logf("interrupt %d did not end the cell within 4 s; interrupting again", attempt)
			}
			if r.reply["status"] != "error" || r.reply["ename"] != "KeyboardInterrupt" {
				t.Errorf("reply %v", r.reply)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("interrupt took %s", took)
			}
			// The kernel goes on; an execute right after an interrupt may come back aborted
			// (zeromq-facts.md), so give it a second chance.
			for i := 0; ; i++ {
				r = c.execute("2+2")
				if r.reply["status"] != "aborted" || i == 1 {
					break
				}
			}
			if res := r.of("execute_result"); len(res) != 1 {
				t.Errorf("after the interrupt: %v", r.reply)
			}
		})
	}
}

func TestAgent_RestartKeepsClientsConnected(t *testing.T) {
	ra := startAgent(t, nil)
	c := ra.connect(t, "s", false)
	c.execute("x = 42")
	if resp := ra.request(t, http.MethodPost, "/restart"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("restart: %s", resp.Status)
	}
	sawRestarting := false
	for len(c.msgs) > 0 {
		m := <-c.msgs
		if h, _ := wire.ParseHeader(m.Header); h.MsgType == "status" && strings.Contains(string(m.Content), "restarting") {
			sawRestarting = true
		}
	}
	if !sawRestarting {
		t.Error("the client was not told of the restart")
	}
	r := c.execute("x")
	if r.reply["ename"] != "NameError" {
		t.Errorf("x survived the restart: %v", r.reply)
	}
	if st := ra.status(t, ""); st.RestartCount != 1 || st.ExecutionState != agentapi.ExecutionIdle {
		t.Errorf("status after restart %+v", st)
	}
}

func TestAgent_KernelThatDiesIsRestartedAndClientsAreTold(t *testing.T) {
	ra := startAgent(t, nil)
	c := ra.connect(t, "s", false)
	c.send("execute_request", map[string]any{"code": "import os; os.kill(os.getpid(), 9)", "silent": false,
		"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	testenvEventually(t, "restarted", 30*time.Second, func() bool {
		st := ra.status(t, "")
		return st.RestartCount == 1 && st.ExecutionState == agentapi.ExecutionIdle
	})
	if got := c.execute("1+1").of("execute_result"); len(got) != 1 {
		t.Error("the restarted kernel does not execute")
	}
}

func TestAgent_ReplaysWhatADisconnectedSessionMissed(t *testing.T) {
	ra := startAgent(t, nil)
	c := ra.connect(t, "replay-me", false)
	id := c.send("execute_request", map[string]any{"code": "import time\nfor i in range(5):\n    print(i, flush=True); time.sleep(0.2)",
		"silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	// Leave right after the request went out, with a close handshake: closing the socket
	// with unread data makes Linux reset the connection, and the reset discards the request
	// if the agent has not read it yet. What the agent sent before it saw the close reached
	// this connection; everything after must be replayed.
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
	var before reply
	for m := range c.msgs {
		if p, _ := wire.ParseHeader(m.ParentHeader); p.MsgID == id && m.Channel == wire.IOPub {
			before.iopub = append(before.iopub, m)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	c2 := ra.connect(t, "replay-me", false)
	r := c2.collect(id, 20*time.Second, nil)
	if got := before.streams() + r.streams(); got != "0\n1\n2\n3\n4\n" {
		t.Errorf("output before leaving %q, replayed %q", before.streams(), r.streams())
	}
	if r.reply["status"] != "ok" {
		t.Errorf("replayed reply %v", r.reply)
	}
	// A different session gets nothing of it.
	c3 := ra.connect(t, "someone-else", false)
	c3.execute("1")
}

// Output streamed as fast as the kernel prints is read in moderated batches and written to
// the client in bursts: all of it arrives, in order, on both protocols.
func TestAgent_FastOutputArrivesWholeAndInOrder(t *testing.T) {
	ra := startAgent(t, nil)
	const n = 5000
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, v1 := range []bool{false, true} {
		c := ra.connectWith(t, fmt.Sprintf("fast-%v", v1), v1, "&iopub_msg_rate_limit=0&iopub_data_rate_limit=0")
		r := c.collect(c.send("execute_request", map[string]any{"code": fmt.Sprintf("for i in range(%d): print(i, flush=True)", n),
			"silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true}),
			60*time.Second, nil)
		if got := r.streams(); got != want.String() {
			t.Errorf("v1 %v: %d bytes of output, want %d; in order and whole: %v", v1, len(got), want.Len(), got == want.String())
		}
		if r.reply["status"] != "ok" {
			t.Errorf("v1 %v: reply %v", v1, r.reply)
		}
	}
}

func TestAgent_RefusesRequestsWithoutTheToken(t *testing.T) {
	ra := startAgent(t, nil)
	for _, path := range []string{"/status", "/channels", "/interrupt"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ra.addr+path, nil)
		if path == "/interrupt" {
			req.Method = http.MethodPost
		}
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a wrong token: %s", path, resp.Status)
		}
	}
	resp, err := http.Get("http://" + ra.addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("readyz: %v %v", resp, err)
	}
}

func TestAgent_HeartbeatReportsAFrozenKernelDead(t *testing.T) {
	ra := startAgent(t, func(c *Config) { c.HeartbeatInterval = 200 * time.Millisecond })
	c := ra.connect(t, "s", false)
	pidReply := c.execute("import os; os.getpid()").of("execute_result")
	var pid int
	fmt.Sscan(pidReply[0]["data"].(map[string]any)["text/plain"].(string), &pid)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testenvEventually(t, "dead", 10*time.Second, func() bool { return ra.status(t, "").ExecutionState == agentapi.ExecutionDead })
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenvEventually(t, "alive again", 10*time.Second, func() bool { return ra.status(t, "").ExecutionState != agentapi.ExecutionDead })
}

func TestAgent_ShutdownEndsRun(t *testing.T) {
	ra := startAgent(t, nil)
	start := time.Now()
	if resp := ra.request(t, http.MethodPost, "/shutdown"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("shutdown: %s", resp.Status)
	}
	select {
	case err := <-ra.done:
		if err != nil {
			t.Errorf("Run after shutdown = %v", err)
		}
		ra.done <- err // for the cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not end after shutdown")
	}
	t.Logf("shutdown took %s", time.Since(start))
}

func TestRun_KernelThatFailsToStartEndsWithItsExitCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "conn.json")
	cfg, _ := testConfig(t, "/bin/sh", "-c", `cp "$0" "$1"; echo "no such module" >&2; exit 3`, "{connection_file}", out)
	cfg.TerminationLog = filepath.Join(t.TempDir(), "termination-log")
	err := Run(context.Background(), cfg)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 3 {
		t.Fatalf("Run = %v, want the kernel's exit code 3", err)
	}
	if msg, _ := os.ReadFile(cfg.TerminationLog); !strings.Contains(string(msg), "code 3") || !strings.Contains(string(msg), "no such module") {
		t.Errorf("termination message %q does not say why", msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var info ConnectionInfo
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	ports := map[int]bool{info.ShellPort: true, info.IOPubPort: true, info.StdinPort: true, info.ControlPort: true, info.HBPort: true}
	if len(ports) != 5 || ports[0] {
		t.Errorf("ports not five distinct ones: %+v", info)
	}
	if info.Key != "0123abcd" || info.SignatureScheme != "hmac-sha256" || info.Transport != "tcp" || info.IP != "127.0.0.1" {
		t.Errorf("connection info %+v", info)
	}
	if entries, _ := os.ReadDir(cfg.RuntimeDir); len(entries) != 0 {
		t.Errorf("connection file left behind: %v", entries)
	}
}

func TestRun_KernelWithAnotherKeyIsNeverReady(t *testing.T) {
	// The kernel signs with a key the agent does not have: its messages are rejected (and
	// it rejects the agent's), so it never counts as started.
	cfg, _ := testConfig(t, "/bin/sh", "-c",
		`sed 's/"key": *"[^"]*"/"key": "another-key"/' "$0" > "$0.other" && exec /usr/bin/python3 -m ipykernel_launcher -f "$0.other"`,
		"{connection_file}")
	cfg.StartTimeout = 3 * time.Second
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "did not answer kernel_info") {
		t.Fatalf("Run = %v, want a start timeout", err)
	}
}

func TestRun_RefusesAMissingKernelCommand(t *testing.T) {
	cfg, _ := testConfig(t, "/nonexistent/kernel")
	if err := Run(context.Background(), cfg); err == nil {
		t.Error("a kernel that cannot start was not reported")
	}
	cfg.Argv = nil
	if err := Run(context.Background(), cfg); err == nil {
		t.Error("empty argv accepted")
	}
}

func TestRun_StopsTheKernelOnCancel(t *testing.T) {
	ra := startAgent(t, nil)
	start := time.Now()
	ra.stop()
	select {
	case err := <-ra.done:
		if err != nil {
			t.Errorf("Run after cancel = %v", err)
		}
		ra.done <- err
	case <-time.After(15 * time.Second):
		t.Fatal("agent did not stop the kernel")
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("stopping took %s", took)
	}
}

func testenvEventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKernelIP_IsThePodsOwnOnlyOnTheLocalNode(t *testing.T) {
	for listen, want := range map[string]string{
		"10.244.0.7:8777": "127.0.0.1", // a pod with its own network namespace
		"127.0.0.9:8777":  "127.0.0.9", // the local node: pods share the host's loopback
		":8777":           "127.0.0.1",
	} {
		if got := kernelIP(listen); got != want {
			t.Errorf("kernelIP(%q) = %q, want %q", listen, got, want)
		}
	}
}

func TestAgent_ReadinessProbeWaitsForTheKernel(t *testing.T) {
	// A kernel that takes a second before it starts: the probe without ?wait fails at once,
	// with ?wait it answers 200 as soon as the kernel does, and a short wait still fails.
	argv := append([]string{"/bin/sh", "-c", `sleep 1; exec "$0" "$@"`}, ipykernel...)
	cfg, addr := testConfig(t, argv...)
	cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testenvEventually(t, "listening", 10*time.Second, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	probe := func(query string) (int, time.Duration) {
		start := time.Now()
		resp, err := http.Get("http://" + addr + "/readyz" + query)
		if err != nil {
			t.Fatalf("readyz%s: %v", query, err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	if code, _ := probe(""); code != http.StatusServiceUnavailable {
		t.Errorf("readyz of a kernel not started yet: %d, want 503", code)
	}
	if code, took := probe("?wait=50ms"); code != http.StatusServiceUnavailable || took < 50*time.Millisecond {
		t.Errorf("readyz?wait=50ms of a kernel not started yet: %d after %s, want 503 after 50 ms", code, took)
	}
	code, took := probe("?wait=30s")
	if code != http.StatusOK {
		t.Errorf("readyz?wait=30s: %d, want 200 once the kernel answered", code)
	}
	if took < 300*time.Millisecond {
		t.Errorf("readyz?wait=30s answered after %s, before the kernel could have started", took)
	}
	// Ready: answered at once however long the probe may wait.
	if code, took := probe("?wait=30s"); code != http.StatusOK || took > time.Second {
		t.Errorf("readyz?wait=30s of a ready kernel: %d after %s", code, took)
	}
}

func TestProbeListening(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		l, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		a := l.Addr().(*net.TCPAddr)
		addr, err := sockaddr(a.IP.String(), a.Port)
		if err != nil {
			t.Fatal(err)
		}
		if err := probeListening(addr); err != nil {
			t.Errorf("%s listening on %s: %v", network, a, err)
		}
		l.Close()
		if err := probeListening(addr); err == nil {
			t.Errorf("%s closed on %s: the probe says it listens", network, a)
		}
	}
	if _, err := sockaddr("localhost", 1); err == nil {
		t.Error("a host name is not an address")
	}
}

// The agent learns that a kernel is about to bind its ports from the kernel's read of its
// connection file; the watch ends with its context and leaves no goroutine behind.
func TestWatchOpen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "kernel.json")
	if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	read, err := watchOpen(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-read:
		t.Fatal("reported a read before anything opened the file")
	case <-time.After(50 * time.Millisecond):
	}
	if out, err := exec.Command("cat", path).CombinedOutput(); err != nil {
		t.Fatalf("cat: %v: %s", err, out)
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("another process read the file; no report")
	}

	// Ended by its context, the watch reports nothing.
	ctx2, cancel2 := context.WithCancel(context.Background())
	read2, err := watchOpen(ctx2, path)
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	time.Sleep(20 * time.Millisecond)
	if out, err := exec.Command("cat", path).CombinedOutput(); err != nil {
		t.Fatalf("cat: %v: %s", err, out)
	}
	select {
	case <-read2:
		t.Error("a read was reported after the watch ended")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := watchOpen(ctx, filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("watching a missing file: no error")
	}
}

// readerFunc is an io.Reader from a function.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// A stream (reads back to back) is read in moderated, larger reads; an exchange at the pace of
// execute round trips never is, and a stream that pauses is not any more.
func TestModeratedReader(t *testing.T) {
	wait := time.Duration(0)
	m := &moderatedReader{r: readerFunc(func(p []byte) (int, error) {
		time.Sleep(wait)
		p[0] = 'x'
		return 1, nil
	})}
	buf := make([]byte, 8)
	read := func() time.Duration {
		start := time.Now()
		if _, err := m.Read(buf); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}

	// Round trips: a few messages every couple of milliseconds.
	wait = 2 * time.Millisecond
	for i := range 3 * streamReads {
		read()
		if m.streaming {
			t.Fatalf("moderating after %d reads 2 ms apart", i+1)
		}
	}
	// A stream: data is always waiting. (A loaded machine may stretch a few reads; the stream
	// is recognised all the same, a little later.)
	wait = 0
	engage := func() {
		for range 10 * streamReads {
			if read(); m.streaming {
				return
			}
		}
		t.Fatalf("%d reads back to back: not moderating", 10*streamReads)
	}
	engage()
	if d := read(); d < moderation {
		t.Errorf("a moderated read took %s, less than the pause of %s", d, moderation)
	}
	for try := 0; !m.streaming; try++ {
		if try == 5 {
			t.Fatal("data waited after the pause, yet the stream ended")
		}
		engage()
		read()
	}
	// The stream pauses: a read waits for data, and the next one is not held back.
	wait = 5 * time.Millisecond
	read()
	if m.streaming {
		t.Fatal("a read that waited for data did not end the stream")
	}
}

// The agent's hint moderates reads that come too far apart to be counted as a stream.
func TestModeratedReader_Hint(t *testing.T) {
	hint := &outputHint{}
	m := &moderatedReader{hint: hint, r: readerFunc(func(p []byte) (int, error) {
		time.Sleep(2 * time.Millisecond)
		p[0] = 'x'
		return 1, nil
	})}
	buf := make([]byte, 8)
	read := func() time.Duration {
		start := time.Now()
		if _, err := m.Read(buf); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := read(); d >= moderation {
		t.Fatalf("a read without the hint took %s", d)
	}
	hint.streaming.Store(true)
	for range 3 {
		if d := read(); d < moderation {
			t.Fatalf("a read with the hint took %s, less than the pause of %s", d, moderation)
		}
	}
	hint.streaming.Store(false)
	if d := read(); d >= moderation {
		t.Fatalf("a read after the hint ended took %s", d)
	}
}

// A run of quick stream messages arms the hint, batches further apart keep it, and a message
// of another kind ends it; a request's few prints, or a slow loop, never arm it.
func TestIncarnation_NoteOutput(t *testing.T) {
	inc := &incarnation{}
	now := time.Unix(1000, 0)
	step := func(msgType string, gap time.Duration) bool {
		now = now.Add(gap)
		inc.noteOutput(msgType, now)
		return inc.output.on()
	}
	// Round trips that print: busy, execute_input, stream, idle, quickly, again and again.
	for range 20 {
		for _, mt := range []string{"status", "execute_input", "stream", "status"} {
			if step(mt, time.Millisecond) {
				t.Fatalf("armed by a request's own output (%s)", mt)
			}
		}
	}
	// A slow loop: a line every 10 ms.
	for range 3 * outputRun {
		if step("stream", 10*time.Millisecond) {
			t.Fatal("armed by a line every 10 ms")
		}
	}
	// A fast loop, in the next request.
	step("status", time.Millisecond)
	for i := range outputRun {
		if armed := step("stream", time.Millisecond); armed != (i == outputRun-1) {
			t.Fatalf("after %d quick stream messages armed is %v", i+1, armed)
		}
	}
	// Moderated: batches 8 ms apart.
	for range 5 {
		if !step("stream", 2*moderation) {
			t.Fatal("a batch after the pause ended the stream")
		}
		for range 4 {
			step("stream", 0)
		}
	}
	if step("status", time.Millisecond) {
		t.Fatal("the idle status did not end the stream")
	}
	if step("stream", time.Millisecond) {
		t.Fatal("armed again by the first stream message after it")
	}
}

// Through a kernel socket dialled with the hint, a moderated read raises the socket's
// low-water mark only for its pause: a few bytes after a stream still arrive at once, and
// the mark is one byte again after each read.
func TestBufferedTCP_ModeratedReadsGetSmallData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	hint := &outputHint{}
	hint.streaming.Store(true)
	c, err := bufferedTCP{tcp: transport.New("tcp")}.Dial(withOutputHint(context.Background(), hint), &net.Dialer{}, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	defer server.Close()
	lowat := func() int {
		raw, err := c.(*bufferedConn).Conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var serr error
		if err := raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) }); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		return v
	}
	buf := make([]byte, 64)
	for i := range 3 {
		// The data is sent during the read's pause, or before it, or while the read waits.
		go func() {
			time.Sleep(time.Duration(i) * moderation)
			_, _ = server.Write([]byte("small"))
		}()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "small" {
			t.Fatalf("read %d: %q, %v after %s", i, buf[:n], err, time.Since(start))
		}
		if d := time.Since(start); d < moderation {
			t.Errorf("read %d took %s: not moderated", i, d)
		}
		if v := lowat(); v != 1 {
			t.Errorf("after read %d the low-water mark is %d", i, v)
		}
	}
}
