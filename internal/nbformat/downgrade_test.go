package nbformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// downgradeCases are nbformat 4 notebooks holding what the v4 → v3 downgrade changes.
var downgradeCases = []string{
	`{"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}, "language_info": {"name": "python"}},
	  "cells": [
	   {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "# Title"},
	   {"cell_type": "markdown", "id": "m2", "metadata": {"tags": ["t"]}, "source": "###   spaced\u00a0out"},
	   {"cell_type": "markdown", "id": "m3", "metadata": {}, "source": "#no space"},
	   {"cell_type": "markdown", "id": "m4", "metadata": {}, "source": ["## two\n", "lines"]},
	   {"cell_type": "markdown", "id": "m5", "metadata": {}, "source": "#"},
	   {"cell_type": "markdown", "id": "m6", "metadata": {}, "source": "plain \u00e9 # not a heading", "attachments": {"a.png": {"image/png": "iVBO"}}},
	   {"cell_type": "markdown", "id": "m7", "metadata": {}, "source": "#\r\u2028"},
	   {"cell_type": "raw", "id": "r1", "metadata": {"format": "text/html"}, "source": ["<b>", "raw</b>"]},
	   {"cell_type": "code", "id": "c1", "execution_count": 3, "metadata": {"collapsed": true, "scrolled": false, "trusted": true}, "source": "x = 1\nx",
	    "outputs": [
	     {"output_type": "execute_result", "execution_count": 3, "metadata": {"image/png": {"width": 1}, "text/plain": {}},
	      "data": {"text/plain": ["1"], "text/html": "<b>1</b>", "image/png": "iVBO\n", "image/jpeg": "/9j/", "image/svg+xml": ["<svg>\n", "</svg>"],
	               "text/latex": "$1$", "application/javascript": "f()", "text/markdown": "**dropped**", "application/pdf": "JVBE",
	               "application/json": {"z": [1, 2.5, null, true], "a": {"\u00e9": "\ud83d\ude00"}, "m": "<&>"}}},
	     {"output_type": "display_data", "metadata": {}, "data": {"application/json": [1, "two"]}},
	     {"output_type": "stream", "name": "stderr", "text": ["warn\n", "ing\n"]},
	     {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"]}
	    ]},
	   {"cell_type": "code", "id": "c2", "execution_count": null, "metadata": {}, "source": "", "outputs": []}
	  ]}`,
	`{"nbformat": 4, "nbformat_minor": 4, "metadata": {"name": "kept", "orig_nbformat": 3}, "cells": []}`,
}

func TestDowngradeV3_AgreesWithNbformatDowngrade(t *testing.T) {
	names, files := oldFormatCorpus(t)
	inputs := map[string]string{}
	for _, name := range names {
		inputs[name] = string(files[name])
	}
	for i, c := range downgradeCases {
		inputs[fmt.Sprintf("v4-%d.ipynb", i)] = c
	}
	var order []string
	var jobs []nbformatJob
	for name, text := range inputs {
		order = append(order, name)
		jobs = append(jobs, nbformatJob{Op: "downgrade", Text: text, Name: strings.TrimSuffix(name, ".ipynb")})
	}
	answers := runNbformat(t, jobs)
	for i, name := range order {
		v3, err := DowngradeV3(readV4(t, []byte(inputs[name])), strings.TrimSuffix(name, ".ipynb"))
		if answers[i].Error != "" {
			if err == nil {
				t.Errorf("%s: nbformat cannot downgrade it (%s), DowngradeV3 does", name, answers[i].Error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got, want := comparableV3(t, v3), comparableV3(t, answers[i].NB)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: downgrade differs from nbformat's (-nbformat +DowngradeV3):\n%s", name, d)
		}
	}
}

// readV4 is the content Jupyter's get serves of the notebook file data: Read's, or
// Upgrade's for a notebook older than nbformat 4.
func readV4(t *testing.T, data []byte) json.RawMessage {
	t.Helper()
	content, _, _, err := Read(data)
	if errors.Is(err, ErrOlderFormat) {
		content, _, err = Upgrade(data)
	}
	if err != nil {
		t.Fatal(err)
	}
	return content
}

// comparableV3 decodes a v3 notebook for comparison: numbers by value, and the JSON text of
// json outputs decoded (nbformat writes object keys in the order it read them).
func comparableV3(t *testing.T, text json.RawMessage) map[string]any {
	t.Helper()
	nb := plainJSON(t, text)
	forEachV3Cell(nb, func(cell map[string]any) {
		outputs, _ := cell["outputs"].([]any)
		for _, o := range outputs {
			out, _ := o.(map[string]any)
			if s, ok := out["json"].(string); ok {
				var v any
				if err := json.Unmarshal([]byte(s), &v); err != nil {
					t.Errorf("json output %q: %v", s, err)
				}
				out["json"] = v
			}
		}
	})
	return nb
}

func TestPythonJSONText_IsJSONDumpsDefault(t *testing.T) {
	got := pythonJSONText([]byte(`{"a":[1,"x, y: z",{"b":"\"é"}],"c":"\u2028"}`))
	if want := `{"a": [1, "x, y: z", {"b": "\"\u00e9"}], "c": "\u2028"}`; got != want {
		t.Errorf("pythonJSONText = %s, want %s", got, want)
	}
}
