package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// wsMessage is streamMessage as it travels on a WebSocket: with a channel, without identities.
func wsMessage() *Message {
	m := streamMessage()
	m.Identities = nil
	m.Channel = IOPub
	return m
}

func TestJSON_RoundTrip(t *testing.T) {
	m := wsMessage()
	data, err := EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeJSON(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	requireSameMessage(t, got, m)
}

func TestEncodeJSON_WritesJupyterServersFieldsInItsOrder(t *testing.T) {
	m := wsMessage()
	data, err := EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"header": ` + string(m.Header) + `, "msg_id": "5e1f3a2b-7c9d4e6f_1234_42", "msg_type": "stream", ` +
		`"parent_header": ` + string(m.ParentHeader) + `, "metadata": {}, "content": ` + string(m.Content) +
		`, "buffers": [], "channel": "iopub"}`
	if string(data) != want {
		t.Errorf("EncodeJSON =\n%s\nwant\n%s", data, want)
	}
}

func TestEncodeJSON_LeavesOutAnEmptyChannel(t *testing.T) {
	m := wsMessage()
	m.Channel = ""
	data, err := EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"channel"`) {
		t.Errorf("EncodeJSON = %s, want no channel key", data)
	}
}

func TestEncodeJSON_EscapesAnUnusualChannel(t *testing.T) {
	m := wsMessage()
	m.Channel = "a\"b\n\x00é"
	data, err := EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeJSON(data, Limits{})
	if err != nil {
		t.Fatalf("EncodeJSON wrote invalid JSON %s: %v", data, err)
	}
	if got.Channel != m.Channel {
		t.Errorf("channel came back as %q, want %q", got.Channel, m.Channel)
	}
}

func TestEncodeJSON_HeaderWithoutIDsGivesEmptyStrings(t *testing.T) {
	data, err := EncodeJSON(&Message{Channel: Shell})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"header": {}, "msg_id": "", "msg_type": "", "parent_header": {}, "metadata": {}, "content": {}, "buffers": [], "channel": "shell"}`
	if string(data) != want {
		t.Errorf("EncodeJSON(empty message) = %s, want %s", data, want)
	}
}

func TestEncodeJSON_RefusesBuffers(t *testing.T) {
	m := wsMessage()
	m.Buffers = [][]byte{{1}}
	if _, err := EncodeJSON(m); err == nil {
		t.Error("EncodeJSON of a message with buffers succeeded; a text frame cannot carry them")
	}
}

func TestEncodeJSON_RefusesAHeaderThatIsNotAnObject(t *testing.T) {
	m := wsMessage()
	m.Header = json.RawMessage(`["msg_id"]`)
	if _, err := EncodeJSON(m); !errors.Is(err, ErrMalformed) {
		t.Errorf("error = %v, want ErrMalformed", err)
	}
}

// What @jupyterlab/services sends: JSON.stringify of its message, compact, in its own key
// order, top-level msg_id/msg_type absent.
func TestDecodeJSON_ReadsAJupyterLabMessage(t *testing.T) {
	data := `{"header":{"msg_id":"m1","msg_type":"execute_request","username":"","session":"s1","date":"","version":"5.2"},` +
		`"metadata":{},"content":{"code":"1+1","silent":false},"buffers":[],"parent_header":{},"channel":"shell"}`
	m, err := DecodeJSON([]byte(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Message{
		Channel:      Shell,
		Header:       json.RawMessage(`{"msg_id":"m1","msg_type":"execute_request","username":"","session":"s1","date":"","version":"5.2"}`),
		ParentHeader: json.RawMessage(`{}`),
		Metadata:     json.RawMessage(`{}`),
		Content:      json.RawMessage(`{"code":"1+1","silent":false}`),
	}
	requireSameMessage(t, m, want)
}

func TestDecodeJSON_AbsentOrNullDictsAndChannel(t *testing.T) {
	m, err := DecodeJSON([]byte(`{"header": {"msg_type": "kernel_info_request"}, "parent_header": null, "channel": null}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Message{Header: json.RawMessage(`{"msg_type": "kernel_info_request"}`),
		ParentHeader: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`), Content: json.RawMessage(`{}`)}
	requireSameMessage(t, m, want)
}

func TestDecodeJSON_RejectsMalformedFrames(t *testing.T) {
	for _, data := range []string{
		``, `[]`, `null`, `{"header": {}`, `{"header": {}} trailing`,
		`{"header": []}`, `{"content": "text"}`, `{"metadata": 1}`,
		`{"channel": 1}`, `{"channel": {}}`,
		`{"buffers": ["AAEC"]}`, `{"buffers": {}}`,
	} {
		if _, err := DecodeJSON([]byte(data), Limits{}); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeJSON(%s) error = %v, want ErrMalformed", data, err)
		}
	}
}

func TestDecodeJSON_EnforcesMaxBytes(t *testing.T) {
	data, err := EncodeJSON(wsMessage())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeJSON(data, Limits{MaxBytes: len(data) - 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("error = %v, want ErrTooLarge", err)
	}
}

func TestBinary_RoundTrip(t *testing.T) {
	for _, buffers := range [][][]byte{nil, {{0, 1, 2}}, {{}, []byte("second"), {}}} {
		m := wsMessage()
		m.Buffers = buffers
		data, err := EncodeBinary(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBinary(data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		requireSameMessage(t, got, m)
	}
}

func TestEncodeBinary_LaysOutCountOffsetsJSONBuffers(t *testing.T) {
	m := wsMessage()
	m.Buffers = [][]byte{[]byte("AB"), []byte("CDE")}
	data, err := EncodeBinary(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(data); n != 3 {
		t.Fatalf("part count %d, want 3", n)
	}
	o0, o1, o2 := binary.BigEndian.Uint32(data[4:]), binary.BigEndian.Uint32(data[8:]), binary.BigEndian.Uint32(data[12:])
	if o0 != 16 || string(data[o1:o2]) != "AB" || string(data[o2:]) != "CDE" {
		t.Errorf("offsets %d %d %d over %d bytes: want the JSON at 16, then AB, then CDE", o0, o1, o2, len(data))
	}
	js := string(data[o0:o1])
	if strings.Contains(js, `"buffers"`) || !strings.HasSuffix(js, `"channel": "iopub"}`) {
		t.Errorf("JSON part %s: want no buffers key and the channel last", js)
	}
}

func TestDecodeBinary_RejectsBadFraming(t *testing.T) {
	m := wsMessage()
	m.Buffers = [][]byte{[]byte("AB")}
	good, err := EncodeBinary(m)
	if err != nil {
		t.Fatal(err)
	}
	with := func(edit func(b []byte)) []byte {
		b := append([]byte{}, good...)
		edit(b)
		return b
	}
	for name, data := range map[string][]byte{
		"short":                {0, 0, 1},
		"zero parts":           {0, 0, 0, 0},
		"table past the end":   {0, 0, 0, 9, 0, 0, 0, 40},
		"offset in the table":  with(func(b []byte) { binary.BigEndian.PutUint32(b[4:], 8) }),
		"offset past the end":  with(func(b []byte) { binary.BigEndian.PutUint32(b[8:], uint32(len(b)+1)) }),
		"offsets out of order": with(func(b []byte) { binary.BigEndian.PutUint32(b[8:], 11) }),
		"JSON not an object":   {0, 0, 0, 1, 0, 0, 0, 8, '[', ']'},
	} {
		if _, err := DecodeBinary(data, Limits{}); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error = %v, want ErrMalformed", name, err)
		}
	}
	if _, err := DecodeBinary([]byte{0xff, 0xff, 0xff, 0xff}, Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^32-1 parts: error = %v, want ErrTooLarge", err)
	}
	if _, err := DecodeBinary(good, Limits{MaxFrames: 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2 parts, MaxFrames 1: error = %v, want ErrTooLarge", err)
	}
}

// Jupyter's deserialize_binary_message replaces the JSON's "buffers" with the frame's.
func TestDecodeBinary_IgnoresBuffersInsideTheJSON(t *testing.T) {
	js := `{"header": {}, "buffers": ["not", "these"], "channel": "shell"}`
	data := binary.BigEndian.AppendUint32(nil, 2)
	data = binary.BigEndian.AppendUint32(data, 12)
	data = binary.BigEndian.AppendUint32(data, uint32(12+len(js)))
	data = append(append(data, js...), "real"...)
	m, err := DecodeBinary(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Buffers) != 1 || string(m.Buffers[0]) != "real" {
		t.Errorf("buffers %q, want the frame's one buffer", m.Buffers)
	}
}

func TestV1_RoundTrip(t *testing.T) {
	for _, buffers := range [][][]byte{nil, {{0, 1, 2}}, {{}, []byte("second"), {}}} {
		m := wsMessage()
		m.Buffers = buffers
		got, err := DecodeV1(EncodeV1(m), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		requireSameMessage(t, got, m)
	}
}

func TestEncodeV1_LaysOutCountOffsetsParts(t *testing.T) {
	m := &Message{Channel: Shell, Header: json.RawMessage(`{"a":1}`), Buffers: [][]byte{[]byte("XY")}}
	data := EncodeV1(m)
	want := binary.LittleEndian.AppendUint64(nil, 7)
	for _, off := range []uint64{64, 69, 76, 78, 80, 82, 84} {
		want = binary.LittleEndian.AppendUint64(want, off)
	}
	want = append(want, `shell{"a":1}{}{}{}XY`...)
	if string(data) != string(want) {
		t.Errorf("EncodeV1 = %q, want %q", data, want)
	}
}

func TestDecodeV1_EmptyDictPartIsEmptyObject(t *testing.T) {
	data := binary.LittleEndian.AppendUint64(nil, 6)
	for _, off := range []uint64{56, 61, 63, 63, 63, 65} {
		data = binary.LittleEndian.AppendUint64(data, off)
	}
	data = append(data, `shell{}{}`...)
	m, err := DecodeV1(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Message{Channel: Shell, Header: json.RawMessage(`{}`), ParentHeader: json.RawMessage(`{}`),
		Metadata: json.RawMessage(`{}`), Content: json.RawMessage(`{}`)}
	requireSameMessage(t, m, want)
}

func TestDecodeV1_IgnoresBytesAfterTheLastOffset(t *testing.T) {
	m := wsMessage()
	got, err := DecodeV1(append(EncodeV1(m), "trailing"...), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	requireSameMessage(t, got, m)
}

func TestDecodeV1_RejectsBadFraming(t *testing.T) {
	good := EncodeV1(wsMessage())
	with := func(edit func(b []byte)) []byte {
		b := append([]byte{}, good...)
		edit(b)
		return b
	}
	for name, data := range map[string][]byte{
		"short":                {6, 0, 0, 0},
		"five offsets":         with(func(b []byte) { b[0] = 5 }),
		"table past the end":   binary.LittleEndian.AppendUint64(nil, 6),
		"offset in the table":  with(func(b []byte) { binary.LittleEndian.PutUint64(b[8:], 8) }),
		"offset past the end":  with(func(b []byte) { binary.LittleEndian.PutUint64(b[48:], uint64(len(b)+1)) }),
		"offsets out of order": with(func(b []byte) { binary.LittleEndian.PutUint64(b[24:], 60) }),
		"header not an object": with(func(b []byte) { b[binary.LittleEndian.Uint64(b[16:])] = '[' }),
		"channel not UTF-8":    with(func(b []byte) { b[binary.LittleEndian.Uint64(b[8:])] = 0xff }),
	} {
		if _, err := DecodeV1(data, Limits{}); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error = %v, want ErrMalformed", name, err)
		}
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<62)
	if _, err := DecodeV1(huge, Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^62 offsets: error = %v, want ErrTooLarge", err)
	}
	if _, err := DecodeV1(huge, Limits{MaxFrames: 1 << 62}); !errors.Is(err, ErrMalformed) {
		t.Errorf("2^62 offsets in 8 bytes with no frame limit: error = %v, want ErrMalformed", err)
	}
	if _, err := DecodeV1(good, Limits{MaxBytes: len(good) - 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over MaxBytes: error = %v, want ErrTooLarge", err)
	}
}
