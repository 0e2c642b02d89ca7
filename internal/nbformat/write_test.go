package nbformat

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeWithEncodingJSON is nbformat.write's encoding done with encoding/json's indenting
// encoder: the reference appendNotebook must match byte for byte.
func encodeWithEncodingJSON(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return unescapeSeparators(buf.Bytes())
}

func FuzzAppendNotebook(f *testing.F) {
	for _, s := range []string{
		`{"cells":[{"cell_type":"code","source":["a\n","b"],"outputs":[],"metadata":{},"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}`,
		`{"a":"\u2028\u2029\\u2028 <>& \b\f\u0001 é 😀","b":[1,2.50,-3e10,true,false,null,{},[]],"":{"z":{"y":[[]]}}}`,
		`{"k":"\ud800"}`, `[]`, `"s"`, `1.0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeJSON(data)
		if err != nil {
			return
		}
		want := encodeWithEncodingJSON(t, v)
		if got := appendNotebook(nil, v); !bytes.Equal(got, want) {
			t.Errorf("appendNotebook(%s)\n got %q\nwant %q", data, got, want)
		}
	})
}

// unescapeSeparators writes U+2028 and U+2029 as themselves, as Python's json does with
// ensure_ascii=False, where encoding/json always escapes them.
func unescapeSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		if i+5 < len(b) && string(b[i+1:i+5]) == "u202" && (b[i+5] == '8' || b[i+5] == '9') {
			out = append(out, string(rune(0x2028+int(b[i+5]-'8')))...)
			i += 5
			continue
		}
		// Any other escape is copied whole, so that an escaped backslash is never read as
		// the start of an escape.
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

func TestUnescapeSeparators_LeavesEscapedBackslashesAlone(t *testing.T) {
	in := `["\u2028", "\\u2029", "\\\u2029"]`
	want := "[\"\u2028\", \"\\\\u2029\", \"\\\\\u2029\"]"
	if got := string(unescapeSeparators([]byte(in))); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
