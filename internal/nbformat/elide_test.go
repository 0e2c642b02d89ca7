package nbformat

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// largeStringsNotebook is a notebook whose large strings are of every kind a save meets:
// base64 PNGs (elided), a long line of text output (elided, then split into one line), long
// strings with escapes or non-ASCII or a newline (decoded as before), a long id (never
// elided; here invalid, so the notebook fails validation when invalid is set) and an
// attachment.
func largeStringsNotebook(invalid bool) string {
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 30000)
	for i := range raw {
		raw[i] = byte(r.UintN(256))
	}
	png := base64.StdEncoding.EncodeToString(raw)
	long := strings.Repeat("0123456789abcdef", 400)
	id := `"a"`
	extra := ""
	if invalid {
		id = `"` + strings.Repeat("x", 5000) + `"`
		extra = `, "bogus": "` + long + `"`
	}
	return fmt.Sprintf(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "P", "language": "python"}},
 "cells": [
  {"cell_type": "code", "id": %s, "metadata": {"trusted": true}, "execution_count": 1, "source": "plot()", "outputs": [
    {"output_type": "display_data", "metadata": {}, "data": {"image/png": "%s", "text/plain": "%s"}},
    {"output_type": "stream", "name": "stdout", "text": "%s\n%s"},
    {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": "%s\u00e9", "text/html": "%s\"q\""}}
  ]%s},
  {"cell_type": "markdown", "id": "b", "metadata": {}, "source": "![x](attachment:x.png)", "attachments": {"x.png": {"image/png": "%s"}}}
 ]}`, id, png, long, long, long, long, long, extra, png)
}

// Write of a notebook with large strings writes, byte for byte, what Jupyter Server's save
// writes, and validates it the same way, though its large strings were never decoded.
func TestWrite_LargeStringsAreWrittenAsJupyterWritesThem(t *testing.T) {
	var jobs []nbformatJob
	for _, invalid := range []bool{false, true} {
		jobs = append(jobs, nbformatJob{Op: "save", Text: largeStringsNotebook(invalid)})
	}
	answers := runNbformat(t, jobs)
	for i, job := range jobs {
		small, e := elideLargeStrings([]byte(job.Text))
		if e == nil || len(e.spans) < 3 || len(small) > len(job.Text)/3 {
			t.Fatalf("notebook %d: %d strings elided, %d of %d bytes left: the test does not test elision", i, len(e.spans), len(small), len(job.Text))
		}
		data, msg, err := encodeNotebook([]byte(job.Text))
		if err != nil {
			t.Fatal(err)
		}
		if answers[i].Error != "" {
			t.Fatalf("Jupyter: %s", answers[i].Error)
		}
		if string(data) != answers[i].Text {
			t.Errorf("notebook %d: written\n%.3000s\nJupyter wrote\n%.3000s", i, data, answers[i].Text)
		}
		if (msg != "") != answers[i].Invalid {
			t.Errorf("notebook %d: validation message %q; Jupyter found it invalid: %v", i, msg, answers[i].Invalid)
		}
		// The message quotes the client's strings, as a save decoding everything would.
		nb, err := decodeNotebook([]byte(job.Text))
		if err != nil {
			t.Fatal(err)
		}
		wantData, wantMsg, err := writeNotebook(nb)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, wantData) {
			t.Errorf("notebook %d: the elided encoding differs from the whole one", i)
		}
		if i == 1 && (msg != wantMsg || strings.Contains(msg, "\x00")) {
			t.Errorf("validation message with elision\n%.600s\nwithout\n%.600s", msg, wantMsg)
		}
	}
}

// Elision keeps JSON valid exactly when it was, and never takes a string that is not plain.
func TestElideLargeStrings_KeepsValidityAndPlainStringsOnly(t *testing.T) {
	long := strings.Repeat("A", elideFrom)
	for _, tc := range []struct {
		body   string
		elided int
	}{
		{`{"a": "` + long + `"}`, 1},
		{`{"` + long + `": 1}`, 0},                       // a key
		{`{"id": "` + long + `"}`, 0},                    // an id
		{`{"a": "` + long + `\n"}`, 0},                   // an escape
		{`{"a": "` + long + "é" + `"}`, 0},               // not ASCII
		{`{"a": "` + long[1:] + `"}`, 0},                 // short
		{`{"a": "` + long + `"`, 1},                      // unclosed object: still invalid
		{`{"a": "` + long, 0},                            // unclosed string
		{`{"a": "\\", "b": "` + long + `"}`, 1},          // an escaped backslash before
		{`{"a": "\"", "b": "` + long + `"}`, 1},          // an escaped quote before
		{`["` + long + `", "` + long + `"] trailing`, 2}, // trailing data: still refused
	} {
		small, e := elideLargeStrings([]byte(tc.body))
		n := 0
		if e != nil {
			n = len(e.spans)
		}
		if n != tc.elided {
			t.Errorf("%.40q...: %d elided, want %d", tc.body, n, tc.elided)
		}
		_, errWhole := decodeJSON([]byte(tc.body))
		v, errSmall := decodeJSON(small)
		if (errWhole == nil) != (errSmall == nil) {
			t.Errorf("%.40q...: decoding whole: %v, elided: %v", tc.body, errWhole, errSmall)
		}
		if errSmall == nil && e != nil {
			var b []byte
			b = appendValue(b, v, 0, e)
			want := appendValue(nil, mustDecode(t, tc.body), 0, nil)
			if !bytes.Equal(b, want) {
				t.Errorf("%.40q...: encoded %.80q, want %.80q", tc.body, b, want)
			}
		}
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPlainASCII(t *testing.T) {
	base := strings.Repeat("abcdefgh", 3)
	if !plainASCII([]byte(base)) {
		t.Fatal("letters are plain")
	}
	for _, c := range []byte{'\\', 0x7f, 0x1f, 0x00, '\n', 0x80, 0xff} {
		for pos := range len(base) {
			b := []byte(base)
			b[pos] = c
			if plainASCII(b) {
				t.Fatalf("%q at %d taken as plain", c, pos)
			}
		}
	}
	for c := byte(0x20); c < 0x7f; c++ {
		if c != '\\' && !plainASCII(bytes.Repeat([]byte{c}, 17)) {
			t.Fatalf("%q not taken as plain", c)
		}
	}
}
