package main

// kernelClient and kernelConn drive one server's kernels as a Jupyter frontend does: the
// REST calls and the JSON protocol on the channels WebSocket.

import (
	"bytes"
	"crypto/rand"
	_ "embed" // floor.py
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// kernelClient drives one server's kernels the way a Jupyter frontend does.
type kernelClient struct {
	s  *server
	hc *http.Client
}

func (c *kernelClient) do(method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, c.s.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "token "+c.s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.hc.Do(req)
}

// create is POST /api/kernels; it returns the new kernel's id.
func (c *kernelClient) create() (string, error) {
	resp, err := c.do(http.MethodPost, "api/kernels", strings.NewReader(`{"name":"python3"}`))
	if err != nil {
		return "", fmt.Errorf("POST /api/kernels: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("POST /api/kernels: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /api/kernels: status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	var model struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &model); err != nil {
		return "", fmt.Errorf("POST /api/kernels: %w", err)
	}
	if model.ID == "" {
		return "", fmt.Errorf("POST /api/kernels: no kernel id in %.200q", body)
	}
	return model.ID, nil
}

// remove is DELETE /api/kernels/<id>.
func (c *kernelClient) remove(id string) error {
	resp, err := c.do(http.MethodDelete, "api/kernels/"+id, nil)
	if err != nil {
		return fmt.Errorf("DELETE /api/kernels/%s: %w", id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("DELETE /api/kernels/%s: status %d: %s", id, resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// start is a kernel start as a frontend sees it: POST /api/kernels, open the channels
// WebSocket, and a kernel_info_request answered on shell.
func (c *kernelClient) start() (*kernelConn, error) {
	id, err := c.create()
	if err != nil {
		return nil, err
	}
	k, err := c.dial(id)
	if err == nil {
		err = k.kernelInfo()
		if err != nil {
			k.close()
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.remove(id))
	}
	return k, nil
}

// stop closes the WebSocket, then deletes the kernel.
func (c *kernelClient) stop(k *kernelConn) error {
	k.close()
	return c.remove(k.id)
}

// startsAndDeletes runs scenarios 1 and 5 on the same kernels: n starts, each followed by a
// timed DELETE.
// startAndDelete times one start (scenario 1) and the DELETE that follows it (scenario 5).
func (c *kernelClient) startAndDelete() (start, del time.Duration, err error) {
	t0 := time.Now()
	k, err := c.start()
	if err != nil {
		return 0, 0, err
	}
	start = time.Since(t0)
	k.close()
	t0 = time.Now()
	if err := c.remove(k.id); err != nil {
		return 0, 0, err
	}
	return start, time.Since(t0), nil
}

// kernelConn is one client connection to a kernel's channels WebSocket.
type kernelConn struct {
	id, session string
	ws          *websocket.Conn
	received    int // frames read, all channels
}

func (c *kernelClient) dial(id string) (*kernelConn, error) {
	u, err := url.Parse(c.s.base)
	if err != nil {
		return nil, err
	}
	u.Scheme = "ws"
	session := newID()
	u.Path += "api/kernels/" + id + "/channels"
	u.RawQuery = url.Values{"session_id": {session}}.Encode()
	d := websocket.Dialer{HandshakeTimeout: kernelTimeout}
	// Go sets TCP_NODELAY on every TCP connection, so each message below leaves in one
	// segment as soon as it is written; the server's side is what is measured.
	ws, resp, err := d.Dial(u.String(), http.Header{"Authorization": {"token " + c.s.token}})
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (status %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("opening the channels of kernel %s: %w", id, err)
	}
	// Bounded: the largest message here is a batch of printed lines.
	ws.SetReadLimit(16 << 20)
	return &kernelConn{id: id, session: session, ws: ws}, nil
}

func (k *kernelConn) close() {
	_ = k.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	_ = k.ws.Close()
}

// message is the part of a Jupyter message the bench reads.
type message struct {
	Channel string `json:"channel"`
	Header  struct {
		MsgType string `json:"msg_type"`
	} `json:"header"`
	ParentHeader struct {
		MsgID string `json:"msg_id"`
	} `json:"parent_header"`
	Content json.RawMessage `json:"content"`
}

// send writes one message in Jupyter's JSON WebSocket protocol and returns its msg_id. The
// message goes out in one write: a frame split over several writes would wait for an ACK
// with Nagle's algorithm on, the cost the issue found in Jupyter Server.
func (k *kernelConn) send(channel, msgType string, content any) (string, error) {
	id := newID()
	data, err := json.Marshal(map[string]any{
		"header": map[string]string{
			"msg_id": id, "msg_type": msgType, "session": k.session, "username": "bench",
			"date": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "version": "5.3",
		},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content,
		"channel": channel, "buffers": []any{},
	})
	if err != nil {
		return "", err
	}
	if err := k.ws.SetWriteDeadline(time.Now().Add(kernelTimeout)); err != nil {
		return "", err
	}
	return id, k.ws.WriteMessage(websocket.TextMessage, data)
}

// next reads the next JSON message, skipping binary frames (messages with buffers, which
// no request here produces).
func (k *kernelConn) next(deadline time.Time) (*message, error) {
	if err := k.ws.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	for {
		typ, data, err := k.ws.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("reading from kernel %s: %w", k.id, err)
		}
		k.received++
		if typ != websocket.TextMessage {
			continue
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("kernel %s sent %.100q: %w", k.id, data, err)
		}
		return &m, nil
	}
}

// kernelInfo asks for kernel_info on shell and waits for the reply.
func (k *kernelConn) kernelInfo() error {
	id, err := k.send("shell", "kernel_info_request", map[string]any{})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(kernelTimeout)
	for {
		m, err := k.next(deadline)
		if err != nil {
			return err
		}
		if m.ParentHeader.MsgID == id && m.Header.MsgType == "kernel_info_reply" {
			return nil
		}
	}
}

// execute runs code and returns once both its execute_reply and the idle status of the
// request arrived, the end of a cell as a frontend sees it. onIOPub sees the request's iopub
// messages.
func (k *kernelConn) execute(code string, onIOPub func(*message) error) error {
	id, err := k.send("shell", "execute_request", map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": true,
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(kernelTimeout)
	replied, idle := false, false
	for !replied || !idle {
		m, err := k.next(deadline)
		if err != nil {
			return err
		}
		if m.ParentHeader.MsgID != id {
			continue
		}
		switch m.Channel {
		case "shell":
			replied = replied || m.Header.MsgType == "execute_reply"
		case "iopub":
			if onIOPub != nil {
				if err := onIOPub(m); err != nil {
					return err
				}
			}
			if m.Header.MsgType == "status" {
				var st struct {
					State string `json:"execution_state"`
				}
				if err := json.Unmarshal(m.Content, &st); err != nil {
					return fmt.Errorf("status message of kernel %s: %w", k.id, err)
				}
				idle = st.State == "idle"
			}
		}
	}
	return nil
}

// roundTrips is scenario 2: `1+1` executed n times after warm-up ones.
func (k *kernelConn) roundTrips(warmup, n int) ([]time.Duration, error) {
	for range warmup {
		if err := k.execute("1+1", nil); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := k.execute("1+1", nil); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat, nil
}

// stream is scenario 3: ipykernel sends a flushed print as its own message unless prints
// pile up faster than its IO thread sends them, so lines are counted too.
func (k *kernelConn) stream(code string) (streamResult, error) {
	var r streamResult
	t0 := time.Now()
	err := k.execute(code, func(m *message) error {
		if m.Header.MsgType != "stream" {
			return nil
		}
		var out struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &out); err != nil {
			return fmt.Errorf("stream message of kernel %s: %w", k.id, err)
		}
		r.messages++
		r.lines += strings.Count(out.Text, "\n")
		return nil
	})
	r.elapsed = time.Since(t0)
	return r, err
}

// newID is a random UUID-shaped id, as Jupyter clients make msg_ids and session ids.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
