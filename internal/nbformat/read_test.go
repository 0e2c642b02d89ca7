package nbformat

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead_AgreesWithReference(t *testing.T) {
	for i, in := range notebookSeeds() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkRead(t, []byte(in)) })
	}
}

// referenceRead is nbformat's reader and Jupyter's mark_trusted_cells on decoded JSON, the
// slow way Read avoids; the fuzz target checks Read's text edit against it.
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

// checkRead checks Read's output on in against referenceRead. Ids Read
// made up are checked to be fresh and unique, then compared as equal.
func checkRead(t *testing.T, in []byte) {
	out, minor, _, err := Read(in)
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
		if _, minor, _, err := Read(data); err == nil {
			if _, err := Validate(data, minor); err != nil {
				t.Fatalf("validating a readable notebook failed: %v", err)
			}
		}
		_, _, _ = encodeNotebook(data)
	})
}
