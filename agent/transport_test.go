package agent

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4/transport"
	"golang.org/x/sys/unix"
)

// slowSource is a connection that has one byte for each read after *wait.
type slowSource struct{ wait *time.Duration }

func (s slowSource) Read(p []byte) (int, error) {
	time.Sleep(*s.wait)
	p[0] = 'x'
	return 1, nil
}

// timedRead reads through m once and tells how long that took.
func timedRead(t *testing.T, m *moderatedReader) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := m.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// A stream (reads back to back) is read in moderated, larger reads; an exchange at the pace of
// execute round trips never is, and a stream that pauses is not any more.
func TestModeratedReader(t *testing.T) {
	wait := time.Duration(0)
	m := &moderatedReader{r: slowSource{&wait}}
	read := func() time.Duration { return timedRead(t, m) }

	// Round trips: a few messages every couple of milliseconds.
	wait = 2 * time.Millisecond
	for i := range 3 * streamReads {
		read()
		if m.streaming {
			t.Fatalf("moderating after %d reads 2 ms apart", i+1)
		}
	}
	// A stream: data is always waiting. (A loaded machine may stretch a few reads; the stream
	// is recognised all the same, a little later.)
	wait = 0
	engage := func() {
		for range 10 * streamReads {
			if read(); m.streaming {
				return
			}
		}
		t.Fatalf("%d reads back to back: not moderating", 10*streamReads)
	}
	engage()
	if d := read(); d < moderation {
		t.Errorf("a moderated read took %s, less than the pause of %s", d, moderation)
	}
	for try := 0; !m.streaming; try++ {
		if try == 5 {
			t.Fatal("data waited after the pause, yet the stream ended")
		}
		engage()
		read()
	}
	// The stream pauses: a read waits for data, and the next one is not held back.
	wait = 5 * time.Millisecond
	read()
	if m.streaming {
		t.Fatal("a read that waited for data did not end the stream")
	}
}

// The agent's hint moderates reads that come too far apart to be counted as a stream.
func TestModeratedReader_Hint(t *testing.T) {
	hint := &outputHint{}
	wait := 2 * time.Millisecond
	m := &moderatedReader{hint: hint, r: slowSource{&wait}}
	read := func() time.Duration { return timedRead(t, m) }
	if d := read(); d >= moderation {
		t.Fatalf("a read without the hint took %s", d)
	}
	hint.streaming.Store(true)
	for range 3 {
		if d := read(); d < moderation {
			t.Fatalf("a read with the hint took %s, less than the pause of %s", d, moderation)
		}
	}
	hint.streaming.Store(false)
	if d := read(); d >= moderation {
		t.Fatalf("a read after the hint ended took %s", d)
	}
}

// Through a kernel socket dialled with the hint, a moderated read raises the socket's
// low-water mark only for its pause: a few bytes after a stream still arrive at once, and
// the mark is one byte again after each read.
func TestBufferedTCP_ModeratedReadsGetSmallData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	hint := &outputHint{}
	hint.streaming.Store(true)
	c, err := bufferedTCP{tcp: transport.New("tcp")}.Dial(withOutputHint(context.Background(), hint), &net.Dialer{}, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	defer server.Close()
	lowat := func() int {
		raw, err := c.(*bufferedConn).Conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var serr error
		if err := raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) }); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		return v
	}
	buf := make([]byte, 64)
	for i := range 3 {
		// The data is sent during the read's pause, or before it, or while the read waits.
		go func() {
			time.Sleep(time.Duration(i) * moderation)
			_, _ = server.Write([]byte("small"))
		}()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "small" {
			t.Fatalf("read %d: %q, %v after %s", i, buf[:n], err, time.Since(start))
		}
		if d := time.Since(start); d < moderation {
			t.Errorf("read %d took %s: not moderated", i, d)
		}
		if v := lowat(); v != 1 {
			t.Errorf("after read %d the low-water mark is %d", i, v)
		}
	}
}
