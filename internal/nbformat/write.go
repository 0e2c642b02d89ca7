package nbformat

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/nbkube/nbkube/internal/jsonspan"
)

// appendNotebook writes a decoded notebook (map[string]any, []any, string, json.Number, bool,
// nil) as nbformat.write does: keys sorted, one-space indent, ": " and "," separators,
// non-ASCII written as is, a final newline. It produces what encoding/json's indenting
// encoder gives once U+2028 and U+2029 are unescaped (FuzzAppendNotebook holds it to that),
// without that encoder's reflection, which is a large part of the cost of a save.
func appendNotebook(b []byte, v any) []byte {
	return appendNotebookElided(b, v, nil)
}

// appendNotebookElided is appendNotebook of a notebook decoded with its large strings elided
// (see elide.go): each placeholder is written as the string it stands for.
func appendNotebookElided(b []byte, v any, e *elided) []byte {
	return append(appendValue(b, v, 0, e), '\n')
}

func appendValue(b []byte, v any, depth int, e *elided) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, t)
	case json.Number:
		return append(b, t...)
	case string:
		if span, ok := e.span(t); ok {
			return append(b, span...)
		}
		return jsonspan.AppendString(b, t)
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
			b = jsonspan.AppendString(b, k)
			b = append(b, ": "...)
			b = appendValue(b, t[k], depth+1, e)
		}
		b = newline(b, depth)
		return append(b, '}')
	case []any:
		if len(t) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, el := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, depth+1)
			b = appendValue(b, el, depth+1, e)
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
