package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"
)

// termSession is a client of a test's terminal.
type termSession struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialTerminal(t *testing.T, url string) *termSession {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &termSession{t, ws}
}

// next is the next message.
func (s *termSession) next() []any {
	s.t.Helper()
	_ = s.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, data, err := s.ws.ReadMessage()
	if err != nil {
		s.t.Fatalf("reading the terminal: %v", err)
	}
	var msg []any
	if err := json.Unmarshal(data, &msg); err != nil || len(msg) == 0 {
		s.t.Fatalf("not a terminado message: %q", data)
	}
	return msg
}

func (s *termSession) send(msg ...any) {
	s.t.Helper()
	if err := s.ws.WriteJSON(msg); err != nil {
		s.t.Fatal(err)
	}
}

// until reads the terminal's output until it has want.
func (s *termSession) until(want string) {
	s.t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		msg := s.next()
		if msg[0] != "stdout" {
			s.t.Fatalf("got %v before %q in %q", msg, want, out.String())
		}
		out.WriteString(msg[1].(string))
	}
}

func TestTerminal_SpeaksTerminadoToSeveralClients(t *testing.T) {
	shell := "/bin/bash"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/sh"
	}
	term, err := StartTerminal([]string{shell}, t.TempDir(), []string{"TERM=xterm", "PS1=$ ", "PATH=/usr/bin:/bin"}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Stop(time.Second) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err == nil {
			term.Attach(ws)
		}
	}))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	a := dialTerminal(t, url)
	if msg := a.next(); msg[0] != "setup" {
		t.Fatalf("first message %v, want setup", msg)
	}
	before := term.LastActivity()
	a.send("stdin", "echo hello-$((40+2))\n")
	a.until("hello-42")
	if !term.LastActivity().After(before) {
		t.Error("typing and output did not move the last activity")
	}

	// The pty takes the smallest rows and the smallest columns of the clients.
	b := dialTerminal(t, url)
	if msg := b.next(); msg[0] != "setup" {
		t.Fatalf("b's first message %v, want setup", msg)
	}
	// b first gets what the terminal printed before it came.
	if msg := b.next(); msg[0] != "stdout" || !strings.Contains(msg[1].(string), "hello-42") {
		t.Fatalf("b's replay %v, want the earlier output", msg)
	}
	a.send("set_size", 30, 100, 600, 800)
	b.send("set_size", 20, 120)
	waitUntil(t, "both sizes applied", func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return term.rows == 20 && term.cols == 100
	})
	a.send("stdin", "stty size\n")
	a.until("20 100")
	// Both see the shell's output.
	b.until("20 100")
	if n := term.Clients(); n != 2 {
		t.Errorf("%d clients attached, want 2", n)
	}
	// b leaves: the pty grows to a's size.
	b.ws.Close()
	waitUntil(t, "a's size alone", func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return term.rows == 30 && term.cols == 100
	})

	// The shell ends: the client is told, and the terminal is over.
	a.send("stdin", "exit\n")
	for {
		msg := a.next()
		if msg[0] == "disconnect" {
			break
		}
	}
	select {
	case <-term.Ended():
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal did not end with its shell")
	}
	// A client that comes after hears at once that it is over.
	c := dialTerminal(t, url)
	if first, second := c.next(), c.next(); first[0] != "setup" || second[0] != "disconnect" {
		t.Errorf("a client after the end got %v, %v", first, second)
	}
}

func TestCompleteRunes_KeepsACharacterSplitAcrossReads(t *testing.T) {
	b := []byte("é€")
	text, rest := completeRunes(b[:4])
	if string(text) != "é" || len(rest) != 2 {
		t.Fatalf("text %q rest %q", text, rest)
	}
	text, rest = completeRunes(append(rest, b[4:]...))
	if string(text) != "€" || len(rest) != 0 {
		t.Fatalf("then text %q rest %q", text, rest)
	}
	if text, _ := completeRunes([]byte{'a', 0xff, 'b'}); string(text) != "a\uFFFDb" {
		t.Errorf("invalid byte: %q", text)
	}
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
