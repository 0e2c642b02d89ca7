package main

// kernelClient and kernelConn drive one server's kernels as a Jupyter frontend does: the
// REST calls and the JSON protocol on the channels WebSocket.

import (
	"bytes"
	_ "embed" // floor.py
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nbkube/nbkube/internal/jpclient"
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

// kernelConn is one client connection to a kernel's channels WebSocket. It reads in the
// bench's goroutine (no ReadAhead): a message takes no hop between goroutines on its way to
// the measurement, and a timeout is a failure anyway.
type kernelConn struct {
	*jpclient.Conn
	id string
}

func (c *kernelClient) dial(id string) (*kernelConn, error) {
	conn, err := jpclient.DialKernel(c.s.base, id, jpclient.Options{Token: c.s.token, SessionID: jpclient.NewID(),
		Username: "bench", HandshakeTimeout: kernelTimeout})
	if err != nil {
		return nil, err
	}
	return &kernelConn{Conn: conn, id: id}, nil
}

func (k *kernelConn) close() { k.Close() }

// kernelInfo asks for kernel_info on shell and waits for the reply.
func (k *kernelConn) kernelInfo() error {
	return k.KernelInfo(time.Now().Add(kernelTimeout), 0)
}

// execute runs code and returns once both its execute_reply and the idle status of the
// request arrived, the end of a cell as a frontend sees it. onIOPub sees the request's iopub
// messages. Only the status messages' content is decoded here: the client's own cost is
// part of every round trip measured.
func (k *kernelConn) execute(code string, onIOPub func(*jpclient.Msg) error) error {
	id, err := k.SendExecute(code, true)
	if err != nil {
		return err
	}
	return k.await(id, onIOPub)
}

// executeCell is execute as a notebook front end runs the cell of cellID (its id in the
// request), whose outputs the server records.
func (k *kernelConn) executeCell(cellID, code string, onIOPub func(*jpclient.Msg) error) error {
	id, err := k.SendCell(cellID, code)
	if err != nil {
		return err
	}
	return k.await(id, onIOPub)
}

// await reads until the request of id has its reply and its idle status.
func (k *kernelConn) await(id string, onIOPub func(*jpclient.Msg) error) error {
	replied, idle := false, false
	err := k.Until(time.Now().Add(kernelTimeout), func(m *jpclient.Msg) (bool, error) {
		if m.ParentHeader.MsgID != id {
			return false, nil
		}
		switch m.Channel {
		case "shell":
			replied = replied || m.Header.MsgType == "execute_reply"
		case "iopub":
			if onIOPub != nil {
				if err := onIOPub(m); err != nil {
					return false, err
				}
			}
			if st := m.ExecutionState(); st != "" {
				idle = st == "idle"
			}
		}
		return replied && idle, nil
	})
	if err != nil {
		return fmt.Errorf("kernel %s: %w", k.id, err)
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
	err := k.execute(code, func(m *jpclient.Msg) error {
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
