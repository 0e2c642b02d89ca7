package jpclient

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
)

// Msg is a message read: the parts of Jupyter's message that a client acts on.
type Msg struct {
	// Channel is shell, iopub, stdin or control (a single-channel connection's, Options.Channel).
	Channel string `json:"channel"`
	Header  struct {
		MsgType string `json:"msg_type"`
	} `json:"header"`
	ParentHeader struct {
		MsgID string `json:"msg_id"`
	} `json:"parent_header"`
	Content json.RawMessage `json:"content"`
	// At is when the Conn read it (with ReadAhead; zero without).
	At time.Time `json:"-"`
}

// ExecutionState is a status message's execution_state, else "".
func (m *Msg) ExecutionState() string {
	if m.Header.MsgType != "status" {
		return ""
	}
	var c struct {
		State string `json:"execution_state"`
	}
	_ = json.Unmarshal(m.Content, &c)
	return c.State
}

// request is a message sent, as JupyterLab's JSON serializer writes it (but for buffers: no
// request here has any).
type request struct {
	Channel      string   `json:"channel,omitempty"`
	Header       header   `json:"header"`
	ParentHeader struct{} `json:"parent_header"`
	Metadata     any      `json:"metadata"`
	Content      any      `json:"content"`
}

// header is the client's own, not internal/wire's Header: the client checks nbkube's codec
// and must not change with it.
type header struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	Version  string `json:"version"`
}

// writeTimeout bounds one write: a request is small, and the server reads all the time.
const writeTimeout = 30 * time.Second

// Send sends a request of msgType with content (JSON-encoded) on channel ("shell",
// "control"; left out on a single-channel connection) and returns its msg_id. The message
// goes out in one write: a frame split over several writes would wait for an ACK with
// Nagle's algorithm on.
func (c *Conn) Send(channel, msgType string, content any) (string, error) {
	return c.sendWith(channel, msgType, struct{}{}, content)
}

func (c *Conn) sendWith(channel, msgType string, metadata, content any) (string, error) {
	if c.opts.Channel != "" {
		channel = ""
	}
	m := request{Channel: channel, Metadata: metadata, Content: content, Header: header{
		MsgID: NewID(), MsgType: msgType, Session: c.session, Username: c.opts.Username,
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Version: "5.3",
	}}
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := c.SendRaw(data); err != nil {
		return "", fmt.Errorf("send %s: %w", msgType, err)
	}
	return m.Header.MsgID, nil
}

// SendRaw writes one text frame as is.
func (c *Conn) SendRaw(data []byte) error {
	if err := c.ws.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// executeRequest is the content of an execute_request.
type executeRequest struct {
	Code            string   `json:"code"`
	Silent          bool     `json:"silent"`
	StoreHistory    bool     `json:"store_history"`
	UserExpressions struct{} `json:"user_expressions"`
	AllowStdin      bool     `json:"allow_stdin"`
	StopOnError     bool     `json:"stop_on_error"`
}

// SendExecute sends an execute_request for code on shell and returns its msg_id. With
// stopOnError, ipykernel aborts the requests that reach it in the moments after a cell that
// raised, as a notebook's "run all" wants; a test that sends its next cell at once does not.
func (c *Conn) SendExecute(code string, stopOnError bool) (string, error) {
	return c.Send("shell", "execute_request", &executeRequest{Code: code, StoreHistory: true, StopOnError: stopOnError})
}

// SendCell sends an execute_request for code as JupyterLab runs the cell of cellID with its
// recordTiming setting on: the cell's id in its metadata (cellId), and the ask for a timing
// record (recordTiming). It returns the msg_id.
func (c *Conn) SendCell(cellID, code string) (string, error) {
	return c.sendWith("shell", "execute_request", map[string]any{"cellId": cellID, "recordTiming": true},
		&executeRequest{Code: code, StoreHistory: true, StopOnError: true})
}
