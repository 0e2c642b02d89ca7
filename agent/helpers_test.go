package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/internal/wire"
)

const testToken = "agent-token-0123"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is a Config that runs argv, with the kernel's Secret (its key and testToken) in a
// directory of its own, and a free address for the agent, which it returns too.
func testConfig(t *testing.T, argv ...string) (Config, string) {
	t.Helper()
	secret := t.TempDir()
	for name, v := range map[string]string{agentapi.SecretKeyHMAC: "0123abcd\n", agentapi.SecretKeyToken: testToken + "\n"} {
		if err := os.WriteFile(filepath.Join(secret, name), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
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

// runningAgent is an agent that Run runs for a test.
type runningAgent struct {
	addr string
	// done receives what Run returned; a test that takes it puts it back for the cleanup.
	done chan error
	stop context.CancelFunc
}

// startAgent runs an agent with a real ipykernel and returns once the kernel is ready.
func startAgent(t *testing.T, mutate func(*Config)) *runningAgent {
	t.Helper()
	cfg, addr := testConfig(t, ipykernel...)
	cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	if mutate != nil {
		mutate(&cfg)
	}
	ra := runAgent(t, cfg, addr)
	ra.status(t, "?"+agentapi.QueryWait+"="+agentapi.WaitReady)
	return ra
}

// runAgent runs an agent listening on addr and returns once it listens, whatever its kernel
// does; the test's cleanup stops it.
func runAgent(t *testing.T, cfg Config, addr string) *runningAgent {
	t.Helper()
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
	testenv.Eventually(t, "the agent to listen", 10*time.Second, func() error {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
	return ra
}

// waitEnded waits for Run to end, which it must within 15 s (a shutdown's grace periods) and
// without an error.
func (ra *runningAgent) waitEnded(t *testing.T) {
	t.Helper()
	const timeout = 15 * time.Second
	select {
	case err := <-ra.done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
		ra.done <- err // for the cleanup
	case <-time.After(timeout):
		t.Fatalf("Run did not end within %s", timeout)
	}
}

// request calls the agent with its token.
func (ra *runningAgent) request(t *testing.T, method, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+ra.addr+path, nil)
	req.Header.Set("Authorization", agentapi.AuthScheme+" "+testToken)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// status asks the agent for its Status; query is "" or starts with '?'.
func (ra *runningAgent) status(t *testing.T, query string) agentapi.Status {
	t.Helper()
	resp := ra.request(t, http.MethodGet, agentapi.PathStatus+query)
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
	// metadata, when set, is the metadata of the messages sent ({} otherwise).
	metadata json.RawMessage
	// backlog holds messages read ahead by waitOutput, for collect.
	backlog []*wire.Message
}

// waitOutput reads until a stream output of id contains text, for at most 30 s; what it reads
// stays for collect.
func (c *client) waitOutput(id, text string) {
	c.t.Helper()
	const timeout = 30 * time.Second
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

// connect opens the channels of session, on the v1 protocol or Jupyter's JSON one.
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
	u := "ws://" + ra.addr + agentapi.PathChannels + "?" + agentapi.QuerySessionID + "=" + url.QueryEscape(session) + query
	ws, resp, err := d.Dial(u, http.Header{"Authorization": {agentapi.AuthScheme + " " + testToken}})
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

// send sends a shell request of the client's session and returns its id.
func (c *client) send(msgType string, content any) string {
	c.t.Helper()
	return c.sendOn(wire.Shell, msgType, json.RawMessage(`{}`), content)
}

// sendOn sends a message of the client's session on channel, with parent as its parent
// header, and returns its id.
func (c *client) sendOn(channel, msgType string, parent json.RawMessage, content any) string {
	c.t.Helper()
	id := newID()
	header := map[string]string{"msg_id": id, "username": "test", "session": c.session,
		"date": time.Now().UTC().Format(time.RFC3339Nano), "msg_type": msgType, "version": "5.3"}
	hb, _ := json.Marshal(header)
	cb, _ := json.Marshal(content)
	md := c.metadata
	if md == nil {
		md = json.RawMessage(`{}`)
	}
	m := &wire.Message{Channel: channel, Header: hb, ParentHeader: parent, Metadata: md, Content: cb}
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
				idle = idle || st.ExecutionState == agentapi.ExecutionIdle
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
	return r, true
}

// interruptCell interrupts the running cell id through the agent until it ends, and returns
// what it produced. Once in about sixty CI runs the kernel acknowledged the interrupt and slept
// on: a SIGINT that Linux hands to another of ipykernel's threads does not wake the main
// thread's time.sleep (CPython), under Jupyter Server as here. A user interrupts again, and so
// does this, up to three times; the cell must still end with KeyboardInterrupt.
func (ra *runningAgent) interruptCell(t *testing.T, c *client, id string) reply {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if resp := ra.request(t, http.MethodPost, agentapi.PathInterrupt); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("interrupt: %s", resp.Status)
		}
		r, ok := c.tryCollect(id, 4*time.Second, nil)
		if ok {
			return r
		}
		if attempt == 3 {
			t.Fatalf("three interrupts did not end the cell (states %v)", r.states)
		}
		t.Logf("interrupt %d did not end the cell within 4 s; interrupting again", attempt)
	}
}

// execute runs code and returns all it produced.
func (c *client) execute(code string) reply {
	c.t.Helper()
	return c.collect(c.sendExecute(code, true), 60*time.Second, nil)
}

// sendExecute sends an execute_request of code, as a notebook does, and returns its id.
func (c *client) sendExecute(code string, allowStdin bool) string {
	c.t.Helper()
	return c.send("execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": allowStdin, "stop_on_error": true})
}
