package jsonspan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestParseObject_SpansAndMembersInOrder(t *testing.T) {
	in := ` {"a": [1, "x\"y", {"b": null}], "k\u00e9y": true, "a": -1.5e3} `
	d, members, err := ParseObject([]byte(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, m.Key+"="+string(d.Text(m.KeyText))+":"+string(d.Text(m.Value)))
	}
	want := []string{`a="a":[1, "x\"y", {"b": null}]`, `kéy="k\u00e9y":true`, `a="a":-1.5e3`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	last, ok := Last(members, "a")
	if !ok || string(d.Text(last)) != "-1.5e3" {
		t.Errorf("Last(a) = %q, %v; want the last of the repeated key", d.Text(last), ok)
	}
	if _, ok := Last(members, "none"); ok {
		t.Error("Last found a missing key")
	}
}

func TestDoc_ValuesOfEachKind(t *testing.T) {
	d, members, err := ParseObject([]byte(`{"arr": [ "a\n" ,"b\\" ], "obj": {}, "str": "\u00e9\"", "num": 7}`), 10)
	if err != nil {
		t.Fatal(err)
	}
	arr, _ := Last(members, "arr")
	obj, _ := Last(members, "obj")
	str, _ := Last(members, "str")
	num, _ := Last(members, "num")

	elems, ok := d.Elements(arr)
	if !ok || len(elems) != 2 || string(d.Text(elems[0])) != `"a\n"` || string(d.Text(elems[1])) != `"b\\"` {
		t.Errorf("Elements(arr) = %v, %v", elems, ok)
	}
	if m, ok := d.Members(obj); !ok || len(m) != 0 {
		t.Errorf("Members({}) = %v, %v", m, ok)
	}
	if s, ok := d.StringValue(str); !ok || s != "é\"" {
		t.Errorf("StringValue = %q, %v", s, ok)
	}
	if raw, ok := d.RawString(str); !ok || string(raw) != `\u00e9\"` {
		t.Errorf("RawString = %q, %v", raw, ok)
	}
	// Each accessor refuses values of another kind.
	if _, ok := d.Elements(obj); ok {
		t.Error("Elements of an object")
	}
	if _, ok := d.Members(arr); ok {
		t.Error("Members of an array")
	}
	if _, ok := d.StringValue(num); ok {
		t.Error("StringValue of a number")
	}
	if _, ok := d.RawString(arr); ok {
		t.Error("RawString of an array")
	}
}

func TestParseObject_RefusesWithPosition(t *testing.T) {
	for in, want := range map[string]string{
		"\xff{}":                 ErrNotUTF8.Error(),
		"":                       ErrNotObject.Error(),
		" [1]":                   ErrNotObject.Error(),
		`"s"`:                    ErrNotObject.Error(),
		`{`:                      "unexpected end of JSON input",
		`{"a" 1}`:                `invalid character '1' at offset 5`,
		`{"a": 1,}`:              `invalid character '}' at offset 8`,
		`{"a": 01}`:              `invalid character '1' at offset 7`,
		`{"a": 1.}`:              `invalid character '}' at offset 8`,
		`{"a": -}`:               `invalid character '}' at offset 7`,
		`{"a": 1e}`:              `invalid character '}' at offset 8`,
		`{"a": tru}`:             `invalid character 't' at offset 6`,
		`{"a": "\x"}`:            `invalid escape in string at offset 7`,
		`{"a": "\u12g4"}`:        `invalid escape in string at offset 7`,
		"{\"a\": \"\x01\"}":      `invalid character '\x01' at offset 7`,
		`{"a": [1 2]}`:           `invalid character '2' at offset 9`,
		`{} x`:                   `invalid character 'x' at offset 3`,
		`{"a": {"b": {"c": 1}}}`: `JSON nested deeper than 2 at offset 12`,
		`{"a": [[1]]}`:           `JSON nested deeper than 2 at offset 7`,
	} {
		_, _, err := ParseObject([]byte(in), 2)
		if err == nil || err.Error() != want {
			t.Errorf("ParseObject(%q) = %v, want %s", in, err, want)
		}
	}
	if _, _, err := ParseObject([]byte(" [] "), 2); !errors.Is(err, ErrNotObject) {
		t.Errorf("array: %v, want ErrNotObject", err)
	}
}

func TestParseObject_DepthLimitCountsTheObject(t *testing.T) {
	in := []byte(`{"a": [{"b": []}]}`)
	if _, _, err := ParseObject(in, 4); err != nil {
		t.Errorf("depth 4 at limit 4: %v", err)
	}
	if _, _, err := ParseObject(in, 3); err == nil {
		t.Error("depth 4 accepted at limit 3")
	}
	if _, _, err := ParseObject([]byte(strings.Repeat("[", 100000)), 1000); err == nil {
		t.Error("deep input accepted")
	}
}

// decode rebuilds the value at s from its spans, the way encoding/json would decode it with
// UseNumber: the fuzz target compares the two.
func decode(t *testing.T, d Doc, s Span) any {
	if members, ok := d.Members(s); ok {
		m := map[string]any{}
		for _, e := range members {
			var key string
			if err := json.Unmarshal(d.Text(e.KeyText), &key); err != nil || key != e.Key {
				t.Fatalf("key %q decodes to %q (%v)", e.Key, key, err)
			}
			m[e.Key] = decode(t, d, e.Value)
		}
		return m
	}
	if elems, ok := d.Elements(s); ok {
		a := []any{}
		for _, e := range elems {
			a = append(a, decode(t, d, e))
		}
		return a
	}
	if str, ok := d.StringValue(s); ok {
		if raw, _ := d.RawString(s); !bytes.Equal(raw, d.Text(s)[1:s.End-s.Start-1]) {
			t.Fatalf("RawString %q is not the text of %q between quotes", raw, d.Text(s))
		}
		return str
	}
	switch text := string(d.Text(s)); text {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	default:
		return json.Number(text)
	}
}

// FuzzParseObject checks that ParseObject accepts exactly the UTF-8 JSON objects that
// encoding/json accepts, and that the spans it finds decode to what encoding/json decodes.
func FuzzParseObject(f *testing.F) {
	for _, seed := range []string{
		`{}`, ` {"a": [1, -2.5e-3, true, false, null, "s\"\\\/\b\f\n\r\t\u00e9"], "b": {"c": {}}} `,
		`{"a": 1, "a": 2}`, `{"\ud83d\ude00": "\ud83d"}`, `[]`, `"x"`, `{"a": 01}`, `{"a": 1.}`, "{\"a\": \"\xff\"}",
		`{"a": "\u00"}`, `{"a"`, `{"a": [}`, strings.Repeat(`{"a":`, 50),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<12 {
			return
		}
		// No depth limit here beyond the input's length: encoding/json's own (10000) is
		// beyond any input this size.
		d, members, err := ParseObject(b, len(b)+1)
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		accepts := json.Valid(b) && utf8.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{'
		if (err == nil) != accepts {
			t.Fatalf("ParseObject(%q) error %v; encoding/json accepts it: %v", b, err, accepts)
		}
		if err != nil {
			return
		}
		var want any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		top := Span{len(b) - len(trimmed), len(bytes.TrimRight(b, " \t\r\n"))}
		got := decode(t, d, top)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("spans of %q decode differently (-encoding/json +spans):\n%s", b, diff)
		}
		if diff := cmp.Diff(members, mustMembers(t, d, top)); diff != "" {
			t.Fatalf("ParseObject and Members disagree on %q (-ParseObject +Members):\n%s", b, diff)
		}
	})
}

func mustMembers(t *testing.T, d Doc, s Span) []Member {
	m, ok := d.Members(s)
	if !ok {
		t.Fatalf("top value %q is not an object", d.Text(s))
	}
	return m
}

// plain8 passes eight bytes only when none would end, escape or break a string: every byte
// value at every position.
func TestPlain8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			want := c != '"' && c != '\\' && c >= 0x20
			if got := plain8(binary.LittleEndian.Uint64(b)); got != want {
				t.Fatalf("byte %#x at %d: plain8 = %v, want %v", c, pos, got, want)
			}
		}
	}
	// Several special bytes at once, and special bytes beside bytes of 0x80 and more.
	for _, s := range []string{"\x00\xff\"\\\x1f\x80ab", "\xe2\x82\xac\xe2\x82\xac\x01a", "\xff\xff\xff\xff\xff\xff\xff\x1f"} {
		if plain8(binary.LittleEndian.Uint64([]byte(s))) {
			t.Errorf("%q taken as plain", s)
		}
	}
}
