package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/internal/wire"
)

// testBudget is the memory budget of the tests below: far less than what their kernels print.
const testBudget = 1 << 20

// noRateLimits connects without Jupyter's iopub rate limits, which would drop a flood first.
const noRateLimits = "&" + agentapi.QueryMsgRateLimit + "=0&" + agentapi.QueryDataRateLimit + "=0"

// flood prints lines of 1000 bytes, flushed one by one so that each is a message of its own;
// the last line says "end". A short pause every 500 lines keeps the kernel's iopub socket
// within its high-water mark (1000 messages), past which ZeroMQ itself drops output that
// the agent, on two busy cores, has not read yet.
func flood(lines int) string {
	return fmt.Sprintf("import time\nfor i in range(%d):\n    print('%%06d' %% i + 'x' * 993, flush=True)\n"+
		"    if i %% 500 == 499: time.sleep(0.05)\nprint('end', flush=True)", lines)
}

// sampleMemory polls the agent's Status until stop is called, which returns the highest
// memory figure seen.
func sampleMemory(t *testing.T, ra *runningAgent) (stop func() int64) {
	t.Helper()
	var peak atomic.Int64
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			req, _ := http.NewRequest(http.MethodGet, "http://"+ra.addr+agentapi.PathStatus, nil)
			req.Header.Set("Authorization", agentapi.AuthScheme+" "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			var st agentapi.Status
			_ = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if st.MemoryBytes > peak.Load() {
				peak.Store(st.MemoryBytes)
			}
		}
	}()
	return func() int64 {
		close(quit)
		wg.Wait()
		return peak.Load()
	}
}

// A session that is away while the kernel prints five times the budget keeps no more than
// the budget: its oldest messages go, its newest are replayed when it comes back.
func TestAgent_AwaySessionKeepsAtMostTheBudget(t *testing.T) {
	ra := startAgent(t, func(c *Config) { c.MemoryBudget = testBudget })
	stay := ra.connectWith(t, "stay", false, noRateLimits)
	away := ra.connect(t, "away", false)
	// The dial returns before the agent attaches a connection; an answer means it has.
	stay.execute("1")
	away.execute("1")
	_ = away.ws.Close()
	testenv.Eventually(t, "the agent to see the client go", 10*time.Second, func() error {
		if n := ra.status(t, "").Connections; n != 1 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})

	peak := sampleMemory(t, ra)
	r := stay.collect(stay.sendExecute(flood(5000), false), 120*time.Second, nil)
	if max := peak(); max > testBudget {
		t.Errorf("memory %d bytes during the flood, budget %d", max, testBudget)
	}
	if got := strings.Count(r.streams(), "\n"); got != 5001 {
		t.Errorf("the connected client got %d lines of 5001", got)
	}
	st := ra.status(t, "")
	if st.ReplayBytes > testBudget || st.MemoryBytes > testBudget || st.ReplayBytes < testBudget/2 {
		t.Errorf("after the flood: replay %d, memory %d bytes, budget %d", st.ReplayBytes, st.MemoryBytes, testBudget)
	}

	back := ra.connect(t, "away", false)
	// The kernel may send several lines in one message, or one line in two.
	var text strings.Builder
	for !strings.HasSuffix(text.String(), "end\n") {
		m, ok := back.next(time.After(20 * time.Second))
		if !ok {
			t.Fatalf("the replay did not reach the end (%d lines)", strings.Count(text.String(), "\n"))
		}
		if h, _ := wire.ParseHeader(m.Header); h.MsgType != "stream" {
			continue
		}
		var c struct{ Text string }
		_ = json.Unmarshal(m.Content, &c)
		text.WriteString(c.Text)
	}
	if n := strings.Count(text.String(), "\n"); n >= 5000 || n < 100 || strings.HasPrefix(text.String(), "000000") {
		t.Errorf("replayed %d lines from %.6q: want the newest that fit the budget, not the oldest", n, text.String())
	}
}

// A client that stops reading while the kernel floods it is cut off; another client of the
// same kernel gets every line, and the kernel runs on.
func TestAgent_SlowClientIsCutOffNotTheKernel(t *testing.T) {
	ra := startAgent(t, func(c *Config) { c.MemoryBudget = testBudget })
	reader := ra.connectWith(t, "reader", false, noRateLimits)
	slow := dialRaw(t, ra, "slow", noRateLimits)
	reader.execute("1")
	testenv.Eventually(t, "the agent to attach both clients", 10*time.Second, func() error {
		if n := ra.status(t, "").Connections; n != 2 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})

	peak := sampleMemory(t, ra)
	r := reader.collect(reader.sendExecute(flood(12000), false), 180*time.Second, nil)
	if got := strings.Count(r.streams(), "\n"); got != 12001 {
		t.Errorf("the reading client got %d lines of 12001", got)
	}
	if max := peak(); max > testBudget {
		t.Errorf("memory %d bytes during the flood, budget %d", max, testBudget)
	}
	testenv.Eventually(t, "the slow client to be cut off", 20*time.Second, func() error {
		if n := ra.status(t, "").Connections; n != 1 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})
	// What the slow client gets is what was under way, then the end of its connection: a
	// 1013 close frame, or none (1006) when its full socket did not let one through.
	_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		if _, _, err := slow.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) && ce.Code != websocket.CloseTryAgainLater && ce.Code != websocket.CloseAbnormalClosure {
				t.Errorf("the slow client was closed with %d %q", ce.Code, ce.Text)
			}
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Error("the slow client's connection did not end")
			}
			break
		}
	}
	if v := reader.execute("6*7").of("execute_result"); len(v) != 1 || v[0]["data"].(map[string]any)["text/plain"] != "42" {
		t.Errorf("after the flood: %v", v)
	}
	if st := ra.status(t, ""); st.RestartCount != 0 || st.ExecutionState != agentapi.ExecutionIdle {
		t.Errorf("status %+v", st)
	}
}

// Messages that clients send while the kernel restarts are held until it answers; those
// beyond the budget are refused by cutting off the client that sent them.
func TestAgent_HeldMessagesBeyondTheBudgetRefuseTheClient(t *testing.T) {
	ra := startAgent(t, func(c *Config) { c.MemoryBudget = testBudget })
	c := ra.connect(t, "pushy", false)
	// The dial returns before the agent attaches the connection; an answer means it has.
	c.execute("1")
	// The restart holds client messages from when it stops the kernel until the new one
	// answers, a second or more of a Python kernel starting.
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		resp := ra.request(t, http.MethodPost, agentapi.PathRestart)
		resp.Body.Close()
	}()
	// The agent tells its clients once it holds their messages.
	for restarting := false; !restarting; {
		m, ok := c.next(time.After(30 * time.Second))
		if !ok {
			t.Fatal("the client was not told of the restart")
		}
		h, _ := wire.ParseHeader(m.Header)
		restarting = h.MsgType == "status" && strings.Contains(string(m.Content), agentapi.ExecutionRestarting)
	}
	big := strings.Repeat("#", 100_000)
	sent := 0
	for ; sent < 30; sent++ {
		if err := c.ws.WriteJSON(executeRequest(c.session, big)); err != nil {
			break
		}
	}
	testenv.Eventually(t, "the client to be refused", 30*time.Second, func() error {
		if n := ra.status(t, "").Connections; n != 0 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})
	if st := ra.status(t, ""); st.MemoryBytes > testBudget {
		t.Errorf("memory %d bytes, budget %d", st.MemoryBytes, testBudget)
	}
	<-restarted
	c2 := ra.connect(t, "other", false)
	if v := c2.execute("6*7").of("execute_result"); len(v) != 1 {
		t.Errorf("after the restart: %v", v)
	}
}

// dialRaw opens the channels of session and reads nothing.
func dialRaw(t *testing.T, ra *runningAgent, session, query string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, ReadBufferSize: 1024}
	u := "ws://" + ra.addr + agentapi.PathChannels + "?" + agentapi.QuerySessionID + "=" + url.QueryEscape(session) + query
	ws, _, err := d.Dial(u, http.Header{"Authorization": {agentapi.AuthScheme + " " + testToken}})
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// executeRequest is an execute_request of code in Jupyter's JSON protocol.
func executeRequest(session, code string) map[string]any {
	return map[string]any{"channel": wire.Shell,
		"header": map[string]string{"msg_id": newID(), "username": "test", "session": session,
			"date": time.Now().UTC().Format(time.RFC3339Nano), "msg_type": "execute_request", "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{},
		"content": map[string]any{"code": code, "silent": false, "store_history": false,
			"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true}}
}

// A charge that does not fit is refused whole; what is released makes room again.
func TestBudget_RefusesWhatDoesNotFit(t *testing.T) {
	b := budget{limit: 100}
	if !b.reserve(60) || !b.reserve(40) {
		t.Fatal("charges within the limit refused")
	}
	if b.reserve(1) || b.used() != 100 {
		t.Fatalf("a charge past the limit accepted: used %d", b.used())
	}
	b.release(30)
	if b.reserve(31) || !b.reserve(30) || b.used() != 100 {
		t.Fatalf("after a release: used %d", b.used())
	}
}
