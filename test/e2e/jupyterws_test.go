package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// jupyterWS is a client of a kernel's channels WebSocket in Jupyter Server's JSON protocol, as
// JupyterLab speaks it, or of one channel of the older IPython interface; it serves for
// nbkube's channels and for Jupyter Server's alike. It encodes and decodes with encoding/json
// rather than nbkube's own codec, so that it checks nbkube's frames the way a third-party
// client reads them. One goroutine reads, so that a wait can time out without a read
// deadline (which would break the connection); the test's goroutine is the only writer.
type jupyterWS struct {
	t    testing.TB
	conn *websocket.Conn
	// session is the "session" of the headers this client sends: replies come back to it.
	session string
	// only is the channel of a single-channel connection (/kernels/<id>/shell): messages go
	// out without a "channel", as IPython sent them.
	only string
	// in carries the messages read; it is closed when the connection ends.
	in chan *jupyterMsg
	// readErr is why reading stopped; it is set before in is closed.
	readErr error
	// seen is every message taken from in, in order.
	seen []*jupyterMsg
	// closing is closed by close: a reader waiting on a full in stops.
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// jupyterMsg is one message of the JSON protocol.
type jupyterMsg struct {
	Channel      string          `json:"channel,omitempty"`
	Header       jupyterHeader   `json:"header"`
	ParentHeader jupyterHeader   `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
}

type jupyterHeader struct {
	MsgID    string `json:"msg_id,omitempty"`
	MsgType  string `json:"msg_type,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"`
	Version  string `json:"version,omitempty"`
}

// maxFrameBytes bounds one frame from the server: the tests' outputs are small.
const maxFrameBytes = 16 << 20

// dialJupyterWS opens the WebSocket at route (relative to the API's base URL) with the API's
// token; sessionID, when set, is sent as ?session_id= and used in the headers, as
// JupyterLab does, so that the agent can replay what the client misses while away.
func dialJupyterWS(t testing.TB, api *jupyterAPI, route, sessionID string) *jupyterWS {
	t.Helper()
	u, err := url.Parse(api.wsURL(route))
	if err != nil {
		t.Fatal(err)
	}
	session := sessionID
	if sessionID != "" {
		u.RawQuery = url.Values{"session_id": {sessionID}}.Encode()
	} else {
		session = randomID()
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, resp, err := d.Dial(u.String(), http.Header{"Authorization": {"token " + api.token}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", u.Redacted(), err, status)
	}
	conn.SetReadLimit(maxFrameBytes)
	ws := &jupyterWS{t: t, conn: conn, session: session, in: make(chan *jupyterMsg, 1024),
		closing: make(chan struct{}), done: make(chan struct{})}
	if strings.HasPrefix(route, "kernels/") {
		// kernels/<id>/shell, iopub or stdin.
		ws.only = path.Base(route)
	}
	go ws.readLoop()
	t.Cleanup(ws.close)
	return ws
}

func (ws *jupyterWS) readLoop() {
	defer close(ws.done)
	defer close(ws.in)
	for {
		typ, data, err := ws.conn.ReadMessage()
		if err != nil {
			ws.readErr = err
			return
		}
		if typ != websocket.TextMessage {
			ws.t.Errorf("a binary frame (%d bytes) on the JSON protocol without buffers", len(data))
			continue
		}
		m := &jupyterMsg{}
		if err := json.Unmarshal(data, m); err != nil {
			ws.t.Errorf("undecodable frame %.200q: %v", data, err)
			continue
		}
		if m.Channel == "" {
			m.Channel = ws.only
		}
		select {
		case ws.in <- m:
		default:
			// Only a full buffer waits on closing too: what arrived before a close stays
			// for drain.
			select {
			case ws.in <- m:
			case <-ws.closing:
				return
			}
		}
	}
}

// close ends the connection with a close frame and waits for the reader; it may be called
// again.
func (ws *jupyterWS) close() {
	ws.closeOnce.Do(func() {
		close(ws.closing)
		_ = ws.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		// Wait for the server's close frame before closing the socket: a socket closed with
		// unread data resets the connection, and the reset can discard what this client sent
		// last before the server has read it.
		select {
		case <-ws.done:
		case <-time.After(5 * time.Second):
		}
		_ = ws.conn.Close()
	})
	<-ws.done
}

// sendRaw writes one text frame as is.
func (ws *jupyterWS) sendRaw(text string) {
	ws.t.Helper()
	_ = ws.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := ws.conn.WriteMessage(websocket.TextMessage, []byte(text)); err != nil {
		ws.t.Fatalf("send: %v", err)
	}
}

// send sends a request on channel ("" on a single-channel connection) and returns its msg_id.
func (ws *jupyterWS) send(channel, msgType string, content any) string {
	ws.t.Helper()
	body, err := json.Marshal(content)
	if err != nil {
		ws.t.Fatal(err)
	}
	m := jupyterMsg{Channel: channel, Metadata: json.RawMessage(`{}`), Content: body, Header: jupyterHeader{
		MsgID: randomID(), MsgType: msgType, Session: ws.session, Username: "e2e",
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Version: "5.3",
	}}
	data, err := json.Marshal(m)
	if err != nil {
		ws.t.Fatal(err)
	}
	ws.sendRaw(string(data))
	return m.Header.MsgID
}

// execute sends an execute_request for code and returns its msg_id. stop_on_error is false:
// after a cell that raises, ipykernel would otherwise abort the requests that reach it in the
// next moments, and the tests send their next cell at once.
func (ws *jupyterWS) execute(code string) string {
	ws.t.Helper()
	channel := "shell"
	if ws.only != "" {
		channel = ""
	}
	return ws.send(channel, "execute_request", map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": false,
	})
}

// run executes code and waits (cellTimeout) for its reply and the kernel's return to idle.
func (ws *jupyterWS) run(code string) *execution {
	ws.t.Helper()
	e := newExecution(ws.execute(code))
	ws.await(e, cellTimeout, "execution of "+code, (*execution).finished)
	return e
}

// execution gathers what the kernel answers to one request.
type execution struct {
	msgID string
	// reply is the content of the reply on shell (or control).
	reply     map[string]any
	replyType string
	// idle is set by the iopub status "idle" that ends the request.
	idle bool
	// stdout, stderr: the request's stream outputs, concatenated.
	stdout, stderr strings.Builder
	// result is the text/plain of its execute_result; ename the name of its iopub error.
	result, ename string
	// iopub are the types of the request's iopub messages in order, a status with its
	// state ("status:busy").
	iopub []string
}

func newExecution(msgID string) *execution { return &execution{msgID: msgID} }

// finished: the reply and the idle status have both arrived.
func (e *execution) finished() bool { return e.reply != nil && e.idle }

func (e *execution) replied() bool { return e.reply != nil }

func (e *execution) wentIdle() bool { return e.idle }

// errorName is the name of the request's error as its iopub error message gives it. When
// IPython failed to format the traceback (stack_data's NotOneValueFound, as for a
// KeyboardInterrupt raised at line 0), it prints a fallback instead of sending that message;
// then the reply's ename is all there is.
func (e *execution) errorName() string {
	if e.ename == "" && strings.Contains(e.stdout.String(), "Unexpected exception formatting exception") {
		name, _ := e.reply["ename"].(string)
		return name
	}
	return e.ename
}

// status is the reply's "status": ok, error or aborted.
func (e *execution) status() string {
	s, _ := e.reply["status"].(string)
	return s
}

// add takes in one message if it answers e's request.
func (e *execution) add(t testing.TB, m *jupyterMsg) {
	if m.ParentHeader.MsgID != e.msgID {
		return
	}
	var content map[string]any
	if err := json.Unmarshal(m.Content, &content); err != nil {
		t.Errorf("%s content %.200q: %v", m.Header.MsgType, m.Content, err)
		return
	}
	switch m.Channel {
	case "shell", "control":
		e.reply, e.replyType = content, m.Header.MsgType
	case "iopub":
		kind := m.Header.MsgType
		if kind == "status" {
			kind += ":" + fmt.Sprint(content["execution_state"])
		}
		e.iopub = append(e.iopub, kind)
		switch m.Header.MsgType {
		case "status":
			if content["execution_state"] == "idle" {
				e.idle = true
			}
		case "stream":
			text, _ := content["text"].(string)
			if content["name"] == "stderr" {
				e.stderr.WriteString(text)
			} else {
				e.stdout.WriteString(text)
			}
		case "execute_result":
			data, _ := content["data"].(map[string]any)
			e.result, _ = data["text/plain"].(string)
		case "error":
			e.ename, _ = content["ename"].(string)
		}
	}
}

// next waits up to d for the next message and records it in seen. It returns nil when none
// came in time; ended says that the connection ended first.
func (ws *jupyterWS) next(d time.Duration) (m *jupyterMsg, ended bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case m, ok := <-ws.in:
		if !ok {
			return nil, true
		}
		ws.seen = append(ws.seen, m)
		return m, false
	case <-timer.C:
		return nil, false
	}
}

// await reads messages into e until done(e), failing the test after timeout or when the
// connection ends first.
func (ws *jupyterWS) await(e *execution, timeout time.Duration, what string, done func(*execution) bool) {
	ws.t.Helper()
	deadline := time.Now().Add(timeout)
	for !done(e) {
		m, ended := ws.next(time.Until(deadline))
		if ended {
			ws.t.Fatalf("%s: the connection ended first (%v): %s", what, ws.readErr, e)
		}
		if m == nil {
			ws.t.Fatalf("%s: not done within %s: %s (idle %t)", what, timeout, e, e.idle)
		}
		e.add(ws.t, m)
	}
}

// drain reads what is left into e (if not nil) until the connection ends.
func (ws *jupyterWS) drain(e *execution, timeout time.Duration) {
	ws.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m, ended := ws.next(time.Until(deadline))
		if ended {
			return
		}
		if m == nil {
			ws.t.Fatalf("the connection did not end within %s", timeout)
		}
		if e != nil {
			e.add(ws.t, m)
		}
	}
}

// awaitKernelInfo asks for kernel_info until the kernel answers: on a new connection and
// after a restart a request may get no answer (Jupyter Server's gateway relay may drop a new
// connection's first messages; a kernel process being replaced answers nothing).
func (ws *jupyterWS) awaitKernelInfo(within time.Duration) error {
	ws.t.Helper()
	deadline := time.Now().Add(within)
	asked := map[string]bool{}
	for time.Now().Before(deadline) {
		asked[ws.send("shell", "kernel_info_request", map[string]any{})] = true
		retry := time.Now().Add(3 * time.Second)
		for {
			m, ended := ws.next(time.Until(retry))
			if ended {
				ws.t.Fatalf("kernel_info: the connection ended (%v)", ws.readErr)
			}
			if m == nil {
				break
			}
			if m.Header.MsgType == "kernel_info_reply" && asked[m.ParentHeader.MsgID] {
				return nil
			}
		}
	}
	return fmt.Errorf("no kernel_info_reply within %s", within)
}

// replyTo is the reply to msgID among the messages read so far, if any.
func (ws *jupyterWS) replyTo(msgID string) *jupyterMsg {
	for _, m := range ws.seen {
		if m.ParentHeader.MsgID == msgID && m.Channel != "iopub" {
			return m
		}
	}
	return nil
}

// kernelPID is the kernel's process id, as the kernel itself tells.
func kernelPID(t testing.TB, ws *jupyterWS) int {
	t.Helper()
	e := ws.run("import os; os.getpid()")
	pid, err := strconv.Atoi(e.result)
	if err != nil {
		t.Fatalf("os.getpid(): %s", e)
	}
	return pid
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// String shows an execution in failure messages.
func (e *execution) String() string {
	return fmt.Sprintf("%s %v, result %q, error %q, stdout %q, stderr %q, iopub %v", e.replyType, e.reply, e.result, e.ename, e.stdout.String(), e.stderr.String(), e.iopub)
}
