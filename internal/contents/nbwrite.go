package contents

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendNotebook writes a decoded notebook (map[string]any, []any, string, json.Number, bool,
// nil) as nbformat.write does: keys sorted, one-space indent, ": " and "," separators,
// non-ASCII written as is, a final newline. It produces what encoding/json's indenting
// encoder gives after unescapeSeparators, without reflection: that encoder was a quarter of a
// save's time.
func appendNotebook(b []byte, v any) []byte {
	return append(appendValue(b, v, 0), '\n')
}

func appendValue(b []byte, v any, depth int) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, t)
	case json.Number:
		return append(b, t...)
	case string:
		return appendNBString(b, t)
	case map[string]any:
		if len(t) == 0 {
			return append(b, "{}"...)
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, depth+1)
			b = appendNBString(b, k)
			b = append(b, ": "...)
			b = appendValue(b, t[k], depth+1)
		}
		b = newline(b, depth)
		return append(b, '}')
	case []any:
		if len(t) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, depth+1)
			b = appendValue(b, e, depth+1)
		}
		b = newline(b, depth)
		return append(b, ']')
	case float64:
		// Decoding keeps numbers as json.Number; a float only comes from code that built
		// the notebook itself.
		return strconv.AppendFloat(b, t, 'g', -1, 64)
	default:
		data, err := json.Marshal(t)
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, data...)
	}
}

func newline(b []byte, depth int) []byte {
	b = append(b, '\n')
	for range depth {
		b = append(b, ' ')
	}
	return b
}

const nbHex = "0123456789abcdef"

// appendNBString escapes as encoding/json does without HTML escaping, except that U+2028 and
// U+2029 are written as themselves, as Python's json does.
func appendNBString(b []byte, s string) []byte {
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
				b = append(b, '\\', 'u', '0', '0', nbHex[c>>4], nbHex[c&0xf])
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
