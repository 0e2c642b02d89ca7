package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The terminals section: the same terminado client against nbkube local, Jupyter Server with
// terminado, and nbkube local with every pod in a sandbox (as multi-user installs run them).
const (
	// terminalStarts is how many terminals each server starts, taking turns.
	terminalStarts = 20
	// terminalKeystrokes is how many keystrokes one client types, one at a time, each waiting
	// for its echo.
	terminalKeystrokes = 500
	// terminalLine is how many keystrokes make a line before it is entered (a no-op command),
	// so that the line the shell redraws stays short.
	terminalLine = 50
	// manyTerminals type at once, terminalManyKeystrokes each.
	manyTerminals          = 10
	terminalManyKeystrokes = 100
	terminalTimeout        = 2 * time.Minute
)

// terminalResults are one server's measurements; err says why there are none.
type terminalResults struct {
	column string
	// err is why the starts were not measured, echoErr why the echoes were not.
	err, echoErr      error
	first, echo, many []time.Duration
}

type terminalReport struct {
	nbkube, jupyter, sandboxed *terminalResults
}

func measureTerminals(servers []*server, nbkubeBin, work string) *terminalReport {
	rep := &terminalReport{}
	var cols []*terminalResults
	var targets []*server
	for _, s := range servers {
		r := &terminalResults{column: s.name}
		if s.name == "nbkube" {
			rep.nbkube = r
		} else {
			rep.jupyter = r
		}
		cols, targets = append(cols, r), append(targets, s)
	}
	rep.sandboxed = &terminalResults{column: "sandboxed"}
	if s, err := startNbkube(nbkubeBin, filepath.Join(work, "terminals-sandboxed"), "--sandbox"); err != nil {
		rep.sandboxed.err = err
	} else {
		defer s.stop()
		s.name = "sandboxed"
		cols, targets = append(cols, rep.sandboxed), append(targets, s)
	}
	// Starts take turns, so that a drift of the machine's speed is shared.
	for i := range terminalStarts {
		for j := range cols {
			r, s := cols[(i+j)%len(cols)], targets[(i+j)%len(cols)]
			if r.err != nil {
				continue
			}
			waitQuiet(targets)
			d, err := firstOutput(s)
			if err != nil {
				r.err = err
				continue
			}
			r.first = append(r.first, d)
		}
	}
	for j, r := range cols {
		if r.err != nil || r == rep.sandboxed {
			continue
		}
		waitQuiet(targets)
		r.echo, r.echoErr = echoes(targets[j], terminalKeystrokes)
		if r.echoErr == nil {
			r.many, r.echoErr = manyEchoes(targets[j])
		}
	}
	for _, r := range cols {
		for _, d := range [][]time.Duration{r.first, r.echo, r.many} {
			slices.Sort(d)
		}
		if err := errors.Join(r.err, r.echoErr); err != nil {
			fmt.Fprintf(os.Stderr, "%-9s terminals: %v\n", r.column, err)
		}
		if len(r.first) > 0 {
			fmt.Fprintf(os.Stderr, "%-9s terminal first output p50 %.0f ms; echo p50 %s\n", r.column, ms(p50(r.first)), latency(r.echo))
		}
	}
	return rep
}

// terminal is one client of one terminal. A goroutine reads its WebSocket into out, since a
// read that times out breaks a gorilla connection for good.
type terminal struct {
	s    *server
	name string
	ws   *websocket.Conn
	// out brings the text of each stdout message; it is closed, after err is set, when the
	// connection ends.
	out chan string
	err error
}

// openTerminal starts a terminal on s and connects to it.
func openTerminal(s *server) (*terminal, error) {
	req, err := http.NewRequest(http.MethodPost, s.base+"api/terminals", strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	resp, err := terminalRequest(s, req)
	if err != nil {
		return nil, err
	}
	var model struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(resp, &model); err != nil || model.Name == "" {
		return nil, fmt.Errorf("POST /api/terminals: %.200q (%w)", resp, err)
	}
	h := http.Header{}
	h.Set("Authorization", "token "+s.token)
	d := websocket.Dialer{HandshakeTimeout: terminalTimeout}
	ws, r, err := d.Dial("ws"+strings.TrimPrefix(s.base, "http")+"terminals/websocket/"+model.Name, h)
	if err != nil {
		if r != nil {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10))
			r.Body.Close()
			err = fmt.Errorf("%w: %s %s", err, r.Status, bytes.TrimSpace(body))
		}
		return nil, fmt.Errorf("the terminal's WebSocket: %w", err)
	}
	r.Body.Close()
	t := &terminal{s: s, name: model.Name, ws: ws, out: make(chan string, 256)}
	go t.receive()
	return t, nil
}

func (t *terminal) receive() {
	defer close(t.out)
	for {
		var msg []any
		if err := t.ws.ReadJSON(&msg); err != nil {
			t.err = err
			return
		}
		if len(msg) > 1 && msg[0] == "stdout" {
			s, _ := msg[1].(string)
			t.out <- s
		}
		if len(msg) > 0 && msg[0] == "disconnect" {
			t.err = errors.New("the terminal ended")
			return
		}
	}
}

func terminalRequest(s *server, req *http.Request) ([]byte, error) {
	req.Header.Set("Authorization", "token "+s.token)
	resp, err := (&http.Client{Timeout: terminalTimeout}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("%s %s: status %d: %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(body))
	}
	return body, err
}

// read returns the text of the next stdout message.
func (t *terminal) read(deadline time.Time) (string, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case text, ok := <-t.out:
		if !ok {
			return "", t.err
		}
		return text, nil
	case <-timer.C:
		return "", errTerminalQuiet
	}
}

var errTerminalQuiet = errors.New("no output in time")

// drain reads until the terminal has been quiet for a moment.
func (t *terminal) drain() {
	for {
		if _, err := t.read(time.Now().Add(200 * time.Millisecond)); err != nil {
			return
		}
	}
}

// close disconnects and deletes the terminal.
func (t *terminal) close() error {
	_ = t.ws.Close()
	req, err := http.NewRequest(http.MethodDelete, t.s.base+"api/terminals/"+t.name, nil)
	if err != nil {
		return err
	}
	_, err = terminalRequest(t.s, req)
	return err
}

// firstOutput is the time from POST /api/terminals until the WebSocket brings the shell's
// first output (its prompt): what a user waits for after "New terminal".
func firstOutput(s *server) (time.Duration, error) {
	start := time.Now()
	t, err := openTerminal(s)
	if err != nil {
		return 0, err
	}
	for {
		text, err := t.read(start.Add(terminalTimeout))
		if err != nil {
			_ = t.close()
			return 0, fmt.Errorf("waiting for the prompt: %w", err)
		}
		if text != "" {
			d := time.Since(start)
			return d, t.close()
		}
	}
}

// echoes types n keystrokes into a new terminal of s, one at a time, and returns how long
// each took to come back as the shell's echo. Lines are ": xxx...", a command that does
// nothing, entered every terminalLine keystrokes.
func echoes(s *server, n int) ([]time.Duration, error) {
	t, err := openTerminal(s)
	if err != nil {
		return nil, err
	}
	defer func() { _ = t.close() }()
	t.drain()
	var out []time.Duration
	for len(out) < n {
		if err := t.ws.WriteJSON([]any{"stdin", ": "}); err != nil {
			return nil, err
		}
		t.drain()
		for i := 0; i < terminalLine && len(out) < n; i++ {
			start := time.Now()
			if err := t.ws.WriteJSON([]any{"stdin", "x"}); err != nil {
				return nil, err
			}
			for {
				text, err := t.read(start.Add(terminalTimeout))
				if err != nil {
					return nil, fmt.Errorf("waiting for an echo: %w", err)
				}
				if strings.Contains(text, "x") {
					break
				}
			}
			out = append(out, time.Since(start))
		}
		if err := t.ws.WriteJSON([]any{"stdin", "\r"}); err != nil {
			return nil, err
		}
		t.drain()
	}
	return out, nil
}

// manyEchoes runs echoes on manyTerminals terminals of s at once.
func manyEchoes(s *server) ([]time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	var errs []error
	var wg sync.WaitGroup
	for range manyTerminals {
		wg.Go(func() {
			d, err := echoes(s, terminalManyKeystrokes)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, d...)
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return all, errors.Join(errs...)
}

func latency(d []time.Duration) string {
	if len(d) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f / %.2f", ms(p50(d)), ms(p99(d)))
}

func writeTerminals(b *strings.Builder, rep *terminalReport) {
	b.WriteString("\n## Terminals\n\n" +
		"The terminals API on both servers (POST and DELETE /api/terminals, terminado's JSON messages on " +
		"/terminals/websocket/<name>), from one Go client in this process. Jupyter Server runs its shells " +
		"with terminado on its own machine; nbkube local runs each in a pod of the local node, the " +
		"sandboxed column with every pod in a sandbox (`nbkube local --sandbox`, as a multi-user " +
		"installation runs them).\n\n")
	b.WriteString("| scenario | nbkube | Jupyter Server | nbkube, sandboxed | target (nbkube) | nbkube meets it |\n|---|---|---|---|---|---|\n")
	cell := func(r *terminalResults, d func(*terminalResults) []time.Duration, echo bool) string {
		if r == nil {
			return "not measured"
		}
		err := r.err
		if echo && err == nil {
			err = r.echoErr
		}
		switch {
		case err != nil:
			return "n/a (error: " + markdownCell(err.Error(), 120) + ")"
		case len(d(r)) == 0:
			return "–"
		}
		return latency(d(r)) + " ms"
	}
	rows := []struct {
		title  string
		echo   bool
		values func(*terminalResults) []time.Duration
		target string
		limit  time.Duration
	}{
		{fmt.Sprintf("new terminal: POST, WebSocket, first output (p50 / p99 ms, %d starts)", terminalStarts), false,
			func(r *terminalResults) []time.Duration { return r.first }, "p50 < 300 ms", 300 * time.Millisecond},
		{fmt.Sprintf("keystroke echo, one client (p50 / p99 ms, %d keystrokes)", terminalKeystrokes), true,
			func(r *terminalResults) []time.Duration { return r.echo }, "p50 < 5 ms", 5 * time.Millisecond},
		{fmt.Sprintf("keystroke echo, %d terminals typing at once (p50 / p99 ms, %d keystrokes each)", manyTerminals, terminalManyKeystrokes), true,
			func(r *terminalResults) []time.Duration { return r.many }, "–", 0},
	}
	for _, row := range rows {
		meets := "–"
		if n := rep.nbkube; row.limit > 0 && n != nil && len(row.values(n)) > 0 {
			meets = "no"
			if p50(row.values(n)) < row.limit {
				meets = "yes"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", row.title, cell(rep.nbkube, row.values, row.echo),
			cell(rep.jupyter, row.values, row.echo), cell(rep.sandboxed, row.values, row.echo), row.target, meets)
	}
}
