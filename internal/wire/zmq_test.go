package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestZMQ_RoundTripKeepsEveryPart(t *testing.T) {
	s := NewSigner([]byte("secret"))
	m := streamMessage()
	m.Identities = append(m.Identities, []byte{0, 0x6b, 0x8b, 0x45, 0x67})
	m.Buffers = [][]byte{{1, 2, 3}, {}, []byte(Delimiter)}
	frames := EncodeZMQ(m, s)
	if len(frames) != 2+1+5+3 || string(frames[2]) != Delimiter {
		t.Fatalf("EncodeZMQ gave %d frames with %q third, want 11 with the delimiter after the 2 identities", len(frames), frames[2])
	}
	got, err := DecodeZMQ(frames, s, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	requireSameMessage(t, got, m)
}

func TestDecodeZMQ_AliasesTheFrames(t *testing.T) {
	frames := EncodeZMQ(streamMessage(), nil)
	m, err := DecodeZMQ(frames, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if &m.Content[0] != &frames[len(frames)-1][0] {
		t.Error("Content is a copy of the content frame")
	}
}

func TestDecodeZMQ_NoIdentitiesAndNoBuffersAreNil(t *testing.T) {
	m := streamMessage()
	m.Identities = nil
	got, err := DecodeZMQ(EncodeZMQ(m, nil), nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Identities != nil || got.Buffers != nil || got.Channel != "" {
		t.Errorf("decoded %s, want nil identities and buffers and no channel", describe(got))
	}
}

func TestEncodeZMQ_UnsetDictsAreEmptyObjects(t *testing.T) {
	s := NewSigner([]byte("secret"))
	frames := EncodeZMQ(&Message{Header: json.RawMessage(`{"msg_type": "kernel_info_request"}`)}, s)
	got, err := DecodeZMQ(frames, s, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]json.RawMessage{"parent_header": got.ParentHeader, "metadata": got.Metadata, "content": got.Content} {
		if string(d) != "{}" {
			t.Errorf("%s = %s, want {}", name, d)
		}
	}
}

func TestDecodeZMQ_RejectsABadSignature(t *testing.T) {
	frames := EncodeZMQ(streamMessage(), NewSigner([]byte("secret")))
	if _, err := DecodeZMQ(frames, NewSigner([]byte("other")), Limits{}); !errors.Is(err, ErrBadSignature) {
		t.Errorf("wrong key: error = %v, want ErrBadSignature", err)
	}
	if _, err := DecodeZMQ(frames, nil, Limits{}); !errors.Is(err, ErrBadSignature) {
		t.Errorf("signed message to an unsigned decoder: error = %v, want ErrBadSignature", err)
	}
	frames[len(frames)-1] = []byte(`{"name": "stdout", "text": "forged"}`)
	if _, err := DecodeZMQ(frames, NewSigner([]byte("secret")), Limits{}); !errors.Is(err, ErrBadSignature) {
		t.Errorf("changed content: error = %v, want ErrBadSignature", err)
	}
}

func TestDecodeZMQ_RejectsMalformedMessages(t *testing.T) {
	good := EncodeZMQ(streamMessage(), nil)
	for name, frames := range map[string][][]byte{
		"no delimiter":     append([][]byte{}, good[0], good[2], good[3]),
		"empty":            nil,
		"four after delim": good[:6],
		"header an array":  {[]byte(Delimiter), nil, []byte(`[]`), []byte(`{}`), []byte(`{}`), []byte(`{}`)},
		"content invalid":  {[]byte(Delimiter), nil, []byte(`{}`), []byte(`{}`), []byte(`{}`), []byte(`{"a":}`)},
		"content a string": {[]byte(Delimiter), nil, []byte(`{}`), []byte(`{}`), []byte(`{}`), []byte(`"{}"`)},
	} {
		_, err := DecodeZMQ(frames, nil, Limits{})
		want := ErrMalformed
		if name == "no delimiter" || name == "empty" {
			want = ErrNoDelimiter
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: error = %v, want %v", name, err, want)
		}
	}
}

// jupyter_client never sends them, but a null or empty dict is "absent", as in the WebSocket
// formats.
func TestDecodeZMQ_NullOrEmptyDictIsEmptyObject(t *testing.T) {
	frames := [][]byte{[]byte(Delimiter), nil, []byte(`{"msg_type": "status"}`), []byte(`null`), {}, []byte(" null\n")}
	m, err := DecodeZMQ(frames, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.ParentHeader) != "{}" || string(m.Metadata) != "{}" || string(m.Content) != "{}" {
		t.Errorf("decoded %s, want {} for the null and empty dicts", describe(m))
	}
}

func TestDecodeZMQ_FirstDelimiterEndsTheIdentities(t *testing.T) {
	m := streamMessage()
	m.Buffers = [][]byte{[]byte(Delimiter)}
	got, err := DecodeZMQ(EncodeZMQ(m, nil), nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Identities) != 1 || len(got.Buffers) != 1 || !bytes.Equal(got.Buffers[0], []byte(Delimiter)) {
		t.Errorf("decoded %s, want one identity and the delimiter-like buffer kept", describe(got))
	}
}

func TestDecodeZMQ_EnforcesLimits(t *testing.T) {
	m := streamMessage()
	m.Buffers = [][]byte{make([]byte, 1000), make([]byte, 1000)}
	frames := EncodeZMQ(m, nil)
	if _, err := DecodeZMQ(frames, nil, Limits{MaxFrames: len(frames) - 1}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("one frame over MaxFrames: error = %v, want ErrTooLarge", err)
	}
	if _, err := DecodeZMQ(frames, nil, Limits{MaxBytes: 2000}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over MaxBytes: error = %v, want ErrTooLarge", err)
	}
	if _, err := DecodeZMQ(frames, nil, Limits{MaxFrames: len(frames), MaxBytes: 3000}); err != nil {
		t.Errorf("within the limits: %v", err)
	}
}
