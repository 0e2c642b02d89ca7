package agent

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
	"golang.org/x/sys/unix"
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
	m := &moderatedReader{r: c}
	m.hint, _ = ctx.Value(outputHintKey{}).(*outputHint)
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			m.lowat = func(n int) {
				_ = raw.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n) })
			}
		}
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(m, readBuffer)}, nil
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
// each line as a message of its own, a few hundred microseconds apart; an agent that woke and
// read for every one would spend most of its CPU on the wake-ups, polls and reads per message
// while output streams. Once streamReads reads come within streamWindow (a rate no exchange of
// requests and replies reaches: an execute round trip is a handful of messages in several
// milliseconds), each read first waits moderation, so that what arrives meanwhile comes in one
// read, and then in one write to each client. The stream has ended when a read after the pause
// has to wait for data. Output is then at most moderation late, well below a browser's frame.
//
// Counting reads recognises a stream only when the kernel prints faster than about 2000
// messages a second, and a kernel on a slower machine prints a loop more slowly than that,
// while still far too fast to wake for every line. So the agent also tells the iopub reader
// what it relays (hint): from a run of stream messages on, reads are moderated until a message
// of another kind, such as the idle status at the end of the request, arrives.
type moderatedReader struct {
	r io.Reader
	// hint is set while the kernel prints a stream of output; nil on sockets other than iopub.
	hint *outputHint
	// lowat sets the socket's SO_RCVLOWAT; nil when the connection has no socket.
	lowat func(int)
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
	if m.streaming || m.hint.on() {
		m.pause()
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

// pause waits moderation before a read. Meanwhile the socket's low-water mark is raised: Go's
// poller watches every socket, and each message arriving during the pause woke it (nobody
// waits for the socket then, but the poller only learns so after waking). The mark is back
// to one byte before the read, which could otherwise wait for data that never reaches it.
func (m *moderatedReader) pause() {
	if m.lowat != nil {
		m.lowat(readBuffer)
		defer m.lowat(1)
	}
	time.Sleep(moderation)
}

// readBuffer is the read buffer of a kernel socket, and its low-water mark during a pause.
const readBuffer = 64 << 10

// outputHint is the agent's word to the reader of a kernel's iopub socket that the kernel is
// printing a stream of output (see incarnation.noteOutput). It reaches the reader through the
// context the socket is made with.
type outputHint struct{ streaming atomic.Bool }

type outputHintKey struct{}

func withOutputHint(ctx context.Context, h *outputHint) context.Context {
	return context.WithValue(ctx, outputHintKey{}, h)
}

func (h *outputHint) on() bool { return h != nil && h.streaming.Load() }

const (
	// outputRun stream messages in a row, each within outputGap of the one before, make a
	// stream: a loop printing to the notebook. A request's own output (a print or two between
	// its busy and idle statuses) never makes one.
	outputRun = 8
	outputGap = 5 * time.Millisecond
)
