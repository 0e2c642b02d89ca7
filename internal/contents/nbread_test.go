package contents

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nbkube/nbkube/internal/domainerr"
)

func TestGet_NotebookIsPresentedLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	stored := `{
 "cells": [
  {"cell_type": "markdown", "id": "m", "metadata": {"trusted": true}, "source": ["# T\n", "x"],
   "attachments": {"a.png": {"image/png": "iVBO", "text/plain": ["a\n", "b"]}}},
  {"cell_type": "code", "execution_count": 1, "id": "c", "metadata": {"trusted": true, "tags": []}, "source": [],
   "outputs": [
    {"name": "stdout", "output_type": "stream", "text": ["1\n", "2\n"]},
    {"data": {"application/json": ["keep", "list"], "text/html": ["<b>", "</b>"], "application/vnd+json": ["k"]},
     "execution_count": 1, "metadata": {}, "output_type": "execute_result"},
    {"ename": "E", "evalue": "v", "output_type": "error", "traceback": ["t1", "t2"]}
   ]}
 ],
 "metadata": {"orig_nbformat": 3, "signature": "sha256:x", "kernelspec": {"name": "python3", "display_name": "Python 3"}},
 "nbformat": 4,
 "nbformat_minor": 5
}`
	writeTree(t, dir, map[string]string{"n.ipynb": stored})
	m, err := s.Get(ctx, "n.ipynb", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(m.Content.(json.RawMessage), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"cells": []any{
			map[string]any{"cell_type": "markdown", "id": "m", "metadata": map[string]any{}, "source": "# T\nx",
				"attachments": map[string]any{"a.png": map[string]any{"image/png": "iVBO", "text/plain": "a\nb"}}},
			map[string]any{"cell_type": "code", "execution_count": 1.0, "id": "c", "metadata": map[string]any{"trusted": false, "tags": []any{}}, "source": "",
				"outputs": []any{
					map[string]any{"name": "stdout", "output_type": "stream", "text": "1\n2\n"},
					map[string]any{"data": map[string]any{"application/json": []any{"keep", "list"}, "text/html": "<b></b>", "application/vnd+json": []any{"k"}},
						"execution_count": 1.0, "metadata": map[string]any{}, "output_type": "execute_result"},
					map[string]any{"ename": "E", "evalue": "v", "output_type": "error", "traceback": []any{"t1", "t2"}},
				}},
		},
		"metadata":       map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3"}},
		"nbformat":       4.0,
		"nbformat_minor": 5.0,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("content (-want +got):\n%s", d)
	}
	if m.Message != nil {
		t.Errorf("valid notebook has message %q", *m.Message)
	}
}

func TestGet_NotebookCellIDsAreRepairedFrom45On(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	cells := `[{"cell_type": "raw", "metadata": {}, "source": ""}, {"cell_type": "raw", "id": "x", "metadata": {}, "source": ""}, {"cell_type": "raw", "id": "x", "metadata": {}, "source": ""}]`
	writeTree(t, dir, map[string]string{
		"new.ipynb": `{"cells": ` + cells + `, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}`,
		"old.ipynb": `{"cells": [{"cell_type": "raw", "metadata": {}, "source": ""}], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}`,
	})
	m, err := s.Get(ctx, "new.ipynb", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	var nb struct{ Cells []struct{ ID *string } }
	if err := json.Unmarshal(m.Content.(json.RawMessage), &nb); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range nb.Cells {
		if c.ID == nil || seen[*c.ID] {
			t.Fatalf("cells ids not repaired: %s", m.Content)
		}
		seen[*c.ID] = true
	}
	if *nb.Cells[1].ID != "x" || m.Message != nil {
		t.Errorf("first id changed or message %v: %s", m.Message, m.Content)
	}
	m, err = s.Get(ctx, "old.ipynb", GetOptions{Content: true})
	if err != nil || strings.Contains(string(m.Content.(json.RawMessage)), `"id"`) || m.Message != nil {
		t.Errorf("4.4 notebook: %v %s %v", err, m.Content, m.Message)
	}
}

func TestGet_UnreadableNotebookIsInvalid(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	for name, content := range map[string]string{
		"a.ipynb": "{", "b.ipynb": "[]", "c.ipynb": `{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}`, "d.ipynb": "\xff",
		"e.ipynb": `{"nbformat": 4} x`,
	} {
		writeTree(t, dir, map[string]string{name: content})
		_, err := s.Get(ctx, name, GetOptions{Content: true})
		wantError(t, err, domainerr.ErrInvalid, "")
		if !strings.HasPrefix(err.Error(), "Unreadable Notebook: "+name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestTransformNotebook_AgreesWithReference(t *testing.T) {
	for i, in := range notebookSeeds() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkRead(t, []byte(in)) })
	}
}

// referenceRead is nbformat's reader and Jupyter's mark_trusted_cells on decoded JSON, the
// slow way the store avoids; the fuzz target checks the store's text edit against it.
func referenceRead(nb map[string]any) {
	stripTransient(nb)
	cells, _ := nb["cells"].([]any)
	for _, c := range cells {
		cell, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if src, ok := cell["source"].([]any); ok {
			cell["source"] = joinAll(src, cell["source"])
		}
		if atts, ok := cell["attachments"].(map[string]any); ok {
			for _, a := range atts {
				joinBundle(a)
			}
		}
		if cell["cell_type"] != "code" {
			continue
		}
		if md, ok := cell["metadata"].(map[string]any); ok {
			md["trusted"] = false
		}
		outputs, _ := cell["outputs"].([]any)
		for _, o := range outputs {
			out, ok := o.(map[string]any)
			if !ok {
				continue
			}
			switch t, _ := out["output_type"].(string); t {
			case "execute_result", "display_data":
				joinBundle(out["data"])
			case "":
			default:
				if text, ok := out["text"].([]any); ok {
					out["text"] = joinAll(text, out["text"])
				}
			}
		}
	}
}

func joinAll(lines []any, orig any) any {
	var b strings.Builder
	for _, l := range lines {
		s, ok := l.(string)
		if !ok {
			return orig
		}
		b.WriteString(s)
	}
	return b.String()
}

func joinBundle(v any) {
	bundle, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, x := range bundle {
		if l, ok := x.([]any); ok && !isJSONMime(k) {
			bundle[k] = joinAll(l, x)
		}
	}
}

var (
	cellIDPattern   = regexp.MustCompile(`^[0-9a-f]{8}$`)
	surrogateEscape = regexp.MustCompile(`\\u[dD][89abcdefABCDEF]`)
)

// checkRead checks transformNotebook's output on in against referenceRead. Ids the store
// made up are checked to be fresh and unique, then compared as equal.
func checkRead(t *testing.T, in []byte) {
	out, minor, err := transformNotebook(in)
	if err != nil {
		return
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON out of %q: %q", in, out)
	}
	want, err := decodeJSON(in)
	if err != nil {
		t.Fatalf("transform accepted what encoding/json refuses (%v): %q", err, in)
	}
	// Joining "\ud83d" and "\ude00" makes a surrogate pair, as it does in Python (and so for
	// Jupyter's clients); encoding/json, decoding each half alone, makes two U+FFFD instead.
	if surrogateEscape.Match(in) {
		return
	}
	got, err := decodeJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	wantNB, gotNB := want.(map[string]any), got.(map[string]any)
	referenceRead(wantNB)
	if minor >= 5 {
		wantCells, _ := wantNB["cells"].([]any)
		gotCells, _ := gotNB["cells"].([]any)
		seen := map[any]bool{}
		for i, c := range wantCells {
			wc, ok := c.(map[string]any)
			if !ok {
				continue
			}
			gc := gotCells[i].(map[string]any)
			id, present := wc["id"]
			if s, isString := id.(string); !present || (isString && seen[s]) {
				if s, _ := gc["id"].(string); !cellIDPattern.MatchString(s) || seen[s] {
					t.Fatalf("cell %d: new id %v not fresh", i, gc["id"])
				}
				wc["id"] = gc["id"]
			}
			if s, ok := wc["id"].(string); ok {
				seen[s] = true
			}
		}
	}
	if d := cmp.Diff(wantNB, gotNB); d != "" {
		t.Fatalf("read of %q differs from nbformat's (-want +got):\n%s", in, d)
	}
}

func notebookSeeds() []string {
	return []string{
		emptyNotebook,
		`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "source": ["a\"\\", "\u00e9\n"], "outputs": [{"output_type": "stream", "text": ["x", "y"]}]}]}`,
		`{"nbformat": 4, "nbformat_minor": 5, "metadata": {"signature": 1}, "cells": [{"cell_type": "code", "id": "a", "metadata": {"trusted": true}, "source": [1, "a"]}, {"cell_type": "raw", "id": "a", "metadata": 1, "source": "s"}, 3, []]}`,
		`{"nbformat": 4, "nbformat_minor": 2, "cells": {"x": 1}, "metadata": []}`,
		`{"nbformat":4,"nbformat_minor":5,"cells":[{"cell_type":"code","metadata":{},"outputs":[{"output_type":"display_data","data":{"text/plain":["a","\ud83d","\ude00"],"application/x+json":["j"]}},{"output_type":"","text":["t"]},7],"source":""}],"metadata":{}}`,
		` {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "nbformat": 4} `,
		`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "source": "", "outputs": [], "\u0069d": "esc"}]}`,
	}
}

// FuzzNotebookDecode checks that reading a notebook never panics, accepts only valid JSON,
// agrees with nbformat's reader done the slow way, and that validating and re-encoding
// what it reads terminates with a result or an error.
func FuzzNotebookDecode(f *testing.F) {
	for _, seed := range notebookSeeds() {
		f.Add([]byte(seed))
	}
	f.Add([]byte(strings.Repeat("[", 2000)))
	f.Add([]byte(`{"nbformat": 4, "nbformat_minor": 7, "metadata": {}, "cells": [{"cell_type": "future", "metadata": {}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		checkRead(t, data)
		if _, minor, err := transformNotebook(data); err == nil {
			if _, err := validateStored(data, minor); err != nil {
				t.Fatalf("validating a readable notebook failed: %v", err)
			}
		}
		_, _, _ = encodeNotebook(data)
	})
}
