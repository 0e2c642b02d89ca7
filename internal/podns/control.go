package podns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// ErrEnded is what Dial answers once the sandbox has ended.
var ErrEnded = errors.New("the sandbox has ended")

// dialRequest asks the init for a connection to a port of the sandbox; the answer carries the
// same ID and, when it worked, the connected socket.
type dialRequest struct {
	ID   uint64 `json:"id"`
	Port int    `json:"port"`
}

type dialReply struct {
	ID    uint64 `json:"id"`
	Error string `json:"error,omitempty"`
}

// Control reaches into a running sandbox.
type Control struct {
	conn *net.UnixConn

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan dialResult
	ended   bool
}

type dialResult struct {
	conn net.Conn
	err  error
}

func newControl(conn *net.UnixConn) *Control {
	c := &Control{conn: conn, pending: map[uint64]chan dialResult{}}
	go c.read()
	return c
}

// Dial connects to TCP port of the sandbox's pod IP, from inside its network namespace.
func (c *Control) Dial(ctx context.Context, port int) (net.Conn, error) {
	ch := make(chan dialResult, 1)
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return nil, ErrEnded
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	b, _ := json.Marshal(dialRequest{ID: id, Port: port})
	_, err := c.conn.Write(b)
	c.mu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("%w: %w", ErrEnded, err)
	}
	select {
	case r := <-ch:
		return r.conn, r.err
	case <-ctx.Done():
		c.forget(id)
		// The answer may be on its way: whoever gets it closes its socket.
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (c *Control) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Close stops reaching into the sandbox; the init carries on.
func (c *Control) Close() error { return c.conn.Close() }

// read hands each answer to its Dial until the init's end closes the socket.
func (c *Control) read() {
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(4))
	for {
		n, oobn, _, _, err := c.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			break
		}
		var rep dialReply
		fd := -1
		if msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if fds, rerr := syscall.ParseUnixRights(&m); rerr == nil {
					for _, f := range fds {
						if fd < 0 {
							fd = f
						} else {
							_ = syscall.Close(f)
						}
					}
				}
			}
		}
		res := dialResult{}
		if jerr := json.Unmarshal(buf[:n], &rep); jerr != nil {
			res.err = fmt.Errorf("the sandbox's answer: %w", jerr)
		} else if rep.Error != "" {
			res.err = errors.New(rep.Error)
		}
		if fd >= 0 {
			f := os.NewFile(uintptr(fd), "sandbox-conn")
			conn, cerr := net.FileConn(f)
			f.Close()
			if res.err == nil {
				res.conn, res.err = conn, cerr
			} else if conn != nil {
				conn.Close()
			}
		} else if res.err == nil {
			res.err = errors.New("the sandbox answered without a connection")
		}
		c.mu.Lock()
		ch, ok := c.pending[rep.ID]
		delete(c.pending, rep.ID)
		c.mu.Unlock()
		if ok {
			ch <- res
		} else if res.conn != nil {
			res.conn.Close()
		}
	}
	c.mu.Lock()
	c.ended = true
	for id, ch := range c.pending {
		ch <- dialResult{err: ErrEnded}
		delete(c.pending, id)
	}
	c.mu.Unlock()
}
