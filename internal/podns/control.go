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
	"time"
)

// ErrEnded is what Dial answers once the sandbox has ended.
var ErrEnded = errors.New("the sandbox has ended")

// maxControlMessage bounds one message on the control socket (a SOCK_SEQPACKET, where a
// message longer than the reader's buffer is cut): room for an exec's output in JSON.
const maxControlMessage = 64 * 1024

// dialRequest asks the init for a connection to a port of the sandbox, or, with Listen set,
// for a socket that listens at that address and port inside the sandbox's network, or, with
// Exec set, to run a command inside; the answer carries the same ID and, when it worked, the
// socket or the command's result.
type dialRequest struct {
	ID     uint64 `json:"id"`
	Port   int    `json:"port,omitempty"`
	Listen string `json:"listen,omitempty"`
	// UDP makes a Listen request's socket a UDP one.
	UDP  bool  `json:"udp,omitempty"`
	Exec *Exec `json:"exec,omitempty"`
	// RouteOut asks for the TUN device of the sandbox's route out (Spec.RouteOut).
	RouteOut bool `json:"routeOut,omitempty"`
}

type dialReply struct {
	ID    uint64 `json:"id"`
	Error string `json:"error,omitempty"`
	// Exec is the result of an Exec request that ran.
	Exec *ExecResult `json:"exec,omitempty"`
}

// Exec is a command to run in a running sandbox, as a container runtime's exec does: in the
// sandbox's namespaces and root, as its user, with no capabilities, in a process group of its
// own. Argv[0] without a slash is looked up in Env's PATH inside the sandbox.
type Exec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Timeout ends the command's process group with SIGKILL; 0 means a minute.
	Timeout time.Duration `json:"timeout"`
}

// ExecResult is how a command run by Control.Exec ended.
type ExecResult struct {
	ExitCode int `json:"exitCode"`
	// Output is the start of what it wrote to stdout and stderr, at most MaxExecOutput bytes.
	Output []byte `json:"output,omitempty"`
	// TimedOut tells that the timeout killed it.
	TimedOut bool `json:"timedOut,omitempty"`
}

// MaxExecOutput bounds the output an ExecResult carries.
const MaxExecOutput = 10 * 1024

// Control reaches into a running sandbox.
type Control struct {
	conn *net.UnixConn
	// routeOut is the TUN device of the sandbox's route out when the node made it (root),
	// or routeOutErr why it could not.
	routeOut    *os.File
	routeOutErr error

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan dialResult
	ended   bool
}

type dialResult struct {
	file *os.File
	exec *ExecResult
	err  error
}

func newControl(conn *net.UnixConn) *Control {
	c := &Control{conn: conn, pending: map[uint64]chan dialResult{}}
	go c.read()
	return c
}

// Dial connects to TCP port of the sandbox's pod IP, from inside its network namespace.
func (c *Control) Dial(ctx context.Context, port int) (net.Conn, error) {
	f, err := c.ask(ctx, dialRequest{Port: port})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileConn(f)
}

// Exec runs a command inside the sandbox and waits for its end. An error means it did not run
// (a missing program, a sandbox that ended); a command that ran reports its exit code, and
// TimedOut when its timeout ended it.
func (c *Control) Exec(ctx context.Context, e Exec) (ExecResult, error) {
	if len(e.Argv) == 0 {
		return ExecResult{}, errors.New("exec: no command")
	}
	r, err := c.request(ctx, dialRequest{Exec: &e})
	if err != nil {
		return ExecResult{}, err
	}
	if r.exec == nil {
		return ExecResult{}, errors.New("the sandbox answered an exec without its result")
	}
	return *r.exec, nil
}

// Listen listens at TCP address ip:port inside the sandbox's network namespace: what the
// sandbox's processes connect to there reaches the listener, which its caller serves from
// outside. An address of 127.0.0.0/8 needs no interface of its own there.
func (c *Control) Listen(ctx context.Context, ip string, port int) (net.Listener, error) {
	f, err := c.ask(ctx, dialRequest{Port: port, Listen: ip})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileListener(f)
}

// ListenPacket is Listen for UDP: a socket bound at ip:port inside the sandbox's network
// namespace, which its caller serves from outside.
func (c *Control) ListenPacket(ctx context.Context, ip string, port int) (net.PacketConn, error) {
	f, err := c.ask(ctx, dialRequest{Port: port, Listen: ip, UDP: true})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FilePacketConn(f)
}

// ask sends req and waits for the socket of its answer.
func (c *Control) ask(ctx context.Context, req dialRequest) (*os.File, error) {
	r, err := c.request(ctx, req)
	if err == nil && r.file == nil {
		err = errors.New("the sandbox answered without a connection")
	}
	return r.file, err
}

// request sends req and waits for its answer.
func (c *Control) request(ctx context.Context, req dialRequest) (dialResult, error) {
	ch := make(chan dialResult, 1)
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return dialResult{}, ErrEnded
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	req.ID = id
	b, _ := json.Marshal(req)
	_, err := c.conn.Write(b)
	c.mu.Unlock()
	if err != nil {
		c.forget(id)
		return dialResult{}, fmt.Errorf("%w: %w", ErrEnded, err)
	}
	select {
	case r := <-ch:
		return r, r.err
	case <-ctx.Done():
		c.forget(id)
		// The answer may be on its way: whoever gets it closes its socket.
		go func() {
			if r := <-ch; r.file != nil {
				r.file.Close()
			}
		}()
		return dialResult{}, ctx.Err()
	}
}

func (c *Control) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Close stops reaching into the sandbox; the init carries on.
func (c *Control) Close() error {
	if c.routeOut != nil {
		c.routeOut.Close()
	}
	return c.conn.Close()
}

// read hands each answer to its Dial until the init's end closes the socket.
func (c *Control) read() {
	buf := make([]byte, maxControlMessage)
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
		res.exec = rep.Exec
		if fd >= 0 {
			f := os.NewFile(uintptr(fd), "sandbox-socket")
			if res.err == nil {
				res.file = f
			} else {
				f.Close()
			}
		}
		c.mu.Lock()
		ch, ok := c.pending[rep.ID]
		delete(c.pending, rep.ID)
		c.mu.Unlock()
		if ok {
			ch <- res
		} else if res.file != nil {
			res.file.Close()
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
