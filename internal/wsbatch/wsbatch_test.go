package wsbatch

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// recordingConn records the writes that reach the network.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, append([]byte(nil), p...))
	r.mu.Unlock()
	return r.Conn.Write(p)
}

func (r *recordingConn) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

func pipe(t *testing.T) (*Conn, *recordingConn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	rec := &recordingConn{Conn: a}
	go func() { _, _ = io.Copy(io.Discard, b) }()
	return &Conn{Conn: rec}, rec
}

func TestConn_HeldWritesGoOutInOneWrite(t *testing.T) {
	c, rec := pipe(t)
	for _, s := range []string{"a", "b"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.count(); n != 2 {
		t.Fatalf("not held: %d writes for 2, want each at once", n)
	}
	c.Hold()
	for _, s := range []string{"c", "d", "e"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.count(); n != 2 {
		t.Fatalf("held: %d writes reached the network", n-2)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(); n != 3 || string(rec.writes[2]) != "cde" {
		t.Fatalf("after the flush: %d writes, last %q; want one write of cde", n, rec.writes[n-1])
	}
	// The flush ended the hold.
	if _, err := c.Write([]byte("f")); err != nil || rec.count() != 4 {
		t.Fatalf("after the flush a write waited (%v)", err)
	}
}

func TestConn_ABurstBeyondTheBoundIsWrittenAsItComes(t *testing.T) {
	c, rec := pipe(t)
	c.Hold()
	_, _ = c.Write([]byte("small"))
	big := bytes.Repeat([]byte("x"), maxHeld)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(); n != 2 || string(rec.writes[0]) != "small" || len(rec.writes[1]) != maxHeld {
		t.Fatalf("%d writes; want what was held, then the large one", n)
	}
}

func TestConn_CloseWritesWhatIsHeld(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := &Conn{Conn: a}
	got := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(b)
		got <- string(data)
	}()
	c.Hold()
	_, _ = c.Write([]byte("close frame"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "close frame" {
		t.Fatalf("the peer read %q", s)
	}
}

func TestConn_CloseDoesNotWaitForAPeerThatDoesNotRead(t *testing.T) {
	a, b := net.Pipe() // synchronous: a write waits for the peer's read
	defer b.Close()
	c := &Conn{Conn: a}
	c.Hold()
	_, _ = c.Write([]byte("never read"))
	start := time.Now()
	_ = c.Close()
	if d := time.Since(start); d > closeFlushWait+time.Second {
		t.Fatalf("Close took %s", d)
	}
}

// Through a real WebSocket upgrade: the messages a relay writes while it holds the connection
// reach the client whole and in order, in one write to the network.
func TestHijacker_MessagesWrittenHeldArriveInOrder(t *testing.T) {
	conns := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hw := NewHijacker(w)
		ws, err := (&websocket.Upgrader{}).Upgrade(hw, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		conns <- hw.Conn()
		bc := hw.Conn()
		rec := &recordingConn{Conn: bc.Conn}
		bc.Conn = rec
		bc.Hold()
		for i := range 5 {
			if err := ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("m", i+1))); err != nil {
				t.Error(err)
			}
		}
		if err := bc.Flush(); err != nil {
			t.Error(err)
		}
		if n := rec.count(); n != 1 {
			t.Errorf("five held messages took %d writes", n)
		}
		_ = ws.Close()
	}))
	defer srv.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if c := <-conns; c == nil {
		t.Fatal("no Conn after the upgrade")
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range 5 {
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("m", i+1); string(data) != want {
			t.Fatalf("message %d: %q, want %q", i, data, want)
		}
	}
}

// FlushBeforeRead writes what its target holds before it reads, and holds the target again
// once the read brought data.
func TestFlushBeforeRead(t *testing.T) {
	target, rec := pipe(t)
	src, peer := net.Pipe()
	defer peer.Close()
	f := &FlushBeforeRead{Conn: src}
	f.SetTarget(target)
	go func() { _, _ = peer.Write([]byte("from the agent")) }()
	buf := make([]byte, 64)
	if _, err := f.Read(buf); err != nil {
		t.Fatal(err)
	}
	_, _ = target.Write([]byte("one"))
	_, _ = target.Write([]byte("two"))
	if n := rec.count(); n != 0 {
		t.Fatalf("after a read brought data, %d writes went out at once", n)
	}
	go func() { _, _ = peer.Write([]byte("more")) }()
	if _, err := f.Read(buf); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(); n != 1 || string(rec.writes[0]) != "onetwo" {
		t.Fatalf("before the next read: %d writes, want one of onetwo", n)
	}
}
