// Package wsbatch gathers the frames a WebSocket connection writes in a burst into one write
// to the network. gorilla/websocket writes every message with a system call of its own; a
// relay that has several messages at hand (a kernel streaming output) paid one call, and the
// wake-up of the reader at the other end, per message. Conn holds writes between Hold and
// Flush; Hijacker puts a Conn under a WebSocket that an http.Handler upgrades.
package wsbatch

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxHeld bounds what a held Conn keeps: a larger burst is written as it comes.
const maxHeld = 64 << 10

// closeFlushWait bounds the last write of a closing Conn.
const closeFlushWait = time.Second

// Conn is a net.Conn whose writes wait, while it is held, until Flush. Writes while it is not
// held go out at once (after anything held), so a writer that never holds sees a plain
// connection. Safe for concurrent use.
type Conn struct {
	net.Conn

	mu   sync.Mutex
	held bool
	buf  []byte
}

// Hold makes the following writes wait for Flush.
func (c *Conn) Hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

// Flush ends the hold and writes what it kept, in one write.
func (c *Conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	return c.flushLocked()
}

func (c *Conn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held && len(c.buf)+len(p) <= maxHeld {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// Close writes what is held (a close frame, say) before it closes the connection, waiting at
// most closeFlushWait for a peer that does not read.
func (c *Conn) Close() error {
	c.mu.Lock()
	if len(c.buf) > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(closeFlushWait))
		_ = c.flushLocked()
	}
	c.held = false
	c.mu.Unlock()
	return c.Conn.Close()
}

// Hijacker is an http.ResponseWriter whose Hijack (the one a WebSocket upgrade calls) returns
// the connection as a Conn.
type Hijacker struct {
	http.ResponseWriter
	conn *Conn
}

// NewHijacker wraps w.
func NewHijacker(w http.ResponseWriter) *Hijacker { return &Hijacker{ResponseWriter: w} }

// Hijack takes the connection over, as http.Hijacker does.
func (h *Hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &Conn{Conn: nc}
	return h.conn, brw, nil
}

// Conn is the hijacked connection; nil before a successful Hijack.
func (h *Hijacker) Conn() *Conn { return h.conn }

// Unwrap lets http.ResponseController reach the wrapped writer.
func (h *Hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// FlushBeforeRead is a net.Conn that flushes a Conn before each read from the network and
// holds it again when the read brought data: a relay that copies what it reads here to the
// Conn writes every message that one read brought in one write, and nothing waits while the
// relay waits for more.
type FlushBeforeRead struct {
	net.Conn
	to *Conn
	mu sync.Mutex
}

// SetTarget names the Conn to flush; until then reads flush nothing.
func (f *FlushBeforeRead) SetTarget(c *Conn) {
	f.mu.Lock()
	f.to = c
	f.mu.Unlock()
}

func (f *FlushBeforeRead) Read(p []byte) (int, error) {
	f.mu.Lock()
	to := f.to
	f.mu.Unlock()
	if to != nil {
		if err := to.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := f.Conn.Read(p)
	if to != nil && n > 0 && err == nil {
		to.Hold()
	}
	return n, err
}
