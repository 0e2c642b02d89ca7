package jpserver

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// takenPorts listens on n consecutive loopback ports and returns the first.
func takenPorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		held := []net.Listener{first}
		for i := 1; i <= n && len(held) == i; i++ {
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+i)); err == nil {
				held = append(held, l)
			}
		}
		// The port after them must be free too.
		if len(held) == n+1 {
			held[n].Close()
			for _, l := range held[:n] {
				t.Cleanup(func() { l.Close() })
			}
			return port
		}
		for _, l := range held {
			l.Close()
		}
	}
	t.Fatal("no free run of ports")
	return 0
}

func TestListen_TakesTheNextFreePort(t *testing.T) {
	port := takenPorts(t, 2)
	l, err := Listen("127.0.0.1:"+strconv.Itoa(port), 50)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Addr().(*net.TCPAddr).Port; got != port+2 {
		t.Errorf("listening on %d, want %d", got, port+2)
	}
}

func TestListen_WithoutRetriesATakenPortFailsAtOnce(t *testing.T) {
	port := takenPorts(t, 1)
	l, err := Listen("127.0.0.1:"+strconv.Itoa(port), 0)
	if err == nil {
		l.Close()
		t.Fatal("listening on a taken port")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %v, want address already in use", err)
	}
}

func TestListen_GivesUpAfterTheRetries(t *testing.T) {
	port := takenPorts(t, 3)
	l, err := Listen("127.0.0.1:"+strconv.Itoa(port), 2)
	if err == nil {
		l.Close()
		t.Fatal("listening although all ports were taken")
	}
	want := "ports " + strconv.Itoa(port) + " to " + strconv.Itoa(port+2) + " of 127.0.0.1 are all in use"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestListen_PortZeroTakesAnyFreePort(t *testing.T) {
	l, err := Listen("127.0.0.1:0", 50)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, addr := range []string{"127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"} {
		if l, err := Listen(addr, 0); err == nil {
			l.Close()
			t.Errorf("Listen(%q) listens", addr)
		}
	}
}
