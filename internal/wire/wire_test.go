package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// streamMessage is a typical iopub message as ipykernel sends it: a stream output of an
// execution, the dicts packed the way jupyter_client packs them.
func streamMessage() *Message {
	return &Message{
		Identities: [][]byte{[]byte("kernel.8f4c0e6a-2b1d-4a7e-9c3f-5d6e7f8a9b0c.stream")},
		Header: json.RawMessage(`{"msg_id": "5e1f3a2b-7c9d4e6f_1234_42", "msg_type": "stream", "username": "alice", ` +
			`"session": "5e1f3a2b-7c9d4e6f", "date": "2025-01-02T03:04:05.123456Z", "version": "5.3"}`),
		ParentHeader: json.RawMessage(`{"msg_id": "a1b2c3d4-e5f6-4711-8899-aabbccddeeff", "msg_type": "execute_request", ` +
			`"username": "alice", "session": "0d9c8b7a-6f5e-4d3c-2b1a-0f9e8d7c6b5a", "date": "2025-01-02T03:04:05.012345Z", "version": "5.3"}`),
		Metadata: json.RawMessage(`{}`),
		Content:  json.RawMessage(`{"name": "stdout", "text": "hello from the kernel\n"}`),
	}
}

// requireSameMessage fails unless got and want have the same fields, byte for byte.
func requireSameMessage(t testing.TB, got, want *Message) {
	t.Helper()
	if !sameMessage(got, want) {
		t.Fatalf("message differs:\n got %s\nwant %s", describe(got), describe(want))
	}
}

func sameMessage(a, b *Message) bool {
	return a.Channel == b.Channel && sameParts(a.Identities, b.Identities) && sameParts(a.Buffers, b.Buffers) &&
		bytes.Equal(a.Header, b.Header) && bytes.Equal(a.ParentHeader, b.ParentHeader) &&
		bytes.Equal(a.Metadata, b.Metadata) && bytes.Equal(a.Content, b.Content)
}

func sameParts(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func describe(m *Message) string {
	return "ids=" + quoteParts(m.Identities) + " channel=" + m.Channel + " header=" + string(m.Header) +
		" parent=" + string(m.ParentHeader) + " metadata=" + string(m.Metadata) + " content=" + string(m.Content) +
		" buffers=" + quoteParts(m.Buffers)
}

func quoteParts(parts [][]byte) string {
	q, _ := json.Marshal(parts)
	return string(q)
}

func TestParseHeader_ReadsTheFieldsNbkubeUses(t *testing.T) {
	h, err := ParseHeader(streamMessage().Header)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{MsgID: "5e1f3a2b-7c9d4e6f_1234_42", MsgType: "stream", Session: "5e1f3a2b-7c9d4e6f",
		Username: "alice", Date: "2025-01-02T03:04:05.123456Z", Version: "5.3"}
	if h != want {
		t.Errorf("ParseHeader = %+v, want %+v", h, want)
	}
}

func TestParseHeader_EmptyObjectIsZeroHeader(t *testing.T) {
	for _, raw := range []string{`{}`, ` { } `, `{"other": [1, {"msg_id": "nested"}], "msg_id": null}`} {
		h, err := ParseHeader(json.RawMessage(raw))
		if err != nil || h != (Header{}) {
			t.Errorf("ParseHeader(%s) = %+v, %v; want a zero Header", raw, h, err)
		}
	}
}

func TestParseHeader_NotAnObjectIsMalformed(t *testing.T) {
	for _, raw := range []string{``, `null`, `[]`, `"msg"`, `{"msg_id": "a"`, `{"msg_id": 7}`, `{"msg_type": {}}`} {
		if _, err := ParseHeader(json.RawMessage(raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseHeader(%q) error = %v, want ErrMalformed", raw, err)
		}
	}
}

// The kernel (Python's json) reads keys exactly and keeps the last duplicate; a check on
// msg_type in nbkube must see the same value.
func TestParseHeader_KeysMatchExactlyAndLastDuplicateWins(t *testing.T) {
	h, err := ParseHeader(json.RawMessage(`{"msg_type": "execute_request", "MSG_TYPE": "kernel_info_request", "Msg_Id": "x", "msg_type": "shutdown_request"}`))
	if err != nil {
		t.Fatal(err)
	}
	if h.MsgType != "shutdown_request" || h.MsgID != "" {
		t.Errorf("ParseHeader = %+v, want msg_type shutdown_request (the last exact key) and no msg_id", h)
	}
	// Only the value that counts must be a string.
	h, err = ParseHeader(json.RawMessage(`{"msg_id": 1, "msg_id": "m2"}`))
	if err != nil || h.MsgID != "m2" {
		t.Errorf("ParseHeader = %+v, %v; want msg_id m2", h, err)
	}
}

func TestParseHeader_DecodesEscapes(t *testing.T) {
	h, err := ParseHeader(json.RawMessage(`{"msg\u005fid": "a\"b\\c\u00e9", "username": "h\u00e9l\u00e8ne"}`))
	if err != nil {
		t.Fatal(err)
	}
	if h.MsgID != `a"b\cé` || h.Username != "hélène" {
		t.Errorf("ParseHeader = %+v, want the unescaped strings", h)
	}
}

// members is checked against encoding/json in FuzzMembers; these are the shapes a scanner
// gets wrong: nested containers, brackets and quotes inside strings, literals at the end.
func TestMembers_AgreesWithEncodingJSON(t *testing.T) {
	for _, obj := range []string{
		`{}`,
		`{"a":1}`,
		` { "a" : [ 1 , { "b" : "}" } ] , "c" : "\"]" , "d":true,"e":null,"f":-1.5e3 } `,
		`{"s":"\\","t":{"u":[[],{}]},"v":false}`,
	} {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(obj), &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		if err := members([]byte(obj), func(key, value []byte) error {
			got[string(key)] = value
			return nil
		}); err != nil {
			t.Fatalf("members(%s): %v", obj, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("members(%s) = %q, want %q", obj, got, want)
		}
	}
}

func TestLimits_ZeroMeansDefaults(t *testing.T) {
	var l Limits
	if l.frames() != 1024 || l.bytes() != 256<<20 {
		t.Errorf("zero Limits = %d frames, %d bytes; want 1024 and 256 MiB", l.frames(), l.bytes())
	}
	l = Limits{MaxFrames: 7, MaxBytes: 99}
	if l.frames() != 7 || l.bytes() != 99 {
		t.Errorf("Limits{7, 99} = %d frames, %d bytes", l.frames(), l.bytes())
	}
}
