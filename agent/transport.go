package agent

import (
	"bufio"
	"context"
	"io"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// bufferedTCP is the transport of the agent's sockets: TCP with a read buffer. go-zeromq
// reads each frame's flags, size and body with reads of their own, unbuffered: about twenty
// system calls for one Jupyter message, most of the agent's CPU while a kernel streams
// output. Through a buffer a burst of messages costs a few.
type bufferedTCP struct{ tcp transport.Transport }

// transportName is the endpoint scheme of bufferedTCP ("nbtcp://127.0.0.1:5555").
const transportName = "nbtcp"

func init() {
	if err := zmq4.RegisterTransport(transportName, bufferedTCP{tcp: transport.New("tcp")}); err != nil {
		panic(err)
	}
}

func (b bufferedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := b.tcp.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(&moderatedReader{r: c}, 64<<10)}, nil
}

func (b bufferedTCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	return b.tcp.Listen(ctx, addr)
}

func (b bufferedTCP) Addr(ep string) (string, error) { return b.tcp.Addr(ep) }

// bufferedConn reads through its buffer and writes straight to the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// moderatedReader gathers a stream into fewer, larger reads. A kernel printing in a loop sends
// each line as a message of its own, a few hundred microseconds apart, and the agent, faster
// than that, woke and read for every one: the wake-ups, polls and reads per message were most
// of its CPU while output streamed. Once streamReads reads came within streamWindow (a rate no
// exchange of requests and replies reaches: an execute round trip is a handful of messages in
// several milliseconds), each read first waits moderation, so that what arrives meanwhile
// comes in one read, and then in one write to each client. The stream has ended when a read
// after the pause has to wait for data. Output is then at most moderation late, well below a
// browser's frame.
type moderatedReader struct {
	r io.Reader
	// ends holds when the last streamReads reads returned, a ring from next.
	ends      [streamReads]time.Time
	next      int
	streaming bool
}

const (
	streamReads  = 32
	streamWindow = 16 * time.Millisecond
	moderation   = 8 * time.Millisecond
	// waitedRead is a read that found nothing waiting.
	waitedRead = 500 * time.Microsecond
)

func (m *moderatedReader) Read(p []byte) (int, error) {
	if m.streaming {
		time.Sleep(moderation)
	}
	start := time.Now()
	n, err := m.r.Read(p)
	now := time.Now()
	if m.streaming {
		m.streaming = now.Sub(start) < waitedRead
	} else {
		oldest := m.ends[m.next]
		m.streaming = !oldest.IsZero() && now.Sub(oldest) < streamWindow
	}
	m.ends[m.next] = now
	m.next = (m.next + 1) % streamReads
	return n, err
}
