package ipcluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// hubScheme names the zmq4 transport of QueryHub's sockets ("ipchub://host:port"): TCP that
// ends with the call's context and refuses more than a call needs. Plain go-zeromq TCP does
// neither: it exchanges greetings with no deadline, so a frozen ipcontroller (its listening
// socket still accepts) held a call past any context; and it allocates each frame at the size
// the peer announces, so a cluster's controller pod, which runs a user's image, could make the
// operator allocate without bound.
const hubScheme = "ipchub"

func init() {
	if err := zmq4.RegisterTransport(hubScheme, hubTransport{tcp: transport.New("tcp")}); err != nil {
		panic(fmt.Sprintf("ipcluster: register the %s transport: %v", hubScheme, err))
	}
}

// What one QueryHub call may receive: its two replies and the handshake, with room for a
// few stray messages that are read and dropped.
const (
	maxReplyBytes = 4 << 20
	connBudget    = 2*maxReplyBytes + 64<<10
	// maxMessages stays below the 10 messages go-zeromq queues per socket, so its reading
	// goroutine never blocks on a full queue and always ends with the call.
	maxMessages = 8
)

type hubTransport struct{ tcp transport.Transport }

func (h hubTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := h.tcp.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	// A deadline in the past ends every read and write under way, the greeting included.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	return &boundedConn{Conn: c, stop: stop, limit: zmtpLimit{bytesLeft: connBudget, messagesLeft: maxMessages}}, nil
}

func (h hubTransport) Listen(context.Context, string) (net.Listener, error) {
	return nil, errors.New("ipcluster: the hub transport only dials")
}

func (h hubTransport) Addr(ep string) (string, error) { return h.tcp.Addr(ep) }

// boundedConn passes on what its peer sends only while the limit allows it.
type boundedConn struct {
	net.Conn
	stop func() bool
	// limit needs no lock: go-zeromq reads a connection from one goroutine at a time (the
	// greeting in Dial, then its reader).
	limit zmtpLimit

	mu      sync.Mutex
	refusal error // why the limit stopped the stream, for the writer too
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if err := c.refused(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if lerr := c.limit.scan(p[:n]); lerr != nil {
		// Nothing of p is passed on: go-zeromq must not see the size it would allocate.
		lerr = fmt.Errorf("%w: %w", ErrHub, lerr)
		c.mu.Lock()
		c.refusal = lerr
		c.mu.Unlock()
		return 0, lerr
	}
	return n, err
}

// Write reports a refusal rather than the closed connection go-zeromq made of it.
func (c *boundedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		if rerr := c.refused(); rerr != nil {
			return n, rerr
		}
	}
	return n, err
}

func (c *boundedConn) refused() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusal
}

func (c *boundedConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// ZMTP 3 framing (rfc.zeromq.org/spec/23): a 64-byte greeting, then frames, each a flags
// byte, a size of 1 byte (or 8, big-endian, with flagLong) and a body.
const (
	greetingLen = 64
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// zmtpLimit follows the frames of a ZMTP stream as it arrives, and fails as soon as a frame
// announces more bytes than are left of the budget or the peer completes one message too
// many; so a frame is refused from its header, before anyone allocates its body.
type zmtpLimit struct {
	bytesLeft    int64 // of the whole stream
	messagesLeft int

	seen     int64   // greeting bytes read, up to greetingLen
	flags    byte    // of the frame being read
	size     [8]byte // its size field,
	sizeRead int     // as far as it arrived
	inSize   bool    // the flags are read, the size is not
	body     int64   // bytes of the body still to come
}

func (z *zmtpLimit) scan(p []byte) error {
	if int64(len(p)) > z.bytesLeft {
		return fmt.Errorf("the peer sent more than %d bytes", connBudget)
	}
	z.bytesLeft -= int64(len(p))
	for len(p) > 0 {
		switch {
		case z.seen < greetingLen:
			n := min(int64(len(p)), greetingLen-z.seen)
			z.seen += n
			p = p[n:]
		case z.body > 0:
			n := min(int64(len(p)), z.body)
			z.body -= n
			p = p[n:]
			if z.body == 0 {
				if err := z.endFrame(); err != nil {
					return err
				}
			}
		case !z.inSize:
			z.flags, z.inSize, z.sizeRead = p[0], true, 0
			p = p[1:]
		default:
			width := 1
			if z.flags&flagLong != 0 {
				width = 8
			}
			n := copy(z.size[z.sizeRead:width], p)
			z.sizeRead += n
			p = p[n:]
			if z.sizeRead < width {
				continue
			}
			z.inSize = false
			size := uint64(z.size[0])
			if width == 8 {
				size = binary.BigEndian.Uint64(z.size[:])
			}
			// Bytes already counted (the rest of p) are part of this frame or later ones.
			if size > uint64(z.bytesLeft+int64(len(p))) {
				return fmt.Errorf("the peer announced a frame of %d bytes, beyond the %d-byte budget", size, connBudget)
			}
			z.body = int64(size)
			if z.body == 0 {
				if err := z.endFrame(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// endFrame counts the messages a frame completes: its last frame, not a command.
func (z *zmtpLimit) endFrame() error {
	if z.flags&(flagMore|flagCommand) != 0 {
		return nil
	}
	if z.messagesLeft--; z.messagesLeft < 0 {
		return fmt.Errorf("the peer sent more than %d messages", maxMessages)
	}
	return nil
}
