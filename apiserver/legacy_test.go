package apiserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ipython1Notebook is a notebook as IPython 1.x's notebook page saves it: nbformat 3, lines
// joined, named in its metadata.
const ipython1Notebook = `{
 "metadata": {"name": "analysis"},
 "nbformat": 3,
 "nbformat_minor": 0,
 "worksheets": [{"cells": [
  {"cell_type": "heading", "level": 1, "metadata": {}, "source": "R\u00e9sultats"},
  {"cell_type": "markdown", "metadata": {}, "source": "Some *text*\nover lines"},
  {"cell_type": "code", "collapsed": false, "input": "import json\njson.loads('[1]')", "language": "python", "metadata": {},
   "outputs": [
    {"output_type": "stream", "stream": "stdout", "text": "printed\n"},
    {"metadata": {}, "output_type": "pyout", "prompt_number": 2, "text": "[1]", "json": "[1]", "html": "<b>1</b>"},
    {"output_type": "pyerr", "ename": "E", "evalue": "v", "traceback": ["t"]}
   ], "prompt_number": 2},
  {"cell_type": "raw", "metadata": {}, "source": "raw"}
 ], "metadata": {}}]
}`

func TestLegacyNotebooks_SpeakNbformat3AsIPython1(t *testing.T) {
	s := newServer(t)
	r := s.do("POST", "/notebooks", ipython1Notebook)
	expect(t, r, http.StatusCreated)
	var id string
	if err := jsonUnmarshal(r.body, &id); err != nil {
		t.Fatal(err)
	}
	// Saved as Jupyter saves it: in nbformat 3, under the name in its metadata.
	stored, err := os.ReadFile(filepath.Join(s.root, "analysis.ipynb"))
	if err != nil {
		t.Fatalf("POST of a v3 notebook named analysis: %v", err)
	}
	var onDisk struct{ Nbformat int }
	if err := json.Unmarshal(stored, &onDisk); err != nil || onDisk.Nbformat != 3 {
		t.Errorf("stored %s", stored)
	}

	// Served back in nbformat 3: what nbformat's downgrade makes of the notebook it reads.
	for _, q := range []string{"", "?format=json"} {
		r = s.do("GET", "/notebooks/"+id+q, nil)
		expect(t, r, http.StatusOK)
		checkV3Like(t, r.body, nbformatDowngrade(t, filepath.Join(s.root, "analysis.ipynb"), "analysis"))
	}
	// The contents API serves it in nbformat 4, converted.
	m := s.do("GET", "/api/contents/analysis.ipynb", nil).json(t)
	content, _ := m["content"].(map[string]any)
	md, _ := content["metadata"].(map[string]any)
	if content["nbformat"] != 4.0 || md["orig_nbformat"] != 3.0 || len(content["cells"].([]any)) != 4 {
		t.Errorf("contents API serves %v", content)
	}

	// IPython 1.x renames a notebook by saving it under a new name in its metadata.
	var nb map[string]any
	if err := json.Unmarshal(r.body, &nb); err != nil {
		t.Fatal(err)
	}
	nb["metadata"].(map[string]any)["name"] = "final"
	expect(t, s.do("PUT", "/notebooks/"+id, nb), http.StatusNoContent)
	if _, err := os.Stat(filepath.Join(s.root, "final.ipynb")); err != nil {
		t.Errorf("PUT with metadata name final: %v", err)
	}
	r = s.do("GET", "/notebooks/"+id, nil)
	expect(t, r, http.StatusOK)
	checkV3Like(t, r.body, nbformatDowngrade(t, filepath.Join(s.root, "final.ipynb"), "final"))

	// A v4 notebook saved through the older interface is served downgraded too.
	expect(t, s.do("PUT", "/notebooks/"+id, notebookJSON), http.StatusNoContent)
	r = s.do("GET", "/notebooks/"+id, nil)
	expect(t, r, http.StatusOK)
	checkV3Like(t, r.body, nbformatDowngrade(t, filepath.Join(s.root, "final.ipynb"), "final"))
}

// nbformatDowngrade is what Debian's nbformat serves of the notebook file at p to an
// IPython 1.x client named name: read as v4, downgraded, written by the v3 writer without
// splitting lines. The test is skipped when nbformat is missing.
func nbformatDowngrade(t *testing.T, p, name string) []byte {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import nbformat").Run(); err != nil {
		t.Skipf("python3's nbformat is missing (hack/install-test-deps.sh installs python3-jupyter-server, which brings it): %v", err)
	}
	const script = `
import sys, warnings
warnings.simplefilter("ignore")
import nbformat
nb = nbformat.v4.downgrade(nbformat.read(sys.argv[1], as_version=4))
nb.metadata.name = sys.argv[2]
sys.stdout.write(nbformat.v3.writes_json(nb, split_lines=False))
`
	var stderr bytes.Buffer
	cmd := exec.Command("/usr/bin/python3", "-c", script, p, name)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nbformat: %v\n%s", err, stderr.String())
	}
	return out
}

// checkV3Like compares two v3 notebooks' JSON: values alike, and the JSON text of json
// outputs alike once decoded (nbformat keeps the order it read object keys in).
func checkV3Like(t *testing.T, got, want []byte) {
	t.Helper()
	decode := func(b []byte) map[string]any {
		var nb map[string]any
		if err := json.Unmarshal(b, &nb); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		wss, _ := nb["worksheets"].([]any)
		for _, ws := range wss {
			cells, _ := ws.(map[string]any)["cells"].([]any)
			for _, c := range cells {
				outputs, _ := c.(map[string]any)["outputs"].([]any)
				for _, o := range outputs {
					out := o.(map[string]any)
					if s, ok := out["json"].(string); ok {
						var v any
						if err := json.Unmarshal([]byte(s), &v); err != nil {
							t.Fatalf("json output %q: %v", s, err)
						}
						out["json"] = v
					}
				}
			}
		}
		return nb
	}
	if d := cmp.Diff(decode(want), decode(got)); d != "" {
		t.Errorf("v3 notebook differs from nbformat's (-nbformat +served):\n%s", d)
	}
}
