package jupyter

import (
	"encoding/json"
	"io"
	"strconv"

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
		b = jsonspan.AppendString(b, c)
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
	b = jsonspan.AppendString(b, m.Name)
	b = append(b, `,"path":`...)
	b = jsonspan.AppendString(b, m.Path)
	b = append(b, `,"type":`...)
	b = jsonspan.AppendString(b, m.Type)
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
		b = jsonspan.AppendString(b, *m.Hash)
	}
	if m.HashAlgorithm != nil {
		b = append(b, `,"hash_algorithm":`...)
		b = jsonspan.AppendString(b, *m.HashAlgorithm)
	}
	if m.Message != nil {
		b = append(b, `,"message":`...)
		b = jsonspan.AppendString(b, *m.Message)
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
	return jsonspan.AppendString(b, *s)
}
