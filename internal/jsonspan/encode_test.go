package jsonspan

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<td>row 12</td><td>\"quoted\" \\ and é after sixteen plain bytes</td>\n", "\"\\\n\r\t\x00\x1f", "\xff\xfe", "é\u2028😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", s, b, err)
		}
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if got != w {
			t.Errorf("%q decodes to %q, encoding/json's to %q", s, got, w)
		}
		// Valid text written in pieces (a streamed file's) reads as AppendString writes it.
		if utf8.ValidString(s) {
			var pieces []byte
			for i, r := range s {
				pieces = AppendEscaped(pieces, []byte(s[i:i+utf8.RuneLen(r)]))
			}
			if string(pieces) != string(b[1:len(b)-1]) {
				t.Errorf("%q escaped in pieces as %s, whole as %s", s, pieces, b)
			}
		}
	})
}
