package jupyter

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nbkube/nbkube/internal/jsonspan"
)

// AppendJSON must say exactly what encoding/json says of the same model.
func TestAppendJSON_MatchesEncodingJSON(t *testing.T) {
	str := func(s string) *string { return &s }
	size := int64(42)
	now := Time{time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)}
	models := []ContentsModel{
		{Name: "a.ipynb", Path: "d/a.ipynb", Type: TypeNotebook, Writable: true, Created: now, LastModified: now,
			Content: json.RawMessage(`{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}`), Format: str(FormatJSON), Size: &size,
			Hash: str("abc"), HashAlgorithm: str("sha256"), Message: str("Notebook validation failed: \"x\"\n\t<tag> & \u2028")},
		{Name: "weird \"name\"\\\x01\x1f\u00e9\xff.txt", Path: "p", Type: TypeFile, Content: "line\r\nnext\u0000", Format: str(FormatText), Mimetype: str("text/plain")},
		{Name: "dir", Type: TypeDirectory, Content: []ContentsModel{{Name: "x", Type: TypeFile}, {Name: "y", Type: TypeDirectory}}, Format: str(FormatJSON)},
		{Name: "empty"},
	}
	for _, m := range models {
		got, err := m.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("AppendJSON wrote invalid JSON %s: %v", got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("%s: (-encoding/json +AppendJSON):\n%s", m.Name, d)
		}
	}
}

// streamed is a StreamedContent that completes the model's hash as it writes, as a streamed
// file's content does.
type streamed struct {
	text string
	hash string
}

func (c *streamed) WriteJSON(w io.Writer) error {
	_, err := w.Write(jsonspan.AppendString(nil, c.text))
	c.hash = "sum of " + c.text
	return err
}

// A streamed content is written in its place, and the fields after it see what it completed.
func TestWriteJSON_StreamsContentInPlace(t *testing.T) {
	format, alg, size := FormatText, "sha256", int64(5)
	c := &streamed{text: "a\n\"b\""}
	m := ContentsModel{Name: "f.txt", Path: "f.txt", Type: TypeFile, Format: &format, Size: &size, HashAlgorithm: &alg,
		Hash: &c.hash, Content: c}
	var buf bytes.Buffer
	if err := m.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	sum := "sum of " + c.text
	m.Content, m.Hash = c.text, &sum
	want, err := m.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Errorf("streamed:\n%s\nwant\n%s", buf.Bytes(), want)
	}
}
