// Package wire encodes and decodes Jupyter messages in the formats nbkube relays between:
// the kernel's ZMQ multipart frames (signed with HMAC-SHA256), and the three WebSocket
// formats of Jupyter Server: JSON text frames, its binary frames for messages with buffers,
// and the v1.kernel.websocket.jupyter.org subprotocol.
//
// A Message keeps header, parent header, metadata and content as the raw JSON bytes it
// arrived with, so relaying a message never re-encodes them. Every decoder is bounded by
// Limits, checks each offset and count before using it, and accepts a dict only if it is a
// JSON object: its first non-space byte is '{' and json.Valid accepts it. A dict that is
// absent, empty or JSON null decodes as "{}", the value Jupyter's own serializers put there
// (jupyter_client packs a None content as "{}", @jupyterlab/services a null parent_header).
// The check is not a formality: EncodeJSON splices the dicts into its output, and a dict from
// user code in a kernel that is not one JSON value could add keys to the frame a browser reads.
// It is most of the cost of DecodeZMQ.
//
// The package imports the standard library only.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Delimiter separates the ZMQ routing identities from the signed message.
const Delimiter = "<IDS|MSG>"

// ProtocolV1 is the WebSocket subprotocol of Jupyter Server 2.x / JupyterLab 4.
const ProtocolV1 = "v1.kernel.websocket.jupyter.org"

// The kernel channels, as named in a WebSocket message's "channel".
const (
	Shell   = "shell"
	IOPub   = "iopub"
	Stdin   = "stdin"
	Control = "control"
)

// Message is one Jupyter message. The four dicts stay raw JSON bytes (never re-encoded on
// the way through), so relaying costs no JSON parsing beyond ParseHeader. Decoded fields
// alias the decoder's input; encoders write an empty dict as "{}".
type Message struct {
	// Identities is the ZMQ routing prefix before the delimiter (nil when from a WebSocket).
	Identities [][]byte
	// Channel is set by WebSocket decoders; ZMQ decoders leave it "" (the caller knows the socket).
	Channel string
	// Header, ParentHeader, Metadata and Content are raw JSON objects; decoders set "{}"
	// for absent ones.
	Header, ParentHeader, Metadata, Content json.RawMessage
	// Buffers are the binary buffers after the content (nil when there are none).
	Buffers [][]byte
}

// Header is the part of a header nbkube reads.
type Header struct {
	MsgID    string `json:"msg_id"`
	MsgType  string `json:"msg_type"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	Version  string `json:"version"`
}

// Limits bound what decoders accept. Zero (or negative) values mean the defaults.
type Limits struct {
	// MaxFrames bounds the parts of one message: ZMQ frames, identities included, or the
	// parts of a WebSocket binary frame (channel, dicts and buffers). Default 1024.
	MaxFrames int
	// MaxBytes bounds the total size of one message. Default 256 MiB.
	MaxBytes int
}

const (
	defaultMaxFrames = 1024
	defaultMaxBytes  = 256 << 20
)

func (l Limits) frames() int {
	if l.MaxFrames <= 0 {
		return defaultMaxFrames
	}
	return l.MaxFrames
}

func (l Limits) bytes() int {
	if l.MaxBytes <= 0 {
		return defaultMaxBytes
	}
	return l.MaxBytes
}

// Errors the decoders return, wrapped with details; test them with errors.Is.
var (
	// ErrNoDelimiter means a ZMQ message has no "<IDS|MSG>" frame.
	ErrNoDelimiter = errors.New("no <IDS|MSG> delimiter")
	// ErrBadSignature means a ZMQ message's HMAC does not match its key.
	ErrBadSignature = errors.New("bad message signature")
	// ErrMalformed means the input is not a message in the expected format.
	ErrMalformed = errors.New("malformed message")
	// ErrTooLarge means the input exceeds the decoder's Limits.
	ErrTooLarge = errors.New("message too large")
)

// ParseHeader reads the fields of Header from a raw header. "{}" gives a zero Header; input
// that is not a JSON object, or a field that is neither a string nor null, is an error.
// Keys match exactly and the last duplicate wins, as in Python's json module, so nbkube sees
// the msg_type the kernel will act on ({"msg_type":…,"MSG_TYPE":…} cannot smuggle one past a
// check, as encoding/json's case-insensitive matching would allow).
func ParseHeader(raw json.RawMessage) (Header, error) {
	if !isObject(raw) {
		return Header{}, fmt.Errorf("%w: header is not a JSON object", ErrMalformed)
	}
	return parseHeader(raw)
}

// ParseDecodedHeader is ParseHeader for the header or parent header of a Message that a
// decoder of this package returned, which it has checked to be one JSON object already: the
// agent reads the header of every message it relays, and the check would otherwise be most
// of that read's cost. Anything else goes through ParseHeader.
func ParseDecodedHeader(raw json.RawMessage) (Header, error) {
	if len(raw) == 0 {
		return Header{}, nil
	}
	return parseHeader(raw)
}

func parseHeader(raw json.RawMessage) (Header, error) {
	var h Header
	var values [len(headerKeys)][]byte
	err := members(raw, func(key, value []byte) error {
		for i, k := range headerKeys {
			if string(key) == k {
				values[i] = value
			}
		}
		return nil
	})
	if err != nil {
		return h, err
	}
	fields := [len(headerKeys)]*string{&h.MsgID, &h.MsgType, &h.Session, &h.Username, &h.Date, &h.Version}
	for i, value := range values {
		if value == nil {
			continue
		}
		s, ok := jsonString(value)
		if !ok {
			return Header{}, fmt.Errorf("%w: header %s is not a string", ErrMalformed, headerKeys[i])
		}
		*fields[i] = s
	}
	return h, nil
}

// headerKeys are the JSON names of Header's fields, in order.
var headerKeys = [...]string{"msg_id", "msg_type", "session", "username", "date", "version"}

// isObject reports whether raw is one JSON object.
func isObject(raw []byte) bool {
	t := trimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// object checks one dict of a binary format (a ZMQ frame or a v1 part), which nothing has
// validated yet, and returns it unchanged, or "{}" when it is empty or null.
func object(name string, raw []byte) (json.RawMessage, error) {
	t := trimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return emptyObject(), nil
	}
	if t[0] != '{' || !json.Valid(t) {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrMalformed, name)
	}
	return raw[:len(raw):len(raw)], nil
}

// emptyObject is a fresh "{}" so that no two messages share (and could clobber) one.
func emptyObject() json.RawMessage { return json.RawMessage{'{', '}'} }

// orEmpty is what encoders write for a dict: the raw bytes, or "{}" for an unset one.
func orEmpty(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	return raw
}

// jsonString decodes a JSON string value; null gives "" (as encoding/json leaves a string
// unset for null). Any other value is not a string.
func jsonString(value []byte) (string, bool) {
	if string(value) == "null" {
		return "", true
	}
	if len(value) < 2 || value[0] != '"' {
		return "", false
	}
	inner := value[1 : len(value)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(value, &s); err != nil {
		return "", false
	}
	return s, true
}

// appendString appends s as a JSON string. Channels are short ASCII names, written as they
// are; anything else goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// isSpace is JSON's whitespace (not bytes.TrimSpace's, which also strips \v, \f and U+0085).
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// members calls fn with the key (unescaped) and the raw value of each member of the JSON
// object obj, in order. It is a scanner, not a parser: encoding/json has no way to walk an
// object's members without decoding them all, and decoding into a map or struct allocates per
// member (and matches struct fields case-insensitively). obj should have passed json.Valid;
// on anything else members returns ErrMalformed or visits nonsense, but never reads out of
// bounds.
func members(obj []byte, fn func(key, value []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return fmt.Errorf("%w: object key expected at byte %d", ErrMalformed, i)
		}
		end, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if err := json.Unmarshal(obj[i:end], &s); err != nil {
				return fmt.Errorf("%w: object key at byte %d: %w", ErrMalformed, i, err)
			}
			key = []byte(s)
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return fmt.Errorf("%w: ':' expected at byte %d", ErrMalformed, i)
		}
		i = skipSpace(obj, i+1)
		end, err = skipValue(obj, i)
		if err != nil {
			return err
		}
		if err := fn(key, obj[i:end:end]); err != nil {
			return err
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return fmt.Errorf("%w: unterminated object", ErrMalformed)
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return fmt.Errorf("%w: ',' or '}' expected at byte %d", ErrMalformed, i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string that starts with the quote at b[i].
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string at byte %d", ErrMalformed, i)
}

// skipValue returns the index after the JSON value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: value expected at byte %d", ErrMalformed, i)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated value at byte %d", ErrMalformed, i)
	default: // number, true, false, null
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("%w: value expected at byte %d", ErrMalformed, i)
		}
		return j, nil
	}
}
