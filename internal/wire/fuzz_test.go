package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// Each decoder must never panic, and whatever it accepts must survive its encoder: encode,
// decode again, same Message. Run one with
//
//	go test -fuzz=FuzzDecodeV1 -fuzztime=60s ./internal/wire/

// zmqSeparator joins a fuzz input's frames (the fuzzer only mutates byte strings).
var zmqSeparator = []byte("\xff|\xff")

func seedMessages() []*Message {
	var ms []*Message
	for _, c := range interopCases() {
		ms = append(ms, c.message())
	}
	return append(ms, streamMessage(), &Message{Channel: Control})
}

func FuzzDecodeZMQ(f *testing.F) {
	for _, key := range []string{"", "key"} {
		for _, m := range seedMessages() {
			f.Add([]byte(key), bytes.Join(EncodeZMQ(m, NewSigner([]byte(key))), zmqSeparator))
		}
	}
	f.Fuzz(func(t *testing.T, key, data []byte) {
		s := NewSigner(key)
		frames := bytes.Split(data, zmqSeparator)
		m, err := DecodeZMQ(frames, s, Limits{MaxFrames: 64, MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		again, err := DecodeZMQ(EncodeZMQ(m, s), s, Limits{})
		if err != nil {
			t.Fatalf("DecodeZMQ(EncodeZMQ(%s)): %v", describe(m), err)
		}
		requireSameMessage(t, again, m)
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, m := range seedMessages() {
		m.Buffers = nil
		data, err := EncodeJSON(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"header":{"msg_id":"m1","msg_type":"execute_request"},"metadata":{},"content":{"code":"1+1"},"buffers":[],"parent_header":null,"channel":"shell"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeJSON(data, Limits{MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		enc, err := EncodeJSON(m)
		if err != nil {
			t.Fatalf("EncodeJSON(%s): %v", describe(m), err)
		}
		again, err := DecodeJSON(enc, Limits{})
		if err != nil {
			t.Fatalf("DecodeJSON(EncodeJSON(%s)) = %s: %v", describe(m), enc, err)
		}
		requireSameMessage(t, again, m)
	})
}

func FuzzDecodeBinary(f *testing.F) {
	for _, m := range seedMessages() {
		data, err := EncodeBinary(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeBinary(data, Limits{MaxFrames: 64, MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		enc, err := EncodeBinary(m)
		if err != nil {
			t.Fatalf("EncodeBinary(%s): %v", describe(m), err)
		}
		again, err := DecodeBinary(enc, Limits{})
		if err != nil {
			t.Fatalf("DecodeBinary(EncodeBinary(%s)): %v", describe(m), err)
		}
		requireSameMessage(t, again, m)
	})
}

func FuzzDecodeV1(f *testing.F) {
	for _, m := range seedMessages() {
		f.Add(EncodeV1(m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeV1(data, Limits{MaxFrames: 64, MaxBytes: 1 << 16})
		if err != nil {
			return
		}
		again, err := DecodeV1(EncodeV1(m), Limits{})
		if err != nil {
			t.Fatalf("DecodeV1(EncodeV1(%s)): %v", describe(m), err)
		}
		requireSameMessage(t, again, m)
	})
}

// FuzzParseHeader holds ParseHeader and the members scanner under it to encoding/json: the
// same members with the same raw values, and the same header strings, for any JSON object.
func FuzzParseHeader(f *testing.F) {
	for _, m := range seedMessages() {
		f.Add([]byte(m.Header))
		f.Add([]byte(m.Content))
	}
	f.Add([]byte(`{"msg\u005fid": "a\"b", "nested": {"msg_type": "x", "s": "}]"}, "msg_type": null, "n": [1, -2e3, true]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data)
		// Unchecked, on any input: no panic, and on an object the same answer.
		if dh, derr := ParseDecodedHeader(data); err == nil && (derr != nil || dh != h) {
			t.Fatalf("ParseDecodedHeader(%q) = %+v, %v; ParseHeader %+v", data, dh, derr, h)
		}
		var fields map[string]any
		if json.Unmarshal(data, &fields) != nil || fields == nil {
			if err == nil {
				t.Fatalf("ParseHeader(%q) accepted what encoding/json does not read as an object", data)
			}
			return
		}
		var want Header
		wantErr := false
		for key, dst := range map[string]*string{"msg_id": &want.MsgID, "msg_type": &want.MsgType, "session": &want.Session,
			"username": &want.Username, "date": &want.Date, "version": &want.Version} {
			switch v := fields[key].(type) {
			case nil:
			case string:
				*dst = v
			default:
				wantErr = true
			}
		}
		if wantErr != (err != nil) || (err == nil && h != want) {
			t.Fatalf("ParseHeader(%q) = %+v, %v; encoding/json reads %+v (error expected: %v)", data, h, err, want, wantErr)
		}

		// Keys with invalid UTF-8 are replaced by encoding/json and kept by members; neither
		// can equal a key that nbkube looks for.
		if !utf8.Valid(data) {
			return
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		if err := members(data, func(key, value []byte) error {
			got[string(key)] = value
			return nil
		}); err != nil {
			t.Fatalf("members(%q): %v", data, err)
		}
		if !reflect.DeepEqual(got, raw) {
			t.Fatalf("members(%q) = %q, encoding/json reads %q", data, got, raw)
		}
	})
}
