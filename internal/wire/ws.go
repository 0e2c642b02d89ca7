package wire

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// DecodeJSON decodes a text frame of Jupyter Server's WebSocket JSON protocol,
//
//	{"header":{},"msg_id":"","msg_type":"","parent_header":{},"metadata":{},"content":{},"buffers":[],"channel":"iopub"}
//
// The top-level msg_id and msg_type are ignored (the header is what counts), as are unknown
// keys. A missing or null "channel" leaves Channel "" for the caller to decide (Jupyter Server
// assumes shell). A text frame cannot carry buffers: "buffers" must be absent, null or [].
// The dicts alias data.
func DecodeJSON(data []byte, lim Limits) (*Message, error) {
	if len(data) > lim.bytes() {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), lim.bytes())
	}
	if !isObject(data) {
		return nil, fmt.Errorf("%w: text frame is not a JSON object", ErrMalformed)
	}
	return decodeJSONObject(data, true)
}

// decodeJSONObject reads a message from obj, which has passed isObject. In a text frame a
// non-empty "buffers" is an error; in the JSON part of a binary frame "buffers" is ignored,
// as deserialize_binary_message overwrites it with the frame's buffers.
func decodeJSONObject(obj []byte, text bool) (*Message, error) {
	m := &Message{}
	err := members(obj, func(key, value []byte) error {
		var dst *json.RawMessage
		switch string(key) {
		case "header":
			dst = &m.Header
		case "parent_header":
			dst = &m.ParentHeader
		case "metadata":
			dst = &m.Metadata
		case "content":
			dst = &m.Content
		case "channel":
			ch, ok := jsonString(value)
			if !ok {
				return fmt.Errorf("%w: channel is not a string", ErrMalformed)
			}
			m.Channel = ch
			return nil
		case "buffers":
			if text && !isEmptyArray(value) {
				return fmt.Errorf("%w: a text frame cannot carry buffers", ErrMalformed)
			}
			return nil
		default:
			return nil
		}
		switch {
		case string(value) == "null":
			*dst = nil
		case value[0] == '{':
			*dst = value
		default:
			return fmt.Errorf("%w: %s is not a JSON object", ErrMalformed, key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, d := range []*json.RawMessage{&m.Header, &m.ParentHeader, &m.Metadata, &m.Content} {
		if *d == nil {
			*d = emptyObject()
		}
	}
	return m, nil
}

// isEmptyArray reports whether a valid JSON value is null or [].
func isEmptyArray(value []byte) bool {
	if string(value) == "null" {
		return true
	}
	return value[0] == '[' && len(trimSpace(value[1:len(value)-1])) == 0
}

// EncodeJSON encodes m as a text frame, with the fields and key order of the JSON that
// Jupyter Server 1.23 writes (json.dumps of jupyter_client's deserialized message plus
// "channel", so also its ", " and ": " separators): header, msg_id, msg_type, parent_header,
// metadata, content, buffers (always []), channel (left out when m.Channel is "", as Jupyter
// does without a channel). The dicts are copied in as they are, not re-encoded: they must be
// JSON objects, as every decoder here guarantees. A message with buffers cannot be a text
// frame: use EncodeBinary.
func EncodeJSON(m *Message) ([]byte, error) {
	if len(m.Buffers) > 0 {
		return nil, fmt.Errorf("%w: a message with %d buffers needs a binary frame", ErrMalformed, len(m.Buffers))
	}
	return jsonMessage(m, true, 0, 0)
}

// jsonMessage returns head zero bytes followed by the JSON object of m that both the text and
// the binary format carry (the binary one has no "buffers" key: serialize_binary_message pops
// it), with room for tail more bytes: one allocation for a whole frame.
func jsonMessage(m *Message, buffersKey bool, head, tail int) ([]byte, error) {
	header, parent, metadata, content := orEmpty(m.Header), orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)
	// jupyter_client copies msg_id and msg_type from the header to the top level; we copy
	// their JSON values byte for byte. Jupyter drops a message whose header lacks them; we write "".
	msgID, msgType := []byte(`""`), []byte(`""`)
	err := members(header, func(key, value []byte) error {
		switch string(key) {
		case "msg_id":
			msgID = value
		case "msg_type":
			msgType = value
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	// The keys and separators take 114 bytes; a channel with escapes may need a second allocation.
	b := make([]byte, head, head+120+len(header)+len(msgID)+len(msgType)+len(parent)+len(metadata)+len(content)+len(m.Channel)+tail)
	b = append(b, `{"header": `...)
	b = append(b, header...)
	b = append(b, `, "msg_id": `...)
	b = append(b, msgID...)
	b = append(b, `, "msg_type": `...)
	b = append(b, msgType...)
	b = append(b, `, "parent_header": `...)
	b = append(b, parent...)
	b = append(b, `, "metadata": `...)
	b = append(b, metadata...)
	b = append(b, `, "content": `...)
	b = append(b, content...)
	if buffersKey {
		b = append(b, `, "buffers": []`...)
	}
	if m.Channel != "" {
		b = append(b, `, "channel": `...)
		b = appendString(b, m.Channel)
	}
	return append(b, '}'), nil
}

// DecodeBinary decodes a binary frame of Jupyter Server's JSON protocol
// (deserialize_binary_message): a big-endian uint32 count n of parts, n big-endian uint32
// offsets of the parts from the start of the frame, then the parts: the message as JSON
// (as DecodeJSON reads it) and its buffers; the last part runs to the end of the frame. The
// dicts and buffers alias data.
func DecodeBinary(data []byte, lim Limits) (*Message, error) {
	if len(data) > lim.bytes() {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), lim.bytes())
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, too short for a part count", ErrMalformed, len(data))
	}
	n := uint64(binary.BigEndian.Uint32(data))
	if n == 0 {
		return nil, fmt.Errorf("%w: no parts", ErrMalformed)
	}
	if n > uint64(lim.frames()) {
		return nil, fmt.Errorf("%w: %d parts, limit %d", ErrTooLarge, n, lim.frames())
	}
	table := 4 * (n + 1) // n ≤ 2^32, no overflow
	if table > uint64(len(data)) {
		return nil, fmt.Errorf("%w: %d offsets do not fit in %d bytes", ErrMalformed, n, len(data))
	}
	offsets := make([]int, n+1)
	prev := table
	for i := range n {
		off := uint64(binary.BigEndian.Uint32(data[4*(i+1):]))
		if off < prev || off > uint64(len(data)) {
			return nil, fmt.Errorf("%w: offset %d of part %d out of order or outside the frame", ErrMalformed, off, i)
		}
		offsets[i], prev = int(off), off
	}
	offsets[n] = len(data)
	obj := data[offsets[0]:offsets[1]]
	if !isObject(obj) {
		return nil, fmt.Errorf("%w: first part is not a JSON object", ErrMalformed)
	}
	m, err := decodeJSONObject(obj, false)
	if err != nil {
		return nil, err
	}
	m.Buffers = parts(data, offsets[1:])
	return m, nil
}

// EncodeBinary encodes m in Jupyter Server's binary frame format (serialize_binary_message),
// the JSON part as EncodeJSON writes it but without "buffers". Jupyter Server sends this
// only for a message with buffers, and @jupyterlab/services rejects one without.
func EncodeBinary(m *Message) ([]byte, error) {
	n := 1 + len(m.Buffers)
	table := 4 * (n + 1)
	buffered := 0
	for _, buf := range m.Buffers {
		buffered += len(buf)
	}
	b, err := jsonMessage(m, false, table, buffered)
	if err != nil {
		return nil, err
	}
	if uint64(len(b))+uint64(buffered) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d bytes do not fit uint32 offsets", ErrTooLarge, len(b)+buffered)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	binary.BigEndian.PutUint32(b[4:], uint32(table))
	for i, buf := range m.Buffers {
		binary.BigEndian.PutUint32(b[4*(i+2):], uint32(len(b)))
		b = append(b, buf...)
	}
	return b, nil
}

// v1Dicts is the number of parts of a v1 frame before the buffers: channel and four dicts.
const v1Dicts = 5

// DecodeV1 decodes a frame of the v1.kernel.websocket.jupyter.org subprotocol: a
// little-endian uint64 count n of offsets, n little-endian uint64 offsets, then the parts
// between consecutive offsets: channel, header, parent_header, metadata, content, buffers.
// Like Jupyter Server and @jupyterlab/services, it ignores bytes after the last offset. An
// empty dict part is read as "{}" (@jupyterlab/services writes one for an undefined dict).
// The dicts and buffers alias data.
func DecodeV1(data []byte, lim Limits) (*Message, error) {
	if len(data) > lim.bytes() {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), lim.bytes())
	}
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, too short for an offset count", ErrMalformed, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n < v1Dicts+1 {
		return nil, fmt.Errorf("%w: %d offsets, want at least %d", ErrMalformed, n, v1Dicts+1)
	}
	if n-1 > uint64(lim.frames()) {
		return nil, fmt.Errorf("%w: %d parts, limit %d", ErrTooLarge, n-1, lim.frames())
	}
	if n+1 > uint64(len(data))/8 {
		return nil, fmt.Errorf("%w: %d offsets do not fit in %d bytes", ErrMalformed, n, len(data))
	}
	offsets := make([]int, n)
	prev := 8 * (n + 1)
	for i := range n {
		off := binary.LittleEndian.Uint64(data[8*(i+1):])
		if off < prev || off > uint64(len(data)) {
			return nil, fmt.Errorf("%w: offset %d of part %d out of order or outside the frame", ErrMalformed, off, i)
		}
		offsets[i], prev = int(off), off
	}
	channel := data[offsets[0]:offsets[1]]
	if !utf8.Valid(channel) {
		return nil, fmt.Errorf("%w: channel is not UTF-8", ErrMalformed)
	}
	m := &Message{Channel: string(channel)}
	var err error
	for i, d := range []struct {
		name string
		dst  *json.RawMessage
	}{{"header", &m.Header}, {"parent_header", &m.ParentHeader}, {"metadata", &m.Metadata}, {"content", &m.Content}} {
		if *d.dst, err = object(d.name, data[offsets[i+1]:offsets[i+2]]); err != nil {
			return nil, err
		}
	}
	m.Buffers = parts(data, offsets[v1Dicts:])
	return m, nil
}

// EncodeV1 encodes m as a frame of the v1.kernel.websocket.jupyter.org subprotocol, byte for
// byte what Jupyter Server's serialize_msg_to_ws_v1 and @jupyterlab/services write.
func EncodeV1(m *Message) []byte {
	header, parent, metadata, content := orEmpty(m.Header), orEmpty(m.ParentHeader), orEmpty(m.Metadata), orEmpty(m.Content)
	n := 1 + v1Dicts + len(m.Buffers)
	table := 8 * (n + 1)
	size := table + len(m.Channel) + len(header) + len(parent) + len(metadata) + len(content)
	for _, buf := range m.Buffers {
		size += len(buf)
	}
	b := make([]byte, table, size)
	binary.LittleEndian.PutUint64(b, uint64(n))
	off := 8
	mark := func() {
		binary.LittleEndian.PutUint64(b[off:], uint64(len(b)))
		off += 8
	}
	mark()
	b = append(b, m.Channel...)
	for _, part := range [][]byte{header, parent, metadata, content} {
		mark()
		b = append(b, part...)
	}
	for _, buf := range m.Buffers {
		mark()
		b = append(b, buf...)
	}
	mark()
	return b
}

// parts slices data between consecutive offsets (nil for fewer than two), each part capped
// so that appending to it cannot overwrite the next.
func parts(data []byte, offsets []int) [][]byte {
	if len(offsets) < 2 {
		return nil
	}
	out := make([][]byte, len(offsets)-1)
	for i := range out {
		out[i] = data[offsets[i]:offsets[i+1]:offsets[i+1]]
	}
	return out
}
