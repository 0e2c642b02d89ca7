package agent

import (
	"bufio"
	"context"
	"net"

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
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
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
