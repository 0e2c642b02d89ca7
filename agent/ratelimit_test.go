package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// iopubMessage is an iopub message of msgType whose content is content.
func iopubMessage(msgType, content string) (*wire.Message, wire.Header) {
	h := wire.Header{MsgID: newID(), MsgType: msgType}
	hb, _ := json.Marshal(h)
	return &wire.Message{Channel: wire.IOPub, Header: hb, ParentHeader: json.RawMessage(`{}`),
		Metadata: json.RawMessage(`{}`), Content: json.RawMessage(content)}, h
}

// notices collects the limiter's stderr notices.
type notices []string

func (n *notices) add(text string, _ json.RawMessage) { *n = append(*n, text) }

// Over the message rate, output is dropped with one notice; it flows again once the window
// has moved on below 80 % of the limit.
func TestRateLimiter_MessageRateDropsWithOneNoticeUntilTheRateFalls(t *testing.T) {
	r := rateLimiter{limits: agentapi.RateLimits{MsgRate: 10, Window: time.Second}}
	var got notices
	now := time.Unix(1000, 0)
	m, h := iopubMessage("display_data", `{}`)
	for i := range 10 {
		if r.drop(m, h, now, got.add) {
			t.Fatalf("message %d of 10 in a second dropped", i+1)
		}
	}
	for i := range 3 {
		if !r.drop(m, h, now, got.add) {
			t.Fatalf("message %d over the limit sent", i+1)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "IOPub message rate exceeded") ||
		!strings.Contains(got[0], "ServerApp.iopub_msg_rate_limit=10 (msgs/sec)") || !strings.Contains(got[0], "ServerApp.rate_limit_window=1 (secs)") {
		t.Fatalf("notices %q, want one about the message rate", got)
	}
	// The dropped messages were not counted: a second later the window is empty.
	if r.drop(m, h, now.Add(time.Second), got.add) {
		t.Error("a message after the window moved on was dropped")
	}
	if len(got) != 1 {
		t.Errorf("notices %q after the rate fell", got)
	}
}

// Over the data rate (stream bytes), stream output is dropped with its own notice; other
// messages are not counted as data.
func TestRateLimiter_DataRateCountsStreamBytes(t *testing.T) {
	r := rateLimiter{limits: agentapi.RateLimits{DataRate: 300, Window: time.Second}}
	var got notices
	now := time.Unix(1000, 0)
	display, dh := iopubMessage("display_data", `{"data":{"text/plain":"`+strings.Repeat("x", 1000)+`"}}`)
	if r.drop(display, dh, now, got.add) {
		t.Fatal("a display_data message counted as stream data")
	}
	stream, sh := iopubMessage("stream", `{"name":"stdout","text":"`+strings.Repeat("x", 100)+`"}`)
	if r.drop(stream, sh, now, got.add) {
		t.Fatal("one small stream message dropped")
	}
	for !r.drop(stream, sh, now, got.add) {
		if r.byteCount > 300 {
			t.Fatalf("%d stream bytes in a second, none dropped", r.byteCount)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "IOPub data rate exceeded") || !strings.Contains(got[0], "ServerApp.iopub_data_rate_limit=300 (bytes/sec)") {
		t.Errorf("notices %q, want one about the data rate", got)
	}
}

// The kernel going idle lifts the limit at once; status, comm_open and execute_input are
// never dropped, and zero rates or no window limit nothing.
func TestRateLimiter_IdleLiftsTheLimitAndSomeMessagesAlwaysPass(t *testing.T) {
	r := rateLimiter{limits: agentapi.RateLimits{MsgRate: 1, Window: time.Second}}
	var got notices
	now := time.Unix(1000, 0)
	m, h := iopubMessage("display_data", `{}`)
	r.drop(m, h, now, got.add)
	if !r.drop(m, h, now, got.add) {
		t.Fatal("the limit did not trip")
	}
	for _, mt := range []string{"comm_open", "execute_input"} {
		if other, oh := iopubMessage(mt, `{}`); r.drop(other, oh, now, got.add) {
			t.Errorf("%s dropped", mt)
		}
	}
	if busy, bh := iopubMessage("status", `{"execution_state":"busy"}`); r.drop(busy, bh, now, got.add) || !r.msgsExceeded {
		t.Errorf("a busy status was dropped or lifted the limit")
	}
	if idle, ih := iopubMessage("status", `{"execution_state":"idle"}`); r.drop(idle, ih, now, got.add) {
		t.Error("the idle status dropped")
	}
	if r.drop(m, h, now, got.add) {
		t.Error("a message right after idle dropped")
	}
	if r.limits.MsgRate != 1 || r.limits.Window != time.Second {
		t.Errorf("idle reset the limits themselves: %+v", r.limits)
	}

	for _, limits := range []agentapi.RateLimits{{Window: time.Second}, {MsgRate: 1, DataRate: 1}} {
		r := rateLimiter{limits: limits}
		for range 100 {
			if r.drop(m, h, now, got.add) {
				t.Fatalf("limits %+v dropped a message", limits)
			}
		}
	}
}
