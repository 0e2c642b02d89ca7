package jupyter

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends m's JSON to b. It writes what json.Marshal would (field order aside from
// the struct's), without reflection and without re-checking a notebook's raw content, which
// the store produced and which encoding/json would scan once more: for a 50 KB notebook or a
// directory of 200 entries that is most of the cost of an answer.
func (m *ContentsModel) AppendJSON(b []byte) ([]byte, error) {
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
	b = append(b, `,"content":`...)
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
	default:
		data, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b = append(b, data...)
	}
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
	return append(b, '}'), nil
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
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
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
