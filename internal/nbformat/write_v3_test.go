package nbformat

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/internal/domainerr"
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

func TestWrite_V3NotebookIsWrittenAsJupyterWritesIt(t *testing.T) {
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
	for i, body := range bodies {
		data, msg, err := encodeNotebook([]byte(body))
		if answers[i].Error != "" {
			if i < len(v3SaveBodies) {
				t.Errorf("Jupyter refuses to save %s: %s", body, answers[i].Error)
			}
			wantRefused(t, body, err)
			continue
		}
		if err != nil {
			t.Errorf("write of %s: %v", body, err)
			continue
		}
		if string(data) != answers[i].Text {
			t.Errorf("write of %s wrote\n%s\nJupyter writes\n%s", body, data, answers[i].Text)
		}
		if (msg != "") != answers[i].Invalid {
			t.Errorf("write of %s: message %q, Jupyter finds it invalid: %v", body, msg, answers[i].Invalid)
		}
	}
	// What was written reads back upgraded.
	data, _, err := encodeNotebook([]byte(v3SaveBodies[1]))
	if err != nil {
		t.Fatal(err)
	}
	nb := plainJSON(t, readV4(t, data))
	if md := nb["metadata"].(map[string]any); nb["nbformat"] != 4.0 || md["orig_nbformat"] != 3.0 || len(nb["cells"].([]any)) != 4 {
		t.Errorf("saved v3 notebook reads back as %v", nb)
	}
}

func TestWrite_V3NotebookJupyterFailsToSaveIsRefused(t *testing.T) {
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
	for i, body := range bodies {
		if answers[i].Error == "" {
			t.Errorf("Jupyter saves %s", body)
		}
		_, _, err := Write([]byte(body))
		wantRefused(t, body, err)
	}
}

// wantRefused checks that err refuses the notebook body as a client's error.
func wantRefused(t *testing.T, body string, err error) {
	t.Helper()
	var e *domainerr.Error
	if !errors.Is(err, domainerr.ErrInvalid) || !errors.As(err, &e) {
		t.Errorf("write of %s: error %v, want a refusal (domainerr.ErrInvalid)", body, err)
	}
}

// v12SaveBodies are v1 and v2 notebooks as clients may send them, and ones Jupyter fails to
// save.
var v12SaveBodies = []string{
	`{"nbformat": 2, "metadata": {}, "worksheets": []}`,
	`{"nbformat": 2, "nbformat_minor": 1, "worksheets": {}}`,
	`{"worksheets": [{"cells": [
		{"cell_type": "code", "input": "print('\u00e9\ud83d\ude00')\nx\r\ny\u2028z\n", "language": "python", "collapsed": false, "prompt_number": 1, "metadata": {"trusted": true},
		 "outputs": [{"output_type": "pyout", "prompt_number": 1, "text": "a\nb", "html": "<b>\n</b>", "png": "iVBO\nRR"},
		             {"output_type": "stream", "stream": "stdout", "text": "tab\there\u007f\u0001\n"}]},
		{"cell_type": "markdown", "source": "a\n\nb\n", "rendered": "x\ny"},
		{"cell_type": "code", "input": ["already", "split"], "outputs": ""},
		{"cell_type": "heading", "level": 2, "source": "T\u00eftle"}]}], "nbformat": 2, "metadata": {"name": "\/x"}}`,
	`{"nbformat": 1}`,
	`{"nbformat": 1, "b": 1, "a": {"z": [], "y": {}, "x": [1, 2.5, true, false, null, "\u00e9\u2028\ud83d\ude00\u0001\/"]}, "b": [{"k": 1, "j": 2, "k": 3}]}`,
	`{"cells": [{"cell_type": "code", "code": "1"}], "nbformat": 1, "metadata": {"name": "kept"}}`,
	// What Jupyter fails to save.
	`{"cells": []}`,
	`{"nbformat": 2}`,
	`{"nbformat": 2, "worksheets": [7]}`,
	`{"nbformat": 2, "worksheets": "ab"}`,
	`{"nbformat": 2, "worksheets": [{}]}`,
	`{"nbformat": 2, "worksheets": [{"cells": [{"source": "no type"}]}]}`,
	`{"nbformat": 2, "worksheets": [{"cells": [{"cell_type": "code"}]}]}`,
	`{"nbformat": 2, "worksheets": [{"cells": [{"cell_type": "code", "outputs": [1]}]}]}`,
	`{"nbformat": 2, "worksheets": [{"cells": [{"cell_type": "code", "outputs": "x"}]}]}`,
}

// TestWrite_V1AndV2NotebooksAreWrittenAsJupyterWritesThem: written byte for byte as Jupyter
// Server saves them, with its validation message, or refused where it fails; each read back
// as v4.
func TestWrite_V1AndV2NotebooksAreWrittenAsJupyterWritesThem(t *testing.T) {
	names, files := oldFormatCorpus(t)
	bodies := append([]string{}, v12SaveBodies...)
	for _, name := range names {
		if strings.HasPrefix(name, "v1-") || strings.HasPrefix(name, "v2-") {
			bodies = append(bodies, string(files[name]))
		}
	}
	var jobs []nbformatJob
	for _, b := range bodies {
		jobs = append(jobs, nbformatJob{Op: "save", Text: b})
	}
	answers := runNbformat(t, jobs)
	saved := 0
	for i, body := range bodies {
		data, msg, err := encodeNotebook([]byte(body))
		if answers[i].Error != "" {
			wantRefused(t, body, err)
			continue
		}
		if err != nil {
			t.Errorf("write of %s: %v", body, err)
			continue
		}
		saved++
		if got := string(data); sameNumbers(got) != sameNumbers(answers[i].Text) {
			t.Errorf("write of %s wrote\n%s\nJupyter writes\n%s", body, got, answers[i].Text)
		}
		if msg != answers[i].Message {
			t.Errorf("write of %s: message %q, Jupyter's %q", body, msg, answers[i].Message)
		}
	}
	if saved < 8 {
		t.Errorf("Jupyter saved only %d of the notebooks", saved)
	}
	data, _, err := encodeNotebook([]byte(v12SaveBodies[2]))
	if err != nil {
		t.Fatal(err)
	}
	if nb := plainJSON(t, readV4(t, data)); nb["nbformat"] != 4.0 || len(nb["cells"].([]any)) != 4 {
		t.Errorf("saved v2 notebook reads back as %v", nb)
	}
}

// numberText is a JSON number, or digits in a string's text (which both sides escape alike).
var numberText = regexp.MustCompile(`-?\d+(\.\d+)?([eE][-+]?\d+)?`)

// sameNumbers spells the numbers of a JSON text alike: Write keeps a number as written,
// as in every save, where Python's json writes a float its own way (2.5e-7 as 2.5e-07).
func sameNumbers(text string) string {
	return numberText.ReplaceAllStringFunc(text, func(n string) string {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return n
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	})
}

func TestASCIIEscape_IsPythonEnsureASCII(t *testing.T) {
	in := "\"a\u007f\u00e9\u2028\U0001F600\""
	if got, want := string(asciiEscape([]byte(in))), `"a\u007f\u00e9\u2028\ud83d\ude00"`; got != want {
		t.Errorf("asciiEscape(%q) = %s, want %s", in, got, want)
	}
}
