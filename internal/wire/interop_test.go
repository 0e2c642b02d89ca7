package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// These tests hold the codecs to the real implementations, run from the test so that they
// compare against what is installed, not against bytes captured once:
//   - Debian's jupyter_client 7.4 and Jupyter Server 1.23 (/usr/bin/python3,
//     testdata/jupyter_wire.py): ZMQ frames and signatures, the JSON and binary frames the
//     server writes, serialize_msg_to_ws_v1; and reading back what we write;
//   - @jupyterlab/services 7.6 (node, test/js/node_modules, testdata/jupyterlab_wire.cjs):
//     both WebSocket protocols, both ways.

// interopCase is a message in jupyter_client's packing (json.dumps: ", " and ": ", non-ASCII
// as UTF-8), so that our raw dicts are the bytes Python puts on the wire.
type interopCase struct {
	name     string
	idents   [][]byte
	channel  string
	dicts    [4]string // header, parent_header, metadata, content
	buffers  [][]byte
	nonASCII bool // Jupyter Server's json.dumps escapes non-ASCII; we keep the kernel's UTF-8
}

func interopCases() []interopCase {
	stream := streamMessage()
	return []interopCase{{
		name:    "stream",
		idents:  stream.Identities,
		channel: IOPub,
		dicts:   [4]string{string(stream.Header), string(stream.ParentHeader), string(stream.Metadata), string(stream.Content)},
	}, {
		name:    "execute_request",
		idents:  [][]byte{{0, 0x6b, 0x8b, 0x45, 0x67}},
		channel: Shell,
		dicts: [4]string{
			`{"msg_id": "c0ffee00-0000-4000-8000-000000000001", "msg_type": "execute_request", "username": "hélène", "session": "s-1", "date": "2025-06-07T08:09:10.111213Z", "version": "5.3"}`,
			`{}`,
			`{"cellId": "9d6e2c1a", "deletedCells": []}`,
			`{"code": "print('héllo ✓ \"quoted\"\\n')", "silent": false, "store_history": true, "user_expressions": {}, "allow_stdin": true, "stop_on_error": true}`,
		},
		nonASCII: true,
	}, {
		name:    "comm_msg with buffers",
		channel: IOPub,
		dicts: [4]string{
			`{"msg_id": "b0ffee00-0000-4000-8000-000000000002", "msg_type": "comm_msg", "username": "alice", "session": "s-2", "date": "2025-06-07T08:09:10.222222Z", "version": "5.3"}`,
			`{"msg_id": "b0ffee00-0000-4000-8000-000000000001", "msg_type": "comm_msg", "username": "alice", "session": "s-3", "date": "2025-06-07T08:09:10.111111Z", "version": "5.3"}`,
			`{}`,
			`{"comm_id": "widget-1", "data": {"method": "update", "state": {"value": [1, 2.5, null, true]}, "buffer_paths": [["value"], ["extra"]]}}`,
		},
		buffers: [][]byte{{0, 1, 2, 0xff, 0xfe}, {}, bytes.Repeat([]byte("0123456789"), 100)},
	}}
}

func (c interopCase) message() *Message {
	return &Message{
		Identities: c.idents, Channel: c.channel, Buffers: c.buffers,
		Header: json.RawMessage(c.dicts[0]), ParentHeader: json.RawMessage(c.dicts[1]),
		Metadata: json.RawMessage(c.dicts[2]), Content: json.RawMessage(c.dicts[3]),
	}
}

// ours is what nbkube writes for a case, in the helpers' input format.
type ours struct {
	ZMQ    []string `json:"zmq,omitempty"`
	Text   *string  `json:"text"`
	Binary *string  `json:"binary"`
	V1     string   `json:"v1"`
}

func encodeOurs(t *testing.T, c interopCase, s *Signer) ours {
	t.Helper()
	m := c.message()
	o := ours{ZMQ: b64s(EncodeZMQ(m, s)), V1: b64(EncodeV1(m))}
	// As Jupyter Server: a text frame unless there are buffers.
	if len(m.Buffers) == 0 {
		data, err := EncodeJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		o.Text = &text
	} else {
		data, err := EncodeBinary(m)
		if err != nil {
			t.Fatal(err)
		}
		bin := b64(data)
		o.Binary = &bin
	}
	return o
}

// readBack is a message as a helper read it: dicts re-serialized by the helper's JSON.
type readBack struct {
	Idents  []string `json:"idents"`
	Channel *string  `json:"channel"`
	MsgID   *string  `json:"msg_id"`
	MsgType *string  `json:"msg_type"`
	Header  string   `json:"header"`
	Parent  string   `json:"parent_header"`
	Meta    string   `json:"metadata"`
	Content string   `json:"content"`
	Buffers []string `json:"buffers"`
}

// check fails unless r is c's message: same dicts as JSON values, same buffers, channel,
// identities and top-level ids where the format has them.
func (r *readBack) check(t *testing.T, what string, c interopCase, idents bool) {
	t.Helper()
	for i, got := range []string{r.Header, r.Parent, r.Meta, r.Content} {
		requireSameJSON(t, what, []byte(got), []byte(c.dicts[i]))
	}
	if !sameParts(unb64s(t, r.Buffers), c.buffers) {
		t.Errorf("%s: buffers %q, want %q", what, r.Buffers, b64s(c.buffers))
	}
	if idents && !sameParts(unb64s(t, r.Idents), c.idents) {
		t.Errorf("%s: identities %q, want %q", what, r.Idents, b64s(c.idents))
	}
	if !idents && (r.Channel == nil || *r.Channel != c.channel) {
		t.Errorf("%s: channel %v, want %q", what, r.Channel, c.channel)
	}
	if r.MsgID != nil || r.MsgType != nil {
		h, err := ParseHeader(json.RawMessage(c.dicts[0]))
		if err != nil {
			t.Fatal(err)
		}
		if r.MsgID == nil || *r.MsgID != h.MsgID || r.MsgType == nil || *r.MsgType != h.MsgType {
			t.Errorf("%s: top-level msg_id %v, msg_type %v; want the header's %q, %q", what, r.MsgID, r.MsgType, h.MsgID, h.MsgType)
		}
	}
}

func TestInterop_JupyterClientAndServer(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s with jupyter_client and jupyter_server: %v", python, err)
	}
	for _, key := range []string{"a0b1c2d3-e4f5-6789-abcd-ef0123456789", ""} {
		t.Run("key="+key, func(t *testing.T) {
			cases := interopCases()
			s := NewSigner([]byte(key))
			type pyCase struct {
				Idents  []string `json:"idents"`
				Channel string   `json:"channel"`
				Header  string   `json:"header"`
				Parent  string   `json:"parent_header"`
				Meta    string   `json:"metadata"`
				Content string   `json:"content"`
				Buffers []string `json:"buffers"`
				Ours    ours     `json:"ours"`
			}
			in := struct {
				Key   string   `json:"key"`
				Cases []pyCase `json:"cases"`
			}{Key: key}
			for _, c := range cases {
				in.Cases = append(in.Cases, pyCase{Idents: b64s(c.idents), Channel: c.channel, Header: c.dicts[0],
					Parent: c.dicts[1], Meta: c.dicts[2], Content: c.dicts[3], Buffers: b64s(c.buffers), Ours: encodeOurs(t, c, s)})
			}
			var out []struct {
				ZMQ    []string          `json:"zmq"`
				WS     map[string]string `json:"ws"`
				V1     string            `json:"v1"`
				Packed []string          `json:"packed"`
				Read   struct {
					ZMQ    readBack  `json:"zmq"`
					Text   *readBack `json:"text"`
					Binary *readBack `json:"binary"`
					V1     readBack  `json:"v1"`
				} `json:"read"`
			}
			runHelper(t, exec.Command(python, filepath.Join("testdata", "jupyter_wire.py")), in, &out)
			if len(out) != len(cases) {
				t.Fatalf("helper answered %d cases, want %d", len(out), len(cases))
			}
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					got := out[i]
					for j, packed := range got.Packed {
						if packed != c.dicts[j] {
							t.Fatalf("test case dict %d is not in jupyter_client's packing:\n got %s\nwant %s", j, c.dicts[j], packed)
						}
					}
					m := c.message()
					wm := c.message() // as it travels on a WebSocket
					wm.Identities = nil

					// ZMQ: identical frames, so identical signatures; and we read theirs.
					pyFrames := unb64s(t, got.ZMQ)
					if ourFrames := EncodeZMQ(m, s); !sameParts(ourFrames, pyFrames) {
						t.Errorf("EncodeZMQ differs from Session.serialize:\n got %q\nwant %q", ourFrames, pyFrames)
					}
					decoded, err := DecodeZMQ(pyFrames, s, Limits{})
					if err != nil {
						t.Fatalf("DecodeZMQ(Session.serialize): %v", err)
					}
					zm := c.message()
					zm.Channel = ""
					requireSameMessage(t, decoded, zm)

					// Jupyter Server's JSON protocol, server to client: its frame and ours carry
					// the same JSON, byte for byte unless its json.dumps escaped non-ASCII.
					decoded.Channel = c.channel
					if text, ok := got.WS["text"]; ok {
						ourText, err := EncodeJSON(decoded)
						if err != nil {
							t.Fatal(err)
						}
						requireSameBytesOrJSON(t, "EncodeJSON vs _reserialize_reply", ourText, []byte(text), c.nonASCII)
						fromText, err := DecodeJSON([]byte(text), Limits{})
						if err != nil {
							t.Fatalf("DecodeJSON(Jupyter Server's text frame): %v", err)
						}
						requireSameContent(t, "DecodeJSON(Jupyter Server's text frame)", fromText, wm)
					} else {
						theirs := unb64(t, got.WS["binary"])
						ourBinary, err := EncodeBinary(decoded)
						if err != nil {
							t.Fatal(err)
						}
						requireSameBytesOrJSON(t, "EncodeBinary vs serialize_binary_message", ourBinary, theirs, c.nonASCII)
						fromBinary, err := DecodeBinary(theirs, Limits{})
						if err != nil {
							t.Fatalf("DecodeBinary(serialize_binary_message): %v", err)
						}
						requireSameContent(t, "DecodeBinary(serialize_binary_message)", fromBinary, wm)
					}

					// v1 relays the kernel's frames untouched: byte for byte, always.
					theirV1 := unb64(t, got.V1)
					if ourV1 := EncodeV1(decoded); !bytes.Equal(ourV1, theirV1) {
						t.Errorf("EncodeV1 differs from serialize_msg_to_ws_v1:\n got %q\nwant %q", ourV1, theirV1)
					}
					fromV1, err := DecodeV1(theirV1, Limits{})
					if err != nil {
						t.Fatalf("DecodeV1(serialize_msg_to_ws_v1): %v", err)
					}
					requireSameMessage(t, fromV1, wm)

					// And Jupyter reads what we write.
					got.Read.ZMQ.check(t, "Session.deserialize(EncodeZMQ)", c, true)
					if got.Read.Text != nil {
						got.Read.Text.check(t, "json.loads(EncodeJSON)", c, false)
					}
					if got.Read.Binary != nil {
						got.Read.Binary.check(t, "deserialize_binary_message(EncodeBinary)", c, false)
					}
					got.Read.V1.check(t, "deserialize_msg_from_ws_v1(EncodeV1)", c, false)
				})
			}
		})
	}
}

func TestInterop_JupyterLabServices(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("no node: %v", err)
	}
	modules, err := filepath.Abs(filepath.Join("..", "..", "test", "js", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "@jupyterlab", "services")); err != nil {
		t.Fatalf("@jupyterlab/services is not installed (run `npm ci` in test/js): %v", err)
	}
	cases := interopCases()
	type jsCase struct {
		Channel string   `json:"channel"`
		Header  string   `json:"header"`
		Parent  string   `json:"parent_header"`
		Meta    string   `json:"metadata"`
		Content string   `json:"content"`
		Buffers []string `json:"buffers"`
		Ours    ours     `json:"ours"`
	}
	var in struct {
		Cases []jsCase `json:"cases"`
	}
	for _, c := range cases {
		o := encodeOurs(t, c, nil)
		o.ZMQ = nil
		in.Cases = append(in.Cases, jsCase{Channel: c.channel, Header: c.dicts[0], Parent: c.dicts[1], Meta: c.dicts[2],
			Content: c.dicts[3], Buffers: b64s(c.buffers), Ours: o})
	}
	var out []struct {
		V1      string            `json:"v1"`
		Default map[string]string `json:"default"`
		Read    struct {
			Text   *readBack `json:"text"`
			Binary *readBack `json:"binary"`
			V1     readBack  `json:"v1"`
		} `json:"read"`
	}
	cmd := exec.Command(node, filepath.Join("testdata", "jupyterlab_wire.cjs"))
	cmd.Env = append(os.Environ(), "NBKUBE_JS_MODULES="+modules)
	runHelper(t, cmd, in, &out)
	if len(out) != len(cases) {
		t.Fatalf("helper answered %d cases, want %d", len(out), len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := out[i]
			m := c.message()
			m.Identities = nil

			// v1, client to server: we read JupyterLab's frame, and writing it back gives
			// the same bytes.
			theirV1 := unb64(t, got.V1)
			fromV1, err := DecodeV1(theirV1, Limits{})
			if err != nil {
				t.Fatalf("DecodeV1(serializeV1KernelWebsocketJupyterOrg): %v", err)
			}
			requireSameContent(t, "DecodeV1(JupyterLab)", fromV1, m)
			if again := EncodeV1(fromV1); !bytes.Equal(again, theirV1) {
				t.Errorf("EncodeV1(DecodeV1(JupyterLab's frame)) differs:\n got %q\nwant %q", again, theirV1)
			}

			// The default protocol, client to server: text without buffers, binary with.
			if text, ok := got.Default["text"]; ok {
				fromText, err := DecodeJSON([]byte(text), Limits{})
				if err != nil {
					t.Fatalf("DecodeJSON(JupyterLab's text frame %s): %v", text, err)
				}
				requireSameContent(t, "DecodeJSON(JupyterLab)", fromText, m)
			} else {
				fromBinary, err := DecodeBinary(unb64(t, got.Default["binary"]), Limits{})
				if err != nil {
					t.Fatalf("DecodeBinary(JupyterLab's binary frame): %v", err)
				}
				requireSameContent(t, "DecodeBinary(JupyterLab)", fromBinary, m)
			}

			// Server to client: JupyterLab reads what we write.
			if got.Read.Text != nil {
				got.Read.Text.check(t, "deserialize(EncodeJSON)", c, false)
			}
			if got.Read.Binary != nil {
				got.Read.Binary.check(t, "deserialize(EncodeBinary)", c, false)
			}
			got.Read.V1.check(t, "deserialize(EncodeV1, v1)", c, false)
		})
	}
}

// runHelper runs a helper script with in as JSON on stdin and decodes its stdout into out.
func runHelper(t *testing.T, cmd *exec.Cmd, in, out any) {
	t.Helper()
	input, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = bytes.NewReader(input), &stderr
	output, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
	}
	if err := json.Unmarshal(output, out); err != nil {
		t.Fatalf("%s answered %q: %v", cmd, output, err)
	}
}

// requireSameContent fails unless got carries want's channel, buffers and dicts as JSON values
// (a helper re-serializes them in its own formatting).
func requireSameContent(t *testing.T, what string, got, want *Message) {
	t.Helper()
	if got.Channel != want.Channel || !sameParts(got.Buffers, want.Buffers) || !sameParts(got.Identities, want.Identities) {
		t.Fatalf("%s:\n got %s\nwant %s", what, describe(got), describe(want))
	}
	requireSameJSON(t, what+" header", got.Header, want.Header)
	requireSameJSON(t, what+" parent_header", got.ParentHeader, want.ParentHeader)
	requireSameJSON(t, what+" metadata", got.Metadata, want.Metadata)
	requireSameJSON(t, what+" content", got.Content, want.Content)
}

func requireSameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %s: %v", what, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %s: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// requireSameBytesOrJSON compares two frames of Jupyter's JSON protocol: byte for byte, or,
// when Jupyter escaped non-ASCII characters that we pass through, as the same framing around
// the same JSON value.
func requireSameBytesOrJSON(t *testing.T, what string, got, want []byte, nonASCII bool) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if !nonASCII {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
	gotJSON, gotBufs := splitJupyterBinary(got)
	wantJSON, wantBufs := splitJupyterBinary(want)
	if !sameParts(gotBufs, wantBufs) {
		t.Errorf("%s: buffers %q, want %q", what, gotBufs, wantBufs)
	}
	requireSameJSON(t, what, gotJSON, wantJSON)
}

// splitJupyterBinary returns the JSON and the buffers of a frame of Jupyter's JSON protocol
// (a text frame is all JSON), trusting its framing.
func splitJupyterBinary(frame []byte) ([]byte, [][]byte) {
	if frame[0] == '{' {
		return frame, nil
	}
	n := int(binary.BigEndian.Uint32(frame))
	offsets := make([]int, n+1)
	for i := range n {
		offsets[i] = int(binary.BigEndian.Uint32(frame[4*(i+1):]))
	}
	offsets[n] = len(frame)
	return frame[offsets[0]:offsets[1]], parts(frame, offsets[1:])
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func b64s(parts [][]byte) []string {
	out := []string{}
	for _, p := range parts {
		out = append(out, b64(p))
	}
	return out
}

func unb64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unb64s(t *testing.T, ss []string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range ss {
		out = append(out, unb64(t, s))
	}
	return out
}
