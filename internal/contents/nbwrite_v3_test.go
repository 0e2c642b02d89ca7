package contents

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// v3SaveBodies are v3 notebooks as clients send them: lines joined, transient fields set.
var v3SaveBodies = []string{
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": "x"}, "worksheets": [{"cells": [], "metadata": {}}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "orig_nbformat": 2, "orig_nbformat_minor": 0, "metadata": {"name": "transient", "signature": "sha256:1"}, "worksheets": [{"cells": [
		{"cell_type": "code", "input": "print('\u00e9\ud83d\ude00')\nx\r\ny\u2028z", "language": "python", "collapsed": false, "prompt_number": 1, "metadata": {"trusted": true},
		 "outputs": [{"output_type": "pyout", "prompt_number": 1, "text": "a\nb", "html": "<b>\n</b>", "png": "iVBO\nRR", "metadata": {"png": {"width": 1}}},
		             {"output_type": "stream", "stream": "stdout", "text": "tab\there\u007f\u0001\n"}]},
		{"cell_type": "markdown", "source": "a\n\nb\n", "rendered": "x\ny", "metadata": {"trusted": false}},
		{"cell_type": "heading", "level": 2, "source": "T\u00eftle", "metadata": {}},
		{"cell_type": "raw", "source": "", "metadata": {"format": "text/plain"}}], "metadata": {}}]}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [
		{"cell_type": "code", "input": ["already\n", "split"], "language": "python", "outputs": [], "metadata": {}, "trusted": true}]}]}`,
	`{"nbformat": 3, "nbformat_minor": -1, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 3, "metadata": {}, "worksheets": ""}`,
	`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "metadata": {"trusted": true}, "outputs": [{"no": "type"}]}]}]}`,
}

func TestSave_V3NotebookIsStoredAsJupyterStoresIt(t *testing.T) {
	names, files := oldFormatCorpus(t)
	bodies := append([]string{}, v3SaveBodies...)
	for _, name := range names {
		if strings.HasPrefix(name, "v3-") {
			bodies = append(bodies, string(files[name]))
		}
	}
	var jobs []nbformatJob
	for _, b := range bodies {
		jobs = append(jobs, nbformatJob{Op: "save", Text: b})
	}
	answers := runNbformat(t, jobs)
	s, dir := newTestStore(t, Options{})
	for i, body := range bodies {
		m, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON, Content: json.RawMessage(body)})
		if answers[i].Error != "" {
			if i < len(v3SaveBodies) {
				t.Errorf("Jupyter refuses to save %s: %s", body, answers[i].Error)
			}
			wantError(t, err, domainerr.ErrInvalid, "")
			continue
		}
		if err != nil {
			t.Errorf("save of %s: %v", body, err)
			continue
		}
		if got := readFile(t, dir, "n.ipynb"); got != answers[i].Text {
			t.Errorf("save of %s wrote\n%s\nJupyter writes\n%s", body, got, answers[i].Text)
		}
		if (m.Message != nil) != answers[i].Invalid {
			t.Errorf("save of %s: message %v, Jupyter finds it invalid: %v", body, m.Message, answers[i].Invalid)
		}
	}
	// What was saved reads back upgraded.
	if _, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON, Content: json.RawMessage(v3SaveBodies[1])}); err != nil {
		t.Fatal(err)
	}
	m, err := s.Get(ctx, "n.ipynb", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	nb := plainJSON(t, m.Content)
	if md := nb["metadata"].(map[string]any); nb["nbformat"] != 4.0 || md["orig_nbformat"] != 3.0 || len(nb["cells"].([]any)) != 4 {
		t.Errorf("saved v3 notebook reads back as %v", nb)
	}
}

func TestSave_V3NotebookJupyterFailsToSaveIsRefused(t *testing.T) {
	bodies := []string{
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [7]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": "ab"}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{}]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"source": "no type"}]}]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "markdown", "metadata": [], "source": ""}]}]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "outputs": []}]}]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "metadata": {}}]}]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [1]}]}]}`,
		`{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [{"text": "x"}]}]}]}`,
		`{"nbformat": 3, "nbformat_minor": 1, "metadata": {}, "worksheets": []}`,
		`{"nbformat": 3, "nbformat_minor": "0", "metadata": {}, "worksheets": []}`,
	}
	var jobs []nbformatJob
	for _, b := range bodies {
		jobs = append(jobs, nbformatJob{Op: "save", Text: b})
	}
	answers := runNbformat(t, jobs)
	s, dir := newTestStore(t, Options{})
	for i, body := range bodies {
		if answers[i].Error == "" {
			t.Errorf("Jupyter saves %s", body)
		}
		_, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON, Content: json.RawMessage(body)})
		wantError(t, err, domainerr.ErrInvalid, "")
		if exists(dir, "n.ipynb") {
			t.Fatalf("refused save of %s wrote the file", body)
		}
	}
}

func TestSave_NotebooksOlderThanV3AreRefused(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	for _, body := range []string{
		`{"nbformat": 2, "metadata": {}, "worksheets": []}`,
		`{"nbformat": 1, "cells": []}`,
	} {
		_, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON, Content: json.RawMessage(body)})
		wantError(t, err, domainerr.ErrInvalid, "")
	}
}

func TestASCIIEscape_IsPythonEnsureASCII(t *testing.T) {
	in := "\"a\u007f\u00e9\u2028\U0001F600\""
	if got, want := string(asciiEscape([]byte(in))), `"a\u007f\u00e9\u2028\ud83d\ude00"`; got != want {
		t.Errorf("asciiEscape(%q) = %s, want %s", in, got, want)
	}
}
