package agent

// A terminal: a shell on a pseudo-terminal, which clients attach to over WebSockets speaking
// terminado's protocol, the in-pod half of Jupyter's /terminals/websocket/<name>.
//
// The protocol is JSON arrays in text frames. The server sends ["setup", {}] when a client
// attaches, then what the terminal printed lately (the replay, so that a client that
// reconnects sees where it was) as one ["stdout", text], then ["stdout", text] as the shell
// prints, and ["disconnect", 1] when the shell has ended. A client sends ["stdin", text] to
// type and ["set_size", rows, cols, ...] to say its size; the pty takes the smallest rows and
// the smallest columns of the clients attached, as terminado's resize_to_smallest does.

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"
)

const (
	// replayChunks and replayBytes bound what a terminal keeps for clients that attach
	// later: terminado keeps the last 1000 reads; the bytes bound keeps a flood of output
	// from holding more than a screenful's worth many times over.
	replayChunks = 1000
	replayBytes  = 1 << 20
	// termQueue bounds the frames waiting for a slow client, which is cut off beyond it (it
	// gets the replay when it comes back).
	termQueue = 512
	// maxTermMessage bounds a client's frame: keystrokes, pastes and sizes.
	maxTermMessage = 1 << 20
	// termDefaultRows and termDefaultCols are the pty's size before any client says its own.
	termDefaultRows, termDefaultCols = 24, 80
)

// Terminal is a shell on a pseudo-terminal and the clients attached to it.
type Terminal struct {
	log   logr.Logger
	cmd   *exec.Cmd
	pty   *os.File
	ended chan struct{}

	mu           sync.Mutex
	clients      map[*termClient]bool
	replay       [][]byte
	replayLen    int
	lastActivity time.Time
	rows, cols   uint16
	done         bool
}

// termClient is one attached WebSocket and the size it said.
type termClient struct {
	ws         *websocket.Conn
	out        chan []byte
	rows, cols uint16
	closed     bool
}

// StartTerminal starts argv (a shell) on a new pseudo-terminal, in dir with env.
func StartTerminal(argv []string, dir string, env []string, log logr.Logger) (*Terminal, error) {
	if len(argv) == 0 {
		return nil, errors.New("no shell to run")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: termDefaultRows, Cols: termDefaultCols})
	if err != nil {
		return nil, err
	}
	t := &Terminal{log: log, cmd: cmd, pty: f, ended: make(chan struct{}), clients: map[*termClient]bool{},
		lastActivity: time.Now(), rows: termDefaultRows, cols: termDefaultCols}
	go t.readLoop()
	return t, nil
}

// Ended is closed once the shell has exited and every client was told.
func (t *Terminal) Ended() <-chan struct{} { return t.ended }

// LastActivity is when a client last typed or the shell last printed.
func (t *Terminal) LastActivity() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastActivity
}

// Clients is how many clients are attached.
func (t *Terminal) Clients() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}

// Stop hangs the shell up, as closing a terminal window does, and kills what is left of its
// process group after grace.
func (t *Terminal) Stop(grace time.Duration) {
	pgid := t.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGHUP)
	select {
	case <-t.ended:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-t.ended
	}
}

// readLoop passes what the shell prints to every client and keeps it for the replay, until
// the pty ends; then it tells the clients and lets them go.
func (t *Terminal) readLoop() {
	buf := make([]byte, 64<<10)
	var carry []byte
	for {
		n, err := t.pty.Read(buf)
		if n > 0 {
			var text []byte
			text, carry = completeRunes(append(carry, buf[:n]...))
			if len(text) > 0 {
				t.printed(text)
			}
		}
		if err != nil {
			break
		}
	}
	_ = t.cmd.Wait()
	_ = t.pty.Close()
	t.mu.Lock()
	t.done = true
	for c := range t.clients {
		t.sendLocked(c, frame("disconnect", 1))
		t.closeLocked(c)
	}
	t.mu.Unlock()
	close(t.ended)
}

// completeRunes splits b into the text up to its last whole UTF-8 character, with invalid
// bytes as U+FFFD, and the start of a character whose rest is yet to come.
func completeRunes(b []byte) (text, rest []byte) {
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	return []byte(string([]rune(string(b[:cut])))), append([]byte(nil), b[cut:]...)
}

// printed hands text to the clients and the replay.
func (t *Terminal) printed(text []byte) {
	msg := frame("stdout", string(text))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastActivity = time.Now()
	t.replay = append(t.replay, text)
	t.replayLen += len(text)
	for len(t.replay) > replayChunks || (t.replayLen > replayBytes && len(t.replay) > 1) {
		t.replayLen -= len(t.replay[0])
		t.replay = t.replay[1:]
	}
	for c := range t.clients {
		t.sendLocked(c, msg)
	}
}

// frame is a terminado message.
func frame(kind string, args ...any) []byte {
	b, _ := json.Marshal(append([]any{kind}, args...))
	return b
}

// sendLocked queues msg for c, or cuts c off when it is too far behind.
func (t *Terminal) sendLocked(c *termClient, msg []byte) {
	if c.closed {
		return
	}
	select {
	case c.out <- msg:
	default:
		t.log.V(1).Info("Terminal client too slow; cut off")
		t.closeLocked(c)
	}
}

func (t *Terminal) closeLocked(c *termClient) {
	if !c.closed {
		c.closed = true
		close(c.out)
	}
}

// Attach serves one client on ws until either side ends; it returns when the client is gone.
func (t *Terminal) Attach(ws *websocket.Conn) {
	c := &termClient{ws: ws, out: make(chan []byte, termQueue)}
	t.mu.Lock()
	t.sendLocked(c, frame("setup", map[string]any{}))
	if t.done {
		t.sendLocked(c, frame("disconnect", 1))
		t.closeLocked(c)
	} else {
		t.clients[c] = true
		if len(t.replay) > 0 {
			var all []byte
			for _, r := range t.replay {
				all = append(all, r...)
			}
			t.sendLocked(c, frame("stdout", string(all)))
		}
	}
	t.mu.Unlock()
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for msg := range c.out {
			if ws.WriteMessage(websocket.TextMessage, msg) != nil {
				break
			}
		}
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = ws.Close()
	}()
	t.readClient(c)
	t.mu.Lock()
	delete(t.clients, c)
	t.closeLocked(c)
	t.resizeLocked()
	t.mu.Unlock()
	<-wrote
}

// readClient acts on what c sends until it goes.
func (t *Terminal) readClient(c *termClient) {
	c.ws.SetReadLimit(maxTermMessage)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var msg []json.RawMessage
		if json.Unmarshal(data, &msg) != nil || len(msg) == 0 {
			continue
		}
		var kind string
		_ = json.Unmarshal(msg[0], &kind)
		switch kind {
		case "stdin":
			var text string
			if len(msg) < 2 || json.Unmarshal(msg[1], &text) != nil {
				continue
			}
			t.mu.Lock()
			t.lastActivity = time.Now()
			t.mu.Unlock()
			if _, err := t.pty.Write([]byte(text)); err != nil {
				return
			}
		case "set_size":
			var rows, cols int
			if len(msg) < 3 || json.Unmarshal(msg[1], &rows) != nil || json.Unmarshal(msg[2], &cols) != nil ||
				rows < 1 || cols < 1 || rows > 1000 || cols > 1000 {
				continue
			}
			t.mu.Lock()
			c.rows, c.cols = uint16(rows), uint16(cols)
			t.resizeLocked()
			t.mu.Unlock()
		}
	}
}

// resizeLocked sizes the pty to the smallest rows and columns of the clients that said theirs.
func (t *Terminal) resizeLocked() {
	var rows, cols uint16
	for c := range t.clients {
		if c.rows > 0 && (rows == 0 || c.rows < rows) {
			rows = c.rows
		}
		if c.cols > 0 && (cols == 0 || c.cols < cols) {
			cols = c.cols
		}
	}
	if rows == 0 || cols == 0 || t.done || (rows == t.rows && cols == t.cols) {
		return
	}
	if err := pty.Setsize(t.pty, &pty.Winsize{Rows: rows, Cols: cols}); err == nil {
		t.rows, t.cols = rows, cols
	}
}
