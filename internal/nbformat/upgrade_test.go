package nbformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// oldFormatCorpus is the hand-written notebooks of nbformat 1 to 3 in testdata/oldformats,
// by file name, names in order: between them they hold every rule of nbformat's upgrades.
func oldFormatCorpus(t testing.TB) ([]string, map[string][]byte) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "oldformats", "*.ipynb"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	files := map[string][]byte{}
	var names []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(p))
		files[filepath.Base(p)] = data
	}
	return names, files
}

// upgradeEdgeCases are notebooks at the edges of what nbformat's upgrades accept: each is
// refused by both nbformat and this package, or read by both alike.
var upgradeEdgeCases = []string{
	// Versions and the top of the notebook.
	`{}`,
	`{"nbformat": 0}`,
	`{"nbformat": 5, "nbformat_minor": 0}`,
	`{"nbformat": "3"}`,
	`{"nbformat": 3.0, "nbformat_minor": 0, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}`,
	`{"nbformat": 3, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": "0", "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": 1, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": -1, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": false, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": [], "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "orig_nbformat": 0, "orig_nbformat_minor": "", "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "orig_nbformat": [1], "orig_nbformat_minor": {"a": 1}, "worksheets": []}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "cells": [1], "worksheets": []}`,
	// Worksheets and cells of the wrong shape.
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": {}}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": ""}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": "ab"}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": 7}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": {}}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [5]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": [5]}, {"cell_type": 5}, {"cell_type": "weird"}]}]}`,
	// Code cells and their outputs.
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "input": "a"}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": ""}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [], "metadata": []}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [], "metadata": [], "collapsed": true}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [], "input": [1]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [], "input": ["a", 1]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [7]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": ["pyout"]}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": 5, "x": 1}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "pyout", "data": {"x": 1}, "metadata": ["html"]}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "pyout", "metadata": ["other"]}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "pyout", "metadata": "plaintext"}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "pyout", "metadata": "other"}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "pyout", "metadata": null}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "json": "{not json"}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "application/json": ["[1]"]}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "json": " [1, {\"a\": null}] "}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "json": "[1] [2]"}]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [{"output_type": "pyout", "data": {"text/plain": "moved into data"}, "text": "wins"}]}]}]}`,
	// Headings.
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": "x", "level": 2.0}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": "x\ny\u2028z\u001ew", "level": true}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": "x", "level": -3}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": "x", "level": "2"}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading"}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": null}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": ["a\r", "b\r\n", "", "c"]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": [1]}]}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "heading", "source": ["a\n", 1]}]}]}`,
	// nbformat 2.
	`{"nbformat": 2, "worksheets": []}`,
	`{"nbformat": 2, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "input": "a", "outputs": [{"output_type": "pyout", "png": "\u00e9"}]}]}]}`,
	`{"nbformat": 2, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "input": "a", "outputs": [{"output_type": "pyout", "jpeg": 5}]}]}]}`,
	`{"nbformat": 2, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "input": "a", "outputs": [{"output_type": "pyout", "png": ["a", "b"]}]}]}]}`,
	`{"nbformat": 2, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "input": ["a\n", "b"], "outputs": []}]}]}`,
	`{"nbformat": 2, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "markdown", "source": ["a", 2]}]}]}`,
	`{"nbformat": 2, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "input": "", "outputs": {"a": 1}}]}]}`,
	// nbformat 1.
	`{"nbformat": 1}`,
	`{"nbformat": 1, "cells": ""}`,
	`{"nbformat": 1, "cells": {}}`,
	`{"nbformat": 1, "cells": {"a": 1}}`,
	`{"nbformat": 1, "cells": [7]}`,
	`{"nbformat": 1, "cells": [{"code": "no type"}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "raw"}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": "x"}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": "1__0"}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": "+0_7"}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": -2.9}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": 1e300}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": []}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": 0.0001}, {"cell_type": "code", "code": 1e-5}, {"cell_type": "code", "code": 123456789012345678}, {"cell_type": "code", "code": -0.0}, {"cell_type": "code", "code": 1.5e300}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "text", "text": 100.0}, {"cell_type": "text", "text": true}, {"cell_type": "text", "text": -0}]}`,
}

// upgradeDivergences are notebooks nbformat reads and this package refuses, on purpose (see
// upgrade.go).
var upgradeDivergences = []string{
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a"}, {"cell_type": "raw"}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": ["a", "b"]}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "text", "text": {"a": 1}}]}`,
	`{"nbformat": 1, "cells": [{"cell_type": "code", "code": "a", "prompt_number": "\u0664"}]}`,
}

func TestUpgrade_AgreesWithNbformatCellByCell(t *testing.T) {
	names, files := oldFormatCorpus(t)
	var jobs []nbformatJob
	for _, name := range names {
		jobs = append(jobs, nbformatJob{Op: "read", Text: string(files[name])})
	}
	for _, in := range upgradeEdgeCases {
		jobs = append(jobs, nbformatJob{Op: "read", Text: in})
	}
	answers := runNbformat(t, jobs)
	for i, name := range names {
		if answers[i].Error != "" {
			t.Errorf("%s: nbformat refuses a corpus notebook: %s", name, answers[i].Error)
		}
		checkUpgrade(t, name, files[name], answers[i])
	}
	for i, in := range upgradeEdgeCases {
		checkUpgrade(t, in, []byte(in), answers[len(names)+i])
	}
}

func TestUpgrade_RefusesWhatNbformatWouldRepeatOrStringify(t *testing.T) {
	var jobs []nbformatJob
	for _, in := range upgradeDivergences {
		jobs = append(jobs, nbformatJob{Op: "read", Text: in})
	}
	answers := runNbformat(t, jobs)
	for i, in := range upgradeDivergences {
		if answers[i].Error != "" {
			t.Errorf("%s: nbformat refuses it too now (%s): move it to upgradeEdgeCases", in, answers[i].Error)
		}
		if _, err := upgradeText([]byte(in)); err == nil {
			t.Errorf("%s: read, want refused", in)
		}
	}
}

// checkUpgrade compares Upgrade's reading of in with nbformat's answer: both refuse it,
// or both read it into the same notebook, cell by cell, with the same verdict of
// validation. Cell ids are random on both sides: they are checked for their shape only.
func checkUpgrade(t *testing.T, name string, in []byte, want nbformatAnswer) {
	t.Helper()
	if _, _, _, err := Read(in); !errors.Is(err, ErrOlderFormat) {
		if want.Error == "" {
			t.Errorf("%s: nbformat reads it as an older notebook, this package does not: %v", name, err)
		}
		return
	}
	nb, err := upgradeText(in)
	switch {
	case want.Error != "" && err == nil:
		t.Errorf("%s: nbformat refuses it (%s), this package reads it", name, want.Error)
		return
	case want.Error != "":
		return
	case err != nil:
		t.Errorf("%s: nbformat reads it, this package refuses it: %v", name, err)
		return
	}
	msg, err := validateNotebook(nb)
	if err != nil {
		t.Fatal(err)
	}
	if (msg != "") != want.Invalid {
		t.Errorf("%s: our validation %q, nbformat finds it invalid: %v", name, msg, want.Invalid)
	}
	got, wantNB := plainJSON(t, nb), plainJSON(t, want.NB)
	gotCells, wantCells := checkCellIDs(t, name, got), checkCellIDs(t, name, wantNB)
	if d := cmp.Diff(wantNB, got); d != "" {
		t.Errorf("%s: notebook apart from its cells differs from nbformat's (-nbformat +ours):\n%s", name, d)
	}
	if len(gotCells) != len(wantCells) {
		t.Errorf("%s: %d cells, nbformat makes %d", name, len(gotCells), len(wantCells))
		return
	}
	for i := range gotCells {
		if d := cmp.Diff(wantCells[i], gotCells[i]); d != "" {
			t.Errorf("%s: cell %d differs from nbformat's (-nbformat +ours):\n%s", name, i, d)
		}
	}
}

// plainJSON is v (decoded with json.Number, or JSON text) as encoding/json decodes JSON
// into an any, so that numbers compare by value.
func plainJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	data, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCellIDs takes the cells out of a notebook, checks that each has an id of nbformat's
// shape (eight hex digits) unique in the notebook, and removes the ids.
func checkCellIDs(t *testing.T, name string, nb map[string]any) []any {
	t.Helper()
	cells, _ := nb["cells"].([]any)
	delete(nb, "cells")
	seen := map[string]bool{}
	for i, c := range cells {
		cell, _ := c.(map[string]any)
		id, _ := cell["id"].(string)
		if !cellIDPattern.MatchString(id) || seen[id] {
			t.Errorf("%s: cell %d id %v is not a fresh cell id", name, i, cell["id"])
		}
		seen[id] = true
		delete(cell, "id")
	}
	return cells
}

// FuzzUpgrade feeds notebooks of nbformat 1 to 3 to the upgrade: it must never panic, its
// result must stay within a bound of the input's size, encode as JSON, downgrade again
// without panicking and get a verdict from the v4 validator; and a notebook valid under nbformat's v3 schema must come out valid
// under the v4 schema but for metadata, where v4 constrains members (collapsed, scrolled,
// name, kernelspec, ...) that v3 let through and nbformat carries over as they are.
func FuzzUpgrade(f *testing.F) {
	names, files := oldFormatCorpus(f)
	for _, name := range names {
		f.Add(files[name])
	}
	for _, in := range upgradeEdgeCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		if _, _, _, err := Read(data); !errors.Is(err, ErrOlderFormat) {
			return
		}
		v, err := decodeJSON(data)
		if err != nil {
			t.Fatalf("Read accepted what encoding/json refuses: %v", err)
		}
		in, _ := v.(map[string]any)
		validV3 := false
		if major, _ := version(in); major == 3 {
			msg, err := validateNotebookV3(deepCopyJSON(in).(map[string]any))
			validV3 = msg == "" && err == nil
		}
		nb, err := upgradeText(data)
		if err != nil {
			return
		}
		out, err := encodeCompact(nb)
		if err != nil || !json.Valid(out) {
			t.Fatalf("upgrade made unencodable JSON (%v): %q", err, out)
		}
		if bound := 16*len(data) + 1<<20 + 1024; len(out) > bound {
			t.Fatalf("upgrade of %d bytes made %d", len(data), len(out))
		}
		if v3, err := DowngradeV3(out, "n"); err == nil && !json.Valid(v3) {
			t.Fatalf("downgrade made invalid JSON: %q", v3)
		}
		msg, err := validateNotebook(deepCopyJSON(nb).(map[string]any))
		if err != nil {
			t.Fatalf("validation failed to run: %v", err)
		}
		if !validV3 || msg == "" {
			return
		}
		if msg, _ := validateNotebook(withoutMetadata(nb)); msg != "" {
			t.Fatalf("valid v3 notebook upgraded into an invalid v4 one: %s\n%s", msg, data)
		}
	})
}

// withoutMetadata is a copy of a v4 notebook with every metadata object emptied.
func withoutMetadata(nb map[string]any) map[string]any {
	c := deepCopyJSON(nb).(map[string]any)
	var empty func(v any)
	empty = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if _, ok := x.(map[string]any); ok && k == "metadata" {
					t[k] = map[string]any{}
					continue
				}
				empty(x)
			}
		case []any:
			for _, x := range t {
				empty(x)
			}
		}
	}
	empty(c)
	return c
}

func TestPyFloatRepr_IsPythonRepr(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 1e16: "1e+16", 1e15: "1000000000000000.0", 0.0001: "0.0001", 1e-5: "1e-05",
		2.5e-7: "2.5e-07", 123456789.125: "123456789.125", -1.5e300: "-1.5e+300", 0.1: "0.1",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("repr(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestPySplitLines_DropsEveryLineEnd(t *testing.T) {
	got := pySplitLines("a\r\nb\rc\n\nd\u2028e\x1cf\u0085")
	want := []string{"a", "b", "c", "", "d", "e", "f"}
	if !slices.Equal(got, want) {
		t.Errorf("pySplitLines = %q, want %q", got, want)
	}
	if got := fmt.Sprint(pySplitLines("")); got != "[]" {
		t.Errorf("pySplitLines(\"\") = %s", got)
	}
}
