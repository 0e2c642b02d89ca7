package jupyter

import (
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/nbkube/nbkube/internal/jsonspan"
)

// StreamedContent is a model's content that is written as the model is, not held in memory:
// a large file's, which the contents store encodes as it reads the file.
type StreamedContent interface {
	// WriteJSON writes the content as a JSON value. The fields that follow content (format,
	// size, hash) are rendered after it returns, so it may complete them: the hash of the
	// bytes it wrote is known only then.
	WriteJSON(w io.Writer) error
}

// AppendJSON appends m's JSON to b. It writes what json.Marshal would (field order aside from
// the struct's), without reflection and without re-checking a notebook's raw content, which
// the store produced and which encoding/json would scan once more: for a 50 KB notebook or a
// directory of 200 entries that is most of the cost of an answer.
func (m *ContentsModel) AppendJSON(b []byte) ([]byte, error) {
	b = m.appendHead(b)
	var err error
	switch c := m.Content.(type) {
	case nil:
		b = append(b, "null"...)
	case json.RawMessage:
		b = append(b, c...)
	case string:
		b = AppendString(b, c)
	case []ContentsModel:
		b = append(b, '[')
		for i := range c {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = c[i].AppendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	case StreamedContent:
		w := appender{b}
		if err := c.WriteJSON(&w); err != nil {
			return nil, err
		}
		b = w.b
	default:
		data, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b = append(b, data...)
	}
	return m.appendTail(b), nil
}

// WriteJSON writes m's JSON, as AppendJSON makes it, to w. A StreamedContent goes straight to
// w; anything else is assembled in memory first.
func (m *ContentsModel) WriteJSON(w io.Writer) error {
	c, ok := m.Content.(StreamedContent)
	if !ok {
		b, err := m.AppendJSON(nil)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if _, err := w.Write(m.appendHead(make([]byte, 0, 512))); err != nil {
		return err
	}
	if err := c.WriteJSON(w); err != nil {
		return err
	}
	_, err := w.Write(m.appendTail(make([]byte, 0, 256)))
	return err
}

// RawParts are m's JSON, as AppendJSON makes it, in three parts whose middle is the content
// itself, not a copy, when the content is raw JSON (a notebook's): written one after the
// other they spare a large notebook's answer a copy of it. ok is false for other contents.
func (m *ContentsModel) RawParts() (head, content, tail []byte, ok bool) {
	raw, ok := m.Content.(json.RawMessage)
	if !ok {
		return nil, nil, nil, false
	}
	return m.appendHead(make([]byte, 0, 512)), raw, m.appendTail(make([]byte, 0, 256)), true
}

// appendHead appends m's fields up to its content's value.
func (m *ContentsModel) appendHead(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = AppendString(b, m.Name)
	b = append(b, `,"path":`...)
	b = AppendString(b, m.Path)
	b = append(b, `,"type":`...)
	b = AppendString(b, m.Type)
	b = append(b, `,"writable":`...)
	b = strconv.AppendBool(b, m.Writable)
	b = append(b, `,"created":`...)
	b = m.Created.appendJSON(b)
	b = append(b, `,"last_modified":`...)
	b = m.LastModified.appendJSON(b)
	b = append(b, `,"mimetype":`...)
	b = appendStringPtr(b, m.Mimetype)
	return append(b, `,"content":`...)
}

// appendTail appends m's fields after its content's value, and closes the object.
func (m *ContentsModel) appendTail(b []byte) []byte {
	b = append(b, `,"format":`...)
	b = appendStringPtr(b, m.Format)
	b = append(b, `,"size":`...)
	if m.Size == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *m.Size, 10)
	}
	if m.Hash != nil {
		b = append(b, `,"hash":`...)
		b = AppendString(b, *m.Hash)
	}
	if m.HashAlgorithm != nil {
		b = append(b, `,"hash_algorithm":`...)
		b = AppendString(b, *m.HashAlgorithm)
	}
	if m.Message != nil {
		b = append(b, `,"message":`...)
		b = AppendString(b, *m.Message)
	}
	return append(b, '}')
}

// appender is an io.Writer onto a byte slice.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func (t Time) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timeLayout)
	return append(b, '"')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

const hexDigits = "0123456789abcdef"

// AppendString writes s as a JSON string the way encoding/json does without HTML escaping
// (short escapes for \b \f \n \r \t, \u00XX for other control characters, U+FFFD for
// invalid UTF-8), except that U+2028 and U+2029 are written as themselves, as Python's json
// does: the bytes of a notebook must be nbformat's.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while they need no escape and are ASCII: most of a
		// notebook's text (HTML, streams, code).
		for i+8 <= len(s) && jsonspan.PlainASCII8(load64(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// load64 is the eight bytes of s at i, little-endian; the compiler makes it one load.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendEscaped appends the JSON string escape of p, without the quotes, as AppendString
// writes it. p must be valid UTF-8, which is copied as is (so that a string written in
// pieces split between characters reads as AppendString writes it whole).
func AppendEscaped(b, p []byte) []byte {
	start := 0
	for i, c := range p {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, p[start:i]...)
		b = appendEscape(b, c)
		start = i + 1
	}
	return append(b, p[start:]...)
}

// appendEscape appends the escape of c, an ASCII character a JSON string cannot hold as is.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
