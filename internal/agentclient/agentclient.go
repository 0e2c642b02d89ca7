// Package agentclient talks to the nbkube agent in a kernel pod: its status, interrupt,
// restart, shutdown, working directory and the channels WebSocket; to the agent of a
// terminal pod (terminal.go); and to the agent of a reStructuredText renderer pod. Every call carries the pod's agent token (from its Secret);
// nothing else can drive a kernel or a renderer.
package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// Endpoint is where a kernel's agent listens and the token it wants.
type Endpoint struct {
	// Host is the pod IP.
	Host string
	// Port is agentapi.Port but where a test runs an agent of its own.
	Port int
	// Token is the kernel's agent token; it never goes into logs or errors.
	Token string
}

func (e Endpoint) url(scheme, path string) string {
	return scheme + "://" + net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) + path
}

// authorization is the Authorization header that carries the token.
func (e Endpoint) authorization() string { return agentapi.AuthScheme + " " + e.Token }

// Client calls agents. The zero value is not usable: use New.
type Client struct {
	http *http.Client
	ws   *websocket.Dialer
}

// New makes a client. Calls are bounded by their contexts; dials by 5 s.
func New() *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{
		http: &http.Client{Transport: tr},
		ws: &websocket.Dialer{
			NetDialContext:   (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			HandshakeTimeout: 10 * time.Second,
			ReadBufferSize:   64 << 10,
			WriteBufferSize:  64 << 10,
		},
	}
}

// Error is an agent's refusal or failure.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("agent answered %d: %s", e.Status, e.Message) }

// do calls the agent with in as its JSON body (none when nil) and decodes its answer into
// out (when not nil).
func (c *Client) do(ctx context.Context, e Endpoint, method, path string, in, out any) error {
	var reqBody io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("agent %s %s: %w", method, path, err)
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url("http", path), reqBody)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", e.authorization())
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL holds no secret; the token is in a header.
		return fmt.Errorf("agent %s %s: %w: %w", method, path, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("agent %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var m agentapi.ErrorBody
		if json.Unmarshal(body, &m) != nil || m.Message == "" {
			m.Message = http.StatusText(resp.StatusCode)
		}
		return &Error{Status: resp.StatusCode, Message: m.Message}
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("agent %s %s: %w", method, path, err)
		}
	}
	return nil
}

// Status reports the kernel's state.
func (c *Client) Status(ctx context.Context, e Endpoint) (agentapi.Status, error) {
	var st agentapi.Status
	return st, c.do(ctx, e, http.MethodGet, agentapi.PathStatus, nil, &st)
}

// WaitReady waits (as long as ctx allows) until the kernel has answered kernel_info; the
// agent holds the request open, so readiness is learnt at once without polling.
func (c *Client) WaitReady(ctx context.Context, e Endpoint) (agentapi.Status, error) {
	var st agentapi.Status
	return st, c.do(ctx, e, http.MethodGet, agentapi.PathStatus+"?"+agentapi.QueryWait+"="+agentapi.WaitReady, nil, &st)
}

// Interrupt interrupts the kernel's running cell.
func (c *Client) Interrupt(ctx context.Context, e Endpoint) error {
	return c.do(ctx, e, http.MethodPost, agentapi.PathInterrupt, nil, nil)
}

// Restart restarts the kernel process in place and returns once the new one answers.
func (c *Client) Restart(ctx context.Context, e Endpoint) error {
	return c.do(ctx, e, http.MethodPost, agentapi.PathRestart, nil, nil)
}

// Shutdown shuts the kernel down and returns once its process has exited.
func (c *Client) Shutdown(ctx context.Context, e Endpoint) error {
	return c.do(ctx, e, http.MethodPost, agentapi.PathShutdown, nil, nil)
}

// SetWorkDir moves the kernel to w.Dir: its current process by running w.Code (when not
// empty), its later ones (restarts) by starting them there. An agent that refuses answers
// an Error: 409 while the kernel is not running, 422 when w.Dir is no directory or w.Code
// failed, 504 when the kernel did not answer w.Code in time.
func (c *Client) SetWorkDir(ctx context.Context, e Endpoint, w agentapi.WorkDir) error {
	return c.do(ctx, e, http.MethodPost, agentapi.PathWorkDir, w, nil)
}

// MoveNotebook tells the kernel's agent that the notebook of its session moved from one path
// to another (agentapi.PathNotebook).
func (c *Client) MoveNotebook(ctx context.Context, e Endpoint, from, to string) error {
	return c.do(ctx, e, http.MethodPost, agentapi.PathNotebook, agentapi.NotebookMove{From: from, To: to}, nil)
}

// Execute sends the cells of a server-side execution to the kernel's agent
// (agentapi.PathExecute); it returns once they are in the kernel's queue. Refusals are
// Errors: 400, 408 when the previous request was not sent in time, 409 while the kernel is not
// running.
func (c *Client) Execute(ctx context.Context, e Endpoint, x agentapi.Execute) error {
	return c.do(ctx, e, http.MethodPost, agentapi.PathExecute, x, nil)
}

// ChannelOptions shape one channels connection.
type ChannelOptions struct {
	// SessionID names the client session, for replay after a reconnect.
	SessionID string
	// Channel, when set, makes a single-channel connection (the older IPython interface).
	Channel string
	// Notebook, when set, is the notebook of the kernel's session (agentapi.QueryNotebook).
	Notebook string
	// Subprotocols are offered to the agent as the client offered them.
	Subprotocols []string
	// RateLimits are the connection's iopub limits; the agent's defaults when nil, and for
	// a negative value.
	RateLimits *agentapi.RateLimits
	// WrapConn, when set, wraps the network connection under the WebSocket.
	WrapConn func(net.Conn) net.Conn
}

// ErrUnreachable is returned when the agent cannot be reached at all.
var ErrUnreachable = errors.New("the kernel's agent cannot be reached")

// DialChannels opens the kernel's channels WebSocket.
func (c *Client) DialChannels(ctx context.Context, e Endpoint, o ChannelOptions) (*websocket.Conn, error) {
	q := url.Values{}
	if o.SessionID != "" {
		q.Set(agentapi.QuerySessionID, o.SessionID)
	}
	if o.Channel != "" {
		q.Set(agentapi.QueryChannel, o.Channel)
	}
	if o.Notebook != "" {
		q.Set(agentapi.QueryNotebook, o.Notebook)
	}
	if o.RateLimits != nil {
		o.RateLimits.SetQuery(q)
	}
	return c.dial(ctx, e, agentapi.PathChannels+"?"+q.Encode(), "channels", o.Subprotocols, o.WrapConn)
}

// dial opens the agent's WebSocket at path (with its query), offering subprotocols; wrap,
// when set, wraps the network connection under it. what names the socket in a refusal.
func (c *Client) dial(ctx context.Context, e Endpoint, path, what string, subprotocols []string, wrap func(net.Conn) net.Conn) (*websocket.Conn, error) {
	d := *c.ws
	d.Subprotocols = subprotocols
	if wrap != nil {
		dial := d.NetDialContext
		d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(nc), nil
		}
	}
	ws, resp, err := d.DialContext(ctx, e.url("ws", path), http.Header{"Authorization": {e.authorization()}})
	if err != nil {
		if resp != nil {
			return nil, &Error{Status: resp.StatusCode, Message: what + " handshake refused"}
		}
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return ws, nil
}

// RenderRST asks a reStructuredText renderer (an agent in agentapi.CommandRenderRST mode) for
// the HTML of src. Its refusals are Errors with the renderer's status and message.
func (c *Client) RenderRST(ctx context.Context, e Endpoint, src []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url("http", agentapi.PathRenderRST), bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", e.authorization())
	req.Header.Set("Content-Type", "text/x-rst; charset=utf-8")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, agentapi.MaxRSTHTMLBytes+1))
	if err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var m agentapi.ErrorBody
		if json.Unmarshal(body, &m) != nil || m.Message == "" {
			m.Message = http.StatusText(resp.StatusCode)
		}
		return nil, &Error{Status: resp.StatusCode, Message: m.Message}
	}
	if len(body) > agentapi.MaxRSTHTMLBytes {
		return nil, fmt.Errorf("renderer: HTML larger than %d bytes", agentapi.MaxRSTHTMLBytes)
	}
	return body, nil
}
