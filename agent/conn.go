package agent

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
	"github.com/nbkube/nbkube/internal/wsbatch"
)

// Timing of a client connection.
const (
	writeWait  = 30 * time.Second
	pingPeriod = 30 * time.Second
	// readWait is how long a connection may be silent, pongs included.
	readWait = 3 * pingPeriod
)

// cutOffGrace is how long a connection that is cut off has to write its close frame before
// its network connection is closed under a writer that the client does not let finish.
const cutOffGrace = time.Second

// conn is one client WebSocket. Its reader sends client messages to the kernel; its single
// writer drains the queue the hub fills.
type conn struct {
	a  *Agent
	ws *websocket.Conn
	// batch is ws's network connection: the writer holds it while it writes what is queued,
	// so a burst goes out in one write. Nil leaves every message its own write.
	batch *wsbatch.Conn
	// proto is wire.ProtocolV1 or "" (Jupyter's JSON protocol).
	proto string
	// only, when set, makes this a single-channel connection of the older IPython
	// interface (/kernels/<id>/shell, iopub, stdin).
	only string
	// notebook is the notebook of the kernel's session that the API server named
	// (agentapi.QueryNotebook), which this client's runs are recorded for; "" records none.
	notebook string
	limiter  rateLimiter
	// sess is set under the agent's mutex.
	sess *clientSession

	mu    sync.Mutex
	queue []outFrame
	// queuedBytes is what is charged to the agent's budget for this connection: the frames
	// queued and those being written.
	queuedBytes int64
	notify      chan struct{}
	closing     bool
	done        chan struct{}
	closeOnce   sync.Once
	closeCode   int
	closeText   string
}

type outFrame struct {
	typ  int
	data []byte
	// charge is what the frame holds of the agent's memory budget until it is written.
	charge int64
}

func newConn(a *Agent, ws *websocket.Conn, only string, limits agentapi.RateLimits) *conn {
	return &conn{a: a, ws: ws, proto: ws.Subprotocol(), only: only, limiter: rateLimiter{limits: limits},
		notify: make(chan struct{}, 1), done: make(chan struct{})}
}

// enqueue queues a frame for the writer, charged to the agent's memory budget until it is
// written; false when the connection is closing, holds its share of the budget already, or
// the budget has no room left. The caller holds c.a.mu.
func (c *conn) enqueue(typ int, data []byte) bool {
	n := int64(len(data))
	c.mu.Lock()
	full := c.queuedBytes+n > c.a.cfg.MemoryBudget/connShare
	c.mu.Unlock()
	if full || c.isClosing() || !c.a.reserveLocked(n) {
		return false
	}
	if !c.enqueueCharged(typ, data, n) {
		c.a.mem.release(n)
		return false
	}
	return true
}

// enqueueCharged queues a frame whose charge to the memory budget is reserved already: a
// replayed message takes its buffer's charge along (not the few bytes more of its encoding,
// which could leave the newest messages out), and may pass the connection's share, as the
// buffer it comes from is bounded already. False, the charge still the caller's, when the
// connection is closing.
func (c *conn) enqueueCharged(typ int, data []byte, charge int64) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	c.queue = append(c.queue, outFrame{typ, data, charge})
	c.queuedBytes += charge
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return true
}

// close makes the writer send a close frame and end the connection. It never blocks.
func (c *conn) close(code int, text string) {
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		c.closeCode, c.closeText = code, text
	}
	c.mu.Unlock()
	c.closeOnce.Do(func() { close(c.done) })
}

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// cutOff closes the connection of a client that cannot be given more within the memory
// budget with 1013 (try again later). A writer stuck on a client that does not read would
// hold its frames until the write deadline, so after cutOffGrace the network connection is
// closed under it.
func (c *conn) cutOff(why string) {
	c.close(websocket.CloseTryAgainLater, why)
	time.AfterFunc(cutOffGrace, func() { _ = c.ws.NetConn().Close() })
}

// releaseQueue gives back the budget of every frame not written yet, for good: the
// connection is closing and queues nothing more.
func (c *conn) releaseQueue() {
	c.mu.Lock()
	c.closing = true
	n := c.queuedBytes
	c.queue, c.queuedBytes = nil, 0
	c.mu.Unlock()
	c.a.mem.release(n)
}

// writeLoop is the connection's only writer.
func (c *conn) writeLoop() {
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	defer func() { _ = c.ws.Close() }()
	defer c.releaseQueue()
	var batch []outFrame
	for {
		select {
		case <-c.notify:
			c.mu.Lock()
			batch, c.queue = c.queue, batch[:0]
			c.mu.Unlock()
			var written int64
			if c.batch != nil && len(batch) > 1 {
				c.batch.Hold()
			}
			for i, f := range batch {
				_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
				if err := c.ws.WriteMessage(f.typ, f.data); err != nil {
					c.close(websocket.CloseAbnormalClosure, "")
					return
				}
				written += f.charge
				batch[i] = outFrame{}
			}
			if c.batch != nil {
				if err := c.batch.Flush(); err != nil {
					c.close(websocket.CloseAbnormalClosure, "")
					return
				}
			}
			c.mu.Lock()
			c.queuedBytes -= written
			c.mu.Unlock()
			c.a.mem.release(written)
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				c.close(websocket.CloseAbnormalClosure, "")
				return
			}
		case <-c.done:
			c.mu.Lock()
			code, text := c.closeCode, c.closeText
			c.mu.Unlock()
			if code != websocket.CloseAbnormalClosure {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
			}
			return
		}
	}
}

// readLoop decodes client messages and sends them to the kernel until the client leaves.
func (c *conn) readLoop() {
	defer c.close(websocket.CloseNormalClosure, "")
	c.ws.SetReadLimit(c.a.cfg.MaxMessageBytes)
	_ = c.ws.SetReadDeadline(time.Now().Add(readWait))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(readWait)) })
	first := true
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(readWait))
		m, err := c.decode(typ, data)
		if err != nil {
			// IPython's single-channel clients send their cookie as the first message.
			if !first || c.only == "" {
				c.a.cfg.Log.V(1).Info("Ignored an undecodable client message", "error", err.Error())
			}
			first = false
			continue
		}
		first = false
		c.a.toKernel(c, m)
	}
}

func (c *conn) decode(typ int, data []byte) (*wire.Message, error) {
	switch {
	case c.proto == wire.ProtocolV1:
		if typ != websocket.BinaryMessage {
			return nil, fmt.Errorf("a text frame on the %s protocol", wire.ProtocolV1)
		}
		return wire.DecodeV1(data, wire.Limits{})
	case typ == websocket.BinaryMessage:
		return wire.DecodeBinary(data, wire.Limits{})
	default:
		return wire.DecodeJSON(data, wire.Limits{})
	}
}

// writeStderr tells this client on iopub that output is being dropped, as Jupyter Server
// does when a rate limit trips.
func (c *conn) writeStderr(text string, parent json.RawMessage) {
	content, _ := json.Marshal(map[string]string{"name": "stderr", "text": text})
	m := c.a.newMessage("stream", parent, string(content))
	m.Channel = wire.IOPub
	if typ, data, err := (&encodings{m: m}).get(c.proto); err == nil {
		c.enqueue(typ, data)
	}
}

// encodings encodes one message once per protocol however many clients get it.
type encodings struct {
	m        *wire.Message
	json, v1 []byte
	jsonType int
}

func (e *encodings) get(proto string) (int, []byte, error) {
	if proto == wire.ProtocolV1 {
		if e.v1 == nil {
			e.v1 = wire.EncodeV1(e.m)
		}
		return websocket.BinaryMessage, e.v1, nil
	}
	if e.json == nil {
		var err error
		if len(e.m.Buffers) > 0 {
			e.json, err = wire.EncodeBinary(e.m)
			e.jsonType = websocket.BinaryMessage
		} else {
			e.json, err = wire.EncodeJSON(e.m)
			e.jsonType = websocket.TextMessage
		}
		if err != nil {
			e.json = nil
			return 0, nil, err
		}
	}
	return e.jsonType, e.json, nil
}
