package ipcluster

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nbkube/nbkube/internal/wire"
)

// What hub.py's connection_request and queue_status send, after engine 2 left.
const (
	seedConnReply  = `{"status":"ok","engines":{"0":"engine-a","1":"engine-b","10":"engine-c"}}`
	seedQueueReply = `{"status":"ok","0":{"queue":0,"completed":3,"tasks":1},"1":{"queue":2,"completed":0,"tasks":0},` +
		`"2":{"queue":1,"completed":5,"tasks":0},"10":{"queue":0,"completed":0,"tasks":0},"unassigned":4}`
)

func TestParseStatus_EnginesByIDWithoutThoseThatLeft(t *testing.T) {
	st, err := parseStatus(json.RawMessage(seedConnReply), json.RawMessage(seedQueueReply))
	if err != nil {
		t.Fatal(err)
	}
	want := HubStatus{Engines: []Engine{
		{ID: 0, UUID: "engine-a", Tasks: 1, Completed: 3},
		{ID: 1, UUID: "engine-b", Queue: 2},
		{ID: 10, UUID: "engine-c"},
	}, Unassigned: 4}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestParseStatus_RefusesWhatAHubDoesNotSend(t *testing.T) {
	for name, tc := range map[string]struct{ conn, queue string }{
		"no engines":           {`{"status":"ok"}`, `{"unassigned":0}`},
		"id not a number":      {`{"engines":{"x":"a"}}`, `{"x":{},"unassigned":0}`},
		"id not canonical":     {`{"engines":{"01":"a"}}`, `{"01":{},"unassigned":0}`},
		"negative id":          {`{"engines":{"-1":"a"}}`, `{"-1":{},"unassigned":0}`},
		"engine without queue": {`{"engines":{"0":"a"}}`, `{"unassigned":0}`},
		"negative count":       {`{"engines":{"0":"a"}}`, `{"0":{"queue":-1},"unassigned":0}`},
		"count not a number":   {`{"engines":{"0":"a"}}`, `{"0":{"queue":"1"},"unassigned":0}`},
		"no unassigned":        {`{"engines":{}}`, `{}`},
		"verbose unassigned":   {`{"engines":{}}`, `{"unassigned":["m1"]}`},
		"uuid not a string":    {`{"engines":{"0":0}}`, `{"0":{},"unassigned":0}`},
	} {
		if st, err := parseStatus(json.RawMessage(tc.conn), json.RawMessage(tc.queue)); !errors.Is(err, ErrHub) {
			t.Errorf("%s: %+v, %v; want an ErrHub", name, st, err)
		}
	}
}

// reply encodes a message of msgType with content, answering parentID, signed with key.
func reply(key, msgType, parentID, content string) [][]byte {
	header, _ := json.Marshal(wire.Header{MsgID: "r1", MsgType: msgType, Session: "hub", Version: "5.3"})
	parent, _ := json.Marshal(wire.Header{MsgID: parentID, MsgType: "queue_request", Session: "nbkube", Version: "5.3"})
	return wire.EncodeZMQ(&wire.Message{Header: header, ParentHeader: parent, Content: json.RawMessage(content)}, wire.NewSigner([]byte(key)))
}

func TestDecodeReply(t *testing.T) {
	signer := wire.NewSigner([]byte("key"))
	content, other, err := decodeReply(reply("key", "queue_reply", "q1", `{"status":"ok","unassigned":0}`), signer, "q1", "queue_reply")
	if err != nil || other || string(content) != `{"status":"ok","unassigned":0}` {
		t.Errorf("the reply: %s, other %v, %v", content, other, err)
	}
	if _, other, err := decodeReply(reply("key", "queue_reply", "q0", `{"status":"ok"}`), signer, "q1", "queue_reply"); err != nil || !other {
		t.Errorf("a reply to another request: other %v, %v; want other", other, err)
	}
	for name, tc := range map[string]struct {
		frames [][]byte
		want   string
	}{
		"hub_error": {reply("key", "hub_error", "q1", `{"status":"error","ename":"IndexError","evalue":"No Such Engine: [9]","traceback":[]}`),
			"IndexError: No Such Engine"},
		"another type":    {reply("key", "connection_reply", "q1", `{"status":"ok","engines":{}}`), "connection_reply"},
		"another key":     {reply("other", "queue_reply", "q1", `{"status":"ok"}`), "signature"},
		"unsigned":        {reply("", "queue_reply", "q1", `{"status":"ok"}`), "signature"},
		"content no dict": {reply("key", "queue_reply", "q1", `[]`), "content"},
		"no parent":       {reply("key", "queue_reply", "q1", `{"status":"ok"}`)[:3], "frames"},
	} {
		_, _, err := decodeReply(tc.frames, signer, "q1", "queue_reply")
		if !errors.Is(err, ErrHub) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrHub saying %q", name, err, tc.want)
		}
	}
}
