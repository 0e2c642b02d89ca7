package contents

import (
	"encoding/json"
	"os"
	"path/filepath"
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

func TestGet_OlderNotebooksAreUpgradedToV4(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	for _, tc := range []struct {
		name       string
		orig       float64
		codeCells  int
		wantsValid bool
	}{
		{name: "v1-cells.ipynb", orig: 2, codeCells: 9, wantsValid: false},
		{name: "v2-basic.ipynb", orig: 2, codeCells: 3, wantsValid: false},
		{name: "v3-cells.ipynb", orig: 3, codeCells: 4, wantsValid: true},
		{name: "v3-outputs.ipynb", orig: 3, codeCells: 1, wantsValid: false},
		{name: "v3-invalid-as-v4.ipynb", orig: 3, codeCells: 1, wantsValid: false},
	} {
		data, err := os.ReadFile(filepath.Join("..", "nbformat", "testdata", "oldformats", tc.name))
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, dir, map[string]string{tc.name: string(data)})
		m, err := s.Get(ctx, tc.name, GetOptions{Content: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var nb map[string]any
		if err := json.Unmarshal(m.Content.(json.RawMessage), &nb); err != nil {
			t.Fatal(err)
		}
		md, _ := nb["metadata"].(map[string]any)
		if nb["nbformat"] != 4.0 || nb["nbformat_minor"] != 5.0 || md["orig_nbformat"] != tc.orig {
			t.Errorf("%s: nbformat %v.%v, orig_nbformat %v, want 4.5 from %v", tc.name, nb["nbformat"], nb["nbformat_minor"], md["orig_nbformat"], tc.orig)
		}
		code := 0
		for i, c := range nb["cells"].([]any) {
			cell := c.(map[string]any)
			if cell["cell_type"] == "code" {
				code++
				if cell["metadata"].(map[string]any)["trusted"] != false {
					t.Errorf("%s: code cell %d is not marked untrusted: %v", tc.name, i, cell["metadata"])
				}
			}
		}
		if code != tc.codeCells {
			t.Errorf("%s: %d code cells, want %d", tc.name, code, tc.codeCells)
		}
		if (m.Message == nil) != tc.wantsValid || *m.Format != "json" || m.Type != "notebook" {
			t.Errorf("%s: message %v, format %v, type %v", tc.name, m.Message, *m.Format, m.Type)
		}
	}
	// Each read converts again, with new ids, as Jupyter's does.
	a, _ := s.Get(ctx, "v3-cells.ipynb", GetOptions{Content: true})
	b, _ := s.Get(ctx, "v3-cells.ipynb", GetOptions{Content: true})
	if string(a.Content.(json.RawMessage)) == string(b.Content.(json.RawMessage)) {
		t.Error("two reads gave the same cell ids")
	}
}

func TestGet_OlderNotebookNbformatCannotReadIsUnreadable(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{
		"nominor.ipynb": `{"nbformat": 3, "metadata": {}, "worksheets": []}`,
		"v1.ipynb":      `{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": "x"}]}`,
		"deep.ipynb":    `{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "json": "` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `"}]}]}]}`,
		"huge.ipynb":    `{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "level": 100000000, "source": "x"}]}]}`,
	})
	for name, msg := range map[string]string{
		"nominor.ipynb": "Unreadable Notebook: nominor.ipynb The notebook does not include the nbformat minor which is needed",
		"v1.ipynb":      `Unreadable Notebook: v1.ipynb invalid literal for int() with base 10: "x"`,
		"deep.ipynb":    "Unreadable Notebook: deep.ipynb application/json output: JSON nested too deep",
		"huge.ipynb":    "Unreadable Notebook: huge.ipynb heading level 100000000 is too large",
	} {
		_, err := s.Get(ctx, name, GetOptions{Content: true})
		wantError(t, err, domainerr.ErrInvalid, msg)
	}
}
