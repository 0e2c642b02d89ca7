// Package jpclient is a client of a kernel's channels WebSocket in Jupyter Server's JSON
// protocol, as JupyterLab speaks it, or of one channel of the older IPython interface
// (/kernels/<id>/shell): the end-to-end tests, the fault-injection tests and the benchmarks
// drive kernels through it, nbkube's and Jupyter Server's alike.
//
// It encodes and decodes with encoding/json rather than nbkube's own codec (internal/wire),
// so that it reads nbkube's frames the way a third-party client does. A message read keeps
// only what a client acts on (Msg): decoding is the client's cost in the benchmarks' round
// trips.
//
// A Conn reads in one of two ways. By default the caller's goroutine reads the socket: the
// fastest, for the benchmarks, but a wait that times out ends the connection (a WebSocket
// read deadline cannot be undone). With ReadAhead, a goroutine of its own reads ahead into a
// buffer, so that a wait can time out and the connection stay usable, as the tests want.
package jpclient

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Options are how Dial connects.
type Options struct {
	// Token is sent as "Authorization: token <Token>".
	Token string
	// SessionID, when set, is sent as ?session_id= and is the session of the headers sent,
	// as JupyterLab does, so that the server can replay what the client misses while away.
	// When empty, the headers carry a random session, and no session_id is sent.
	SessionID string
	// Username is the username of the headers sent.
	Username string
	// Channel is the channel of a single-channel connection of the older interface
	// (/kernels/<id>/shell): messages go out without a "channel", as IPython sent them, and
	// the messages read are given this one.
	Channel string
	// ReadAhead, when above zero, is how many messages a goroutine of the Conn reads ahead
	// of the caller; zero reads in the caller's goroutine (see the package doc).
	ReadAhead int
	// Keep keeps every message taken from the Conn, for Seen and ReplyTo.
	Keep bool
	// BadFrame, when set, hears of each frame that is not a JSON message (a binary frame, or
	// one that does not decode) and the frame is skipped. Unset, a binary frame (a message
	// with buffers, which no client here asks for) is skipped and one that does not decode
	// ends the wait with an error.
	BadFrame func(error)
	// HandshakeTimeout bounds the opening handshake: 30 seconds when zero.
	HandshakeTimeout time.Duration
}

// maxFrameBytes bounds one frame read: the largest message here is a batch of printed lines.
const maxFrameBytes = 16 << 20

// ErrTimeout is what a wait returns when its deadline passed first. Without ReadAhead the
// connection then ends: later waits return ErrEnded.
var ErrTimeout = errors.New("no message in time")

// ErrEnded is what a wait returns, wrapping why, when the connection ended first.
var ErrEnded = errors.New("the connection ended")

// Conn is one connection to a kernel's channels. Its methods are for one goroutine: the
// caller's is the only writer, and (without ReadAhead) the only reader.
type Conn struct {
	ws   *websocket.Conn
	opts Options
	// session is the session of the headers sent.
	session string
	frames  atomic.Int64
	seen    []*Msg
	// in carries the messages read ahead (ReadAhead); it is closed when reading ends.
	in chan *Msg
	// readErr is why reading stopped; with ReadAhead it is set before in is closed.
	readErr error
	// closing is closed by Close: a reader waiting on a full in stops.
	closing   chan struct{}
	closeOnce sync.Once
	// done is closed when the reading goroutine ended (ReadAhead).
	done chan struct{}
}

// Dial opens the WebSocket at wsURL (ws:// or wss://; see URL).
func Dial(wsURL string, opts Options) (*Conn, error) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return nil, err
	}
	session := opts.SessionID
	if session != "" {
		q := u.Query()
		q.Set("session_id", session)
		u.RawQuery = q.Encode()
	} else {
		session = NewID()
	}
	d := websocket.Dialer{HandshakeTimeout: opts.HandshakeTimeout}
	if d.HandshakeTimeout == 0 {
		d.HandshakeTimeout = 30 * time.Second
	}
	var h http.Header
	if opts.Token != "" {
		h = http.Header{"Authorization": {"token " + opts.Token}}
	}
	// Go sets TCP_NODELAY on every TCP connection, so each message leaves in one segment as
	// soon as it is written.
	ws, resp, err := d.Dial(u.String(), h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("open %s: %w (HTTP %d)", u.Redacted(), err, resp.StatusCode)
		}
		return nil, fmt.Errorf("open %s: %w", u.Redacted(), err)
	}
	ws.SetReadLimit(maxFrameBytes)
	c := &Conn{ws: ws, opts: opts, session: session, closing: make(chan struct{}), done: make(chan struct{})}
	if opts.ReadAhead > 0 {
		c.in = make(chan *Msg, opts.ReadAhead)
		go c.readAhead()
	} else {
		close(c.done)
	}
	return c, nil
}

// URL is the WebSocket URL of route (e.g. "api/kernels/<id>/channels") below base, the
// server's http:// or https:// base URL ending in "/".
func URL(base, route string) string {
	return "ws" + strings.TrimPrefix(base, "http") + route
}

// DialKernel opens the channels of the kernel id at the server whose base URL is base.
func DialKernel(base, id string, opts Options) (*Conn, error) {
	c, err := Dial(URL(base, "api/kernels/"+url.PathEscape(id)+"/channels"), opts)
	if err != nil {
		return nil, fmt.Errorf("the channels of kernel %s: %w", id, err)
	}
	return c, nil
}

// Session is the session of the headers this Conn sends.
func (c *Conn) Session() string { return c.session }

// Frames is how many frames were read, of every channel and kind.
func (c *Conn) Frames() int64 { return c.frames.Load() }

// Err is why reading stopped, once it did (a *websocket.CloseError when the server closed
// the connection).
func (c *Conn) Err() error { return c.readErr }

// Ended is closed once reading ahead (ReadAhead) stopped: the connection ended (Err says
// why) or Close was called. Without ReadAhead it is closed from the start.
func (c *Conn) Ended() <-chan struct{} { return c.done }

// Seen is every message taken from the Conn, in order (with Keep).
func (c *Conn) Seen() []*Msg { return c.seen }

// ReplyTo is the reply to msgID among the messages taken so far (with Keep), or nil.
func (c *Conn) ReplyTo(msgID string) *Msg {
	for _, m := range c.seen {
		if m.ParentHeader.MsgID == msgID && m.Channel != "iopub" {
			return m
		}
	}
	return nil
}

// read reads the socket until the next message (deadline zero: no deadline).
func (c *Conn) read(deadline time.Time) (*Msg, error) {
	if err := c.ws.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		c.frames.Add(1)
		if typ != websocket.TextMessage {
			if c.opts.BadFrame != nil {
				c.opts.BadFrame(fmt.Errorf("a binary frame (%d bytes) on the JSON protocol", len(data)))
			}
			continue
		}
		m := &Msg{}
		if err := json.Unmarshal(data, m); err != nil {
			err = fmt.Errorf("undecodable frame %.200q: %w", data, err)
			if c.opts.BadFrame == nil {
				return nil, err
			}
			c.opts.BadFrame(err)
			continue
		}
		if m.Channel == "" {
			m.Channel = c.opts.Channel
		}
		return m, nil
	}
}

func (c *Conn) readAhead() {
	defer close(c.done)
	defer close(c.in)
	for {
		m, err := c.read(time.Time{})
		if err != nil {
			c.readErr = err
			return
		}
		m.At = time.Now()
		select {
		case c.in <- m:
		default:
			// Only a full buffer waits on closing too: what arrived before a Close stays
			// for Drain.
			select {
			case c.in <- m:
			case <-c.closing:
				return
			}
		}
	}
}

// Next is the next message, waiting until deadline (zero: no deadline). It returns
// ErrTimeout when none came in time and an error wrapping ErrEnded when the connection ended
// first. Without ReadAhead a timeout ends the connection.
func (c *Conn) Next(deadline time.Time) (*Msg, error) {
	var m *Msg
	if c.in == nil {
		if c.readErr != nil {
			// A failed read is final: the socket is not read again.
			return nil, fmt.Errorf("%w: %w", ErrEnded, c.readErr)
		}
		var err error
		if m, err = c.read(deadline); err != nil {
			c.readErr = err
			if isTimeout(err) {
				return nil, ErrTimeout
			}
			return nil, fmt.Errorf("%w: %w", ErrEnded, err)
		}
	} else {
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			timer := time.NewTimer(time.Until(deadline))
			defer timer.Stop()
			timeout = timer.C
		}
		var ok bool
		select {
		case m, ok = <-c.in:
			if !ok {
				return nil, fmt.Errorf("%w: %w", ErrEnded, c.readErr)
			}
		case <-timeout:
			return nil, ErrTimeout
		}
	}
	if c.opts.Keep {
		c.seen = append(c.seen, m)
	}
	return m, nil
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Close ends the connection with a close frame and waits up to 5 seconds for the server's,
// so that what was sent last is not lost to a reset; it may be called again.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		close(c.closing)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		// A socket closed with unread data resets the connection, and the reset can discard
		// what this client sent last before the server has read it.
		if c.in == nil {
			c.awaitClose(time.Now().Add(5 * time.Second))
		} else {
			select {
			case <-c.done:
			case <-time.After(5 * time.Second):
			}
		}
		_ = c.ws.Close()
	})
	<-c.done
}

// awaitClose reads (without ReadAhead) until the server's close frame or the deadline.
func (c *Conn) awaitClose(deadline time.Time) {
	if c.readErr != nil {
		return
	}
	_ = c.ws.SetReadDeadline(deadline)
	for {
		if _, _, err := c.ws.ReadMessage(); err != nil {
			c.readErr = err
			return
		}
	}
}

// NewID is a random UUID-shaped id, as Jupyter clients make msg_ids and session ids.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
