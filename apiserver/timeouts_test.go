package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// readTimeout is the servers' body timeout in these tests: short, so that they wait for
// little, and long enough that a body sent at once arrives on a busy machine.
const readTimeout = time.Second

// servingWithReadTimeout runs a server as the binary does (Serve, on a real listener) with
// readTimeout, over a fresh contents root.
func servingWithReadTimeout(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	root := t.TempDir()
	store, err := contents.New(root, contents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the server stops: cleanups run last first
	o := apiserver.Options{Token: testToken, User: apiserver.User{Name: "alice"}, CookieSecret: bytes.Repeat([]byte("k"), 32),
		Contents: store, ReadTimeout: readTimeout}
	for _, f := range opts {
		f(&o)
	}
	s := serving(t, root, o)
	s.hc = &http.Client{Timeout: 30 * time.Second}
	return s
}

// A client that sends a body slower than the read timeout is cut off once the timeout has
// passed, with 408, and the connection closes: it holds neither for longer.
func TestServe_ABodyTrickledPastTheReadTimeoutIsCutOff(t *testing.T) {
	s := servingWithReadTimeout(t)
	// The server counts from when it starts reading the request, as soon as it accepts.
	start := time.Now()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 1000
	if _, err := fmt.Fprintf(conn, "PUT /api/contents/slow.txt HTTP/1.1\r\nHost: x\r\nAuthorization: token %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{", testToken, size); err != nil {
		t.Fatal(err)
	}
	// One byte every tenth of the timeout: the body would take a hundred timeouts.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(readTimeout / 10)
		defer tick.Stop()
		for range size - 2 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d (%s), want 408", resp.StatusCode, body)
	}
	if took < readTimeout {
		t.Errorf("cut off after %s, before the timeout of %s", took, readTimeout)
	}
	if !resp.Close {
		t.Error("the answer keeps the connection open")
	}
	// The server closes its end: reading finds the end of the stream (or a reset, when a
	// trickled byte came after the close), not the test's deadline.
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading after the answer: %v, want the connection closed", err)
	}
	if _, err := os.Stat(filepath.Join(s.root, "slow.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slow.txt: %v, want none", err)
	}
}

// slowStart is a kernel service whose starts take longer than the read timeout, failing if
// the request is given up before: the stand-in for a kernel whose image is pulled.
type slowStart struct {
	oneKernel
	took time.Duration
}

func (k *slowStart) StartKernel(ctx context.Context, _ apiserver.User, _ repository.KernelStart) (jupyter.Kernel, error) {
	select {
	case <-ctx.Done():
		return jupyter.Kernel{}, fmt.Errorf("the request was given up: %w", context.Cause(ctx))
	case <-time.After(k.took):
		return jupyter.Kernel{ID: k.id}, nil
	}
}

// The timeout bounds the body's arrival, not the work after it: a kernel start that takes
// longer succeeds, and the connection serves the next request.
func TestServe_TheReadTimeoutEndsWithTheBody(t *testing.T) {
	s := servingWithReadTimeout(t, func(o *apiserver.Options) {
		o.Kernels = &slowStart{oneKernel: oneKernel{id: "k1"}, took: 2 * readTimeout}
	})
	r := s.do(http.MethodPost, "/api/kernels", map[string]string{"name": "python3"})
	expect(t, r, http.StatusCreated)
	s.put("after.txt", "still served")
	expect(t, s.do(http.MethodGet, "/api/contents/after.txt", nil), http.StatusOK)
}

// A kernel's WebSocket has no body, and lives on past the read timeout.
func TestServe_WebSocketsOutliveTheReadTimeout(t *testing.T) {
	ep := startAgent(t)
	s := servingWithReadTimeout(t, func(o *apiserver.Options) { o.Kernels = &oneKernel{id: "k1", ep: ep} })
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/api/kernels/k1/channels?session_id=s1",
		http.Header{"Authorization": {"token " + testToken}})
	if err != nil {
		t.Fatalf("dial: %v %v", err, resp)
	}
	defer ws.Close()
	if got := execute(t, ws, false, "6*7"); got != "42" {
		t.Fatalf("6*7 = %q", got)
	}
	// Time passing is what this test is about: nothing to wait for but the clock.
	time.Sleep(3 * readTimeout)
	if got := execute(t, ws, false, "6*7"); got != "42" {
		t.Errorf("after %s: 6*7 = %q", 3*readTimeout, got)
	}
}

// rawRequest sends a request's head on a new connection to s, and returns the connection.
func rawRequest(t *testing.T, s *testServer, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A request that announces a body and sends none of it is answered at once when the answer
// does not need the body: the client is not made to wait for the read timeout. The answer
// closes the connection, so that the client stops sending, and the server closes its end
// soon after.
func TestServe_RefusalsDoNotWaitForTheBody(t *testing.T) {
	s := servingWithReadTimeout(t, func(o *apiserver.Options) {
		o.ReadTimeout, o.BodyIdleTimeout, o.MaxBodyBytes = time.Minute, time.Minute, 1<<20
	})
	auth := "Authorization: token " + testToken + "\n"
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no credentials", "PUT /api/contents/a.txt HTTP/1.1\nHost: x\nContent-Length: 1000\n", http.StatusForbidden},
		{"no credentials, chunked", "PUT /api/contents/a.txt HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n", http.StatusForbidden},
		{"no such route", "POST /no/such/route HTTP/1.1\nHost: x\n" + auth + "Content-Length: 1000\n", http.StatusNotFound},
		{"too large", "PUT /api/contents/a.txt HTTP/1.1\nHost: x\n" + auth + "Content-Length: 2000000\n", http.StatusRequestEntityTooLarge},
		{"a trailing slash", "GET /tree/ HTTP/1.1\nHost: x\n" + auth + "Content-Length: 1000\n", http.StatusFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := rawRequest(t, s, tc.head)
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("answered after %s", took)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if !resp.Close {
				t.Error("the answer keeps the connection open")
			}
			if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("reading after the answer: %v, want the connection closed", err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the connection closed after %s", took)
			}
		})
	}
	// A request whose body the handler reads keeps its connection for the next one.
	conn := rawRequest(t, s, "PUT /api/contents/a.txt HTTP/1.1\nHost: x\n"+auth+"Content-Type: application/json\nContent-Length: 47\n\n"+
		`{"type":"file","format":"text","content":"abc"}`)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || resp.Close {
		t.Errorf("a save: status %d, closes the connection: %v", resp.StatusCode, resp.Close)
	}
}

// A body that stops arriving is given up after the idle timeout, long before the read
// timeout: the client gets 408 and the connection closes.
func TestServe_AStalledBodyIsGivenUpAfterTheIdleTimeout(t *testing.T) {
	const idle = time.Second
	s := servingWithReadTimeout(t, func(o *apiserver.Options) { o.ReadTimeout, o.BodyIdleTimeout = time.Minute, idle })
	conn := rawRequest(t, s, "PUT /api/contents/stalled.txt HTTP/1.1\nHost: x\nAuthorization: token "+testToken+
		"\nContent-Type: application/json\nContent-Length: 1000\n\n{")
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "stalled") {
		t.Errorf("status %d (%s), want 408", resp.StatusCode, body)
	}
	if took < idle*9/10 || took > 10*idle {
		t.Errorf("given up after %s, want about %s", took, idle)
	}
	if !resp.Close {
		t.Error("the answer keeps the connection open")
	}
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading after the answer: %v, want the connection closed", err)
	}
	if _, err := os.Stat(filepath.Join(s.root, "stalled.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stalled.txt: %v, want none", err)
	}
}
