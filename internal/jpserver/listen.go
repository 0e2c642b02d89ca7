package jpserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// Listen listens on TCP at addr (host:port). When the port is in use, or not allowed, it tries
// the next ports, up to retries of them, as Jupyter Server does with port_retries (which,
// after five in a row, picks at random near the port; counting up is easier to predict). It
// gives up at once on any other error.
func Listen(addr string, retries int) (net.Listener, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("listen on %s: %q is not a port number", addr, p)
	}
	if port == 0 {
		retries = 0
	}
	last := port
	for try := port; try <= port+retries && try <= 65535; try++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(try)))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EACCES) {
			return nil, err
		}
		if retries == 0 {
			return nil, err
		}
		last = try
	}
	return nil, fmt.Errorf("ports %d to %d of %s are all in use or not allowed", port, last, host)
}
