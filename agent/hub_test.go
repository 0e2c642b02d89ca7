package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/internal/wire"
)

func TestAgent_KernelInfoAndExecuteOverBothProtocols(t *testing.T) {
	ra := startAgent(t, nil)
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			c := ra.connect(t, "s-"+newID(), v1)
			info := c.collect(c.send("kernel_info_request", map[string]any{}), 30*time.Second, nil)
			if v, _ := info.reply["protocol_version"].(string); !strings.HasPrefix(v, "5.") {
				t.Errorf("kernel_info_reply %v", info.reply)
			}

			r := c.execute("print('hello'); 1+1")
			if r.reply["status"] != "ok" {
				t.Errorf("execute_reply %v", r.reply)
			}
			if got := r.streams(); got != "hello\n" {
				t.Errorf("stream %q", got)
			}
			results := r.of("execute_result")
			if len(results) != 1 || results[0]["data"].(map[string]any)["text/plain"] != "2" {
				t.Errorf("execute_result %v", results)
			}
			if len(r.states) < 2 || r.states[0] != agentapi.ExecutionBusy || r.states[len(r.states)-1] != agentapi.ExecutionIdle {
				t.Errorf("status sequence %v, want busy … idle", r.states)
			}

			r = c.execute("1/0")
			if r.reply["status"] != "error" || r.reply["ename"] != "ZeroDivisionError" {
				t.Errorf("execute_reply of an error %v", r.reply)
			}
			if errs := r.of("error"); len(errs) != 1 || errs[0]["ename"] != "ZeroDivisionError" {
				t.Errorf("error output %v", errs)
			}
		})
	}
	st := ra.status(t, "")
	if st.ExecutionState != agentapi.ExecutionIdle || !st.Ready || st.RestartCount != 0 {
		t.Errorf("status %+v", st)
	}
}

func TestAgent_BinaryBuffersReachTheClient(t *testing.T) {
	ra := startAgent(t, nil)
	for _, v1 := range []bool{false, true} {
		c := ra.connect(t, "s-"+newID(), v1)
		// A comm message with a binary buffer, as ipywidgets sends.
		r := c.execute(`from ipykernel.comm import Comm
c = Comm(target_name="nbkube-test", data={})
c.send(data={"n": 1}, buffers=[b"\x00\x01binary"])`)
		var found bool
		for _, m := range r.iopub {
			if h, _ := wire.ParseHeader(m.Header); h.MsgType == "comm_msg" {
				found = len(m.Buffers) == 1 && string(m.Buffers[0]) == "\x00\x01binary"
			}
		}
		if !found {
			t.Errorf("v1=%v: no comm_msg with the buffer among %d iopub messages", v1, len(r.iopub))
		}
	}
}

func TestAgent_InputRequestGoesToTheSessionThatAsked(t *testing.T) {
	ra := startAgent(t, nil)
	asker := ra.connect(t, "asker", false)
	other := ra.connect(t, "other", false)
	id := asker.sendExecute("x = input('name? ')", true)
	r := asker.collect(id, 30*time.Second, func(m *wire.Message) {
		var c struct{ Prompt string }
		_ = json.Unmarshal(m.Content, &c)
		if c.Prompt != "name? " {
			t.Errorf("input_request prompt %q", c.Prompt)
		}
		h, _ := wire.ParseHeader(m.Header)
		parent, _ := json.Marshal(map[string]string{"msg_id": h.MsgID, "session": h.Session, "msg_type": "input_request"})
		asker.sendOn(wire.Stdin, "input_reply", parent, map[string]any{"value": "nbkube", "status": "ok"})
	})
	if len(r.stdin) != 1 || r.reply["status"] != "ok" {
		t.Fatalf("stdin %d, reply %v", len(r.stdin), r.reply)
	}
	if v := asker.execute("x").of("execute_result"); len(v) != 1 || v[0]["data"].(map[string]any)["text/plain"] != "'nbkube'" {
		t.Errorf("x = %v", v)
	}
	// The other client saw the iopub traffic of the asker's request but no stdin or reply.
	sawIOPub := false
	for len(other.msgs) > 0 {
		m := <-other.msgs
		if p, _ := wire.ParseHeader(m.ParentHeader); p.MsgID == id {
			if m.Channel != wire.IOPub {
				t.Errorf("the other client got the asker's %s message", m.Channel)
			}
			sawIOPub = true
		}
	}
	if !sawIOPub {
		t.Error("the other client did not see the asker's iopub messages")
	}
}

func TestAgent_ReplaysWhatADisconnectedSessionMissed(t *testing.T) {
	ra := startAgent(t, nil)
	c := ra.connect(t, "replay-me", false)
	id := c.sendExecute("import time\nfor i in range(5):\n    print(i, flush=True); time.sleep(0.2)", false)
	// Leave right after the request went out, with a close handshake: closing the socket
	// with unread data makes Linux reset the connection, and the reset discards the request
	// if the agent has not read it yet. What the agent sent before it saw the close reached
	// this connection; everything after must be replayed.
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second))
	var before reply
	for m := range c.msgs {
		if p, _ := wire.ParseHeader(m.ParentHeader); p.MsgID == id && m.Channel == wire.IOPub {
			before.iopub = append(before.iopub, m)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	c2 := ra.connect(t, "replay-me", false)
	r := c2.collect(id, 20*time.Second, nil)
	if got := before.streams() + r.streams(); got != "0\n1\n2\n3\n4\n" {
		t.Errorf("output before leaving %q, replayed %q", before.streams(), r.streams())
	}
	if r.reply["status"] != "ok" {
		t.Errorf("replayed reply %v", r.reply)
	}
	// A different session gets nothing of it.
	c3 := ra.connect(t, "someone-else", false)
	c3.execute("1")
}

func TestAgent_HeartbeatReportsAFrozenKernelDead(t *testing.T) {
	ra := startAgent(t, func(c *Config) { c.HeartbeatInterval = 200 * time.Millisecond })
	c := ra.connect(t, "s", false)
	pidReply := c.execute("import os; os.getpid()").of("execute_result")
	var pid int
	fmt.Sscan(pidReply[0]["data"].(map[string]any)["text/plain"].(string), &pid)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the frozen kernel to be reported dead", 10*time.Second, func() error {
		if st := ra.status(t, ""); st.ExecutionState != agentapi.ExecutionDead {
			return fmt.Errorf("execution state %s", st.ExecutionState)
		}
		return nil
	})
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the thawed kernel to be alive again", 10*time.Second, func() error {
		if st := ra.status(t, ""); st.ExecutionState == agentapi.ExecutionDead {
			return fmt.Errorf("execution state %s", st.ExecutionState)
		}
		return nil
	})
}

// The bytes kept for sessions that are away are reported, so that the manager can tell how
// much memory replay holds; they go when the session comes back or expires.
func TestAgent_StatusReportsTheBytesHeldForReplay(t *testing.T) {
	ra := startAgent(t, func(c *Config) { c.Replay.TTL = 8 * time.Second })
	stay := ra.connect(t, "stay", false)
	leave := func(c *client) {
		t.Helper()
		_ = c.ws.Close()
		testenv.Eventually(t, "the agent to see the client go", 10*time.Second, func() error {
			if n := ra.status(t, "").Connections; n != 1 {
				return fmt.Errorf("%d connections", n)
			}
			return nil
		})
	}
	leave(ra.connect(t, "away", false))

	stay.execute("print('x' * 1000)")
	first := ra.status(t, "").ReplayBytes
	if first < 1000 {
		t.Fatalf("replay bytes %d after 1000 bytes of output for a session that is away", first)
	}
	stay.execute("print('y' * 5000)")
	if second := ra.status(t, "").ReplayBytes; second < first+5000 {
		t.Fatalf("replay bytes %d after %d and 5000 bytes more output", second, first)
	}

	back := ra.connect(t, "away", false)
	testenv.Eventually(t, "the replayed session to hold nothing", 10*time.Second, func() error {
		if b := ra.status(t, "").ReplayBytes; b != 0 {
			return fmt.Errorf("%d replay bytes", b)
		}
		return nil
	})

	leave(back)
	stay.execute("print('z' * 1000)")
	if b := ra.status(t, "").ReplayBytes; b < 1000 {
		t.Fatalf("replay bytes %d after 1000 bytes of output for a session that left again", b)
	}
	testenv.Eventually(t, "the expired session's bytes to go", 30*time.Second, func() error {
		if b := ra.status(t, "").ReplayBytes; b != 0 {
			return fmt.Errorf("%d replay bytes", b)
		}
		return nil
	})
}

// Until a client first connects, the agent reports since when it has been unused, so that the
// manager can shut down a kernel whose client never came; a client that leaves again does
// not make it unused.
func TestAgent_StatusReportsUnusedUntilTheFirstClient(t *testing.T) {
	before := time.Now()
	ra := startAgent(t, nil)
	st := ra.status(t, "")
	if st.UnusedSince == nil || st.UnusedSince.Before(before.Add(-time.Second)) || st.UnusedSince.After(time.Now()) {
		t.Fatalf("before any client: unused since %v, want about %v", st.UnusedSince, before)
	}
	c := ra.connect(t, "s", false)
	if st := ra.status(t, ""); st.UnusedSince != nil {
		t.Fatalf("with a client: unused since %v", st.UnusedSince)
	}
	_ = c.ws.Close()
	testenv.Eventually(t, "the agent to see the client go", 10*time.Second, func() error {
		st := ra.status(t, "")
		if st.Connections != 0 {
			return fmt.Errorf("%d connections", st.Connections)
		}
		if st.UnusedSince != nil {
			return fmt.Errorf("unused since %v after a client came and went", st.UnusedSince)
		}
		return nil
	})
}
