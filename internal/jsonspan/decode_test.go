package jsonspan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func decodeStd(t *testing.T, b []byte) (any, error) {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errTrailing
	}
	return v, nil
}

var errTrailing = errors.New("trailing data after the value")

func TestDecode_AsEncodingJSONWithUseNumber(t *testing.T) {
	for _, text := range []string{
		`{"cells": [{"source": "print(1)\n", "outputs": [], "execution_count": 3, "n": -2.50e+3}], "nbformat": 4}`,
		`{"a": 1, "a": {"b": [true, false, null]}}`,
		`"\u00e9\ud83d\ude00 \ud83d alone \ude00 too \ud83d\u0041 \/\b\f\n\r\t\"\\"`,
		` [ ] `, `{}`, `[[], {}, ""]`, `0`, `-0.0e-0`, `"ünïcödé \\u0000"`, `"\u0000"`,
	} {
		want, err := decodeStd(t, []byte(text))
		if err != nil {
			t.Fatalf("encoding/json refuses %s: %v", text, err)
		}
		got, err := Decode([]byte(text), 100)
		if err != nil {
			t.Fatalf("Decode(%s): %v", text, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Decode(%s) (-encoding/json +Decode):\n%s", text, diff)
		}
	}
}

func TestDecode_Refuses(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{"a": 1,}`, "offset 8"},
		{`{"a": 1} x`, "offset 9"},
		{`[1, 2`, "unexpected end"},
		{`"\x"`, "invalid escape"},
		{`01`, "offset 1"},
		{"\"\xff\"", ErrNotUTF8.Error()},
		{strings.Repeat("[", 4) + strings.Repeat("]", 4), "deeper than 3"},
		{``, "unexpected end"},
	} {
		_, err := Decode([]byte(tc.text), 3)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v, want an error with %q", tc.text, err, tc.want)
		}
	}
}

// FuzzDecode checks that Decode accepts the UTF-8 JSON texts encoding/json accepts, and
// decodes them to the same values.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{}`, ` {"a": [1, -2.5e-3, true, false, null, "s\"\\\/\b\f\n\r\t\u00e9"], "b": {"c": {}}} `,
		`{"a": 1, "a": 2}`, `{"\ud83d\ude00": "\ud83d"}`, `[]`, `"x"`, `{"a": 01}`, `{"a": 1.}`, "{\"a\": \"\xff\"}",
		`{"a": "\u00"}`, `{"a"`, `{"a": [}`, `"\ud800\udc00\udc00\ud800"`, `1 2`, strings.Repeat(`[`, 50),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<12 {
			return
		}
		got, err := Decode(b, len(b)+1)
		want, stdErr := decodeStd(t, b)
		accepts := stdErr == nil && utf8.Valid(b)
		if (err == nil) != accepts {
			t.Fatalf("Decode(%q) error %v; encoding/json: %v (UTF-8: %v)", b, err, stdErr, utf8.Valid(b))
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Decode(%q) (-encoding/json +Decode):\n%s", b, diff)
		}
	})
}
