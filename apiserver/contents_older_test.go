package apiserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestContents_NbformatV1AndV2AreStoredAsJupyterStoresThemAndReadAsV4: a v2 or v1 notebook
// PUT is stored in its own version, byte for byte as Jupyter Server 1.23 with nbformat 5.5
// stores it (the expected files were written by it), answered with Jupyter's message, and
// read back as v4. What Jupyter fails to save is 400.
func TestContents_NbformatV1AndV2AreStoredAsJupyterStoresThemAndReadAsV4(t *testing.T) {
	s := newServer(t)
	// Notebook 6.4.12's test_upload_v2, as it sends it.
	expect(t, s.do("PUT", "/api/contents/%C3%A5%20b", map[string]string{"type": "directory"}), http.StatusCreated)
	upload := `{"nbformat": 2, "worksheets": [{"cells": [{"cell_type": "code", "language": "python", "input": "print(\"hi\")", "outputs": [], "collapsed": false}]}], "metadata": {}}`
	expect(t, s.do("PUT", "/api/contents/%C3%A5%20b/Upload%20t%C3%A9st.ipynb", `{"type":"notebook","content":`+upload+`}`), http.StatusCreated)
	r := s.do("GET", "/api/contents/%C3%A5%20b/Upload%20t%C3%A9st.ipynb", nil)
	expect(t, r, http.StatusOK)
	if nb, _ := r.json(t)["content"].(map[string]any); nb["nbformat"] != 4.0 {
		t.Errorf("test_upload_v2 reads back %s", r.body)
	}

	for _, tc := range []struct{ name, content, stored, message, source string }{
		{"v2.ipynb",
			`{"metadata": {"name": "tést"}, "nbformat": 2, "worksheets": [{"cells": [{"cell_type":"code","collapsed":false,"input":"print(\"hi\")\nx = 'é'","language":"python","outputs":[{"output_type":"stream","text":"hi\nthere\n"}]},{"cell_type":"markdown","source":"# Title\r\ntext\u2028more"}]}]}`,
			"{\n \"metadata\": {\n  \"name\": \"t\\u00e9st\"\n },\n \"nbformat\": 2,\n \"worksheets\": [\n  {\n   \"cells\": [\n    {\n     \"cell_type\": \"code\",\n     \"collapsed\": false,\n     \"input\": [\n      \"print(\\\"hi\\\")\",\n      \"x = '\\u00e9'\"\n     ],\n     \"language\": \"python\",\n     \"outputs\": [\n      {\n       \"output_type\": \"stream\",\n       \"text\": [\n        \"hi\",\n        \"there\"\n       ]\n      }\n     ]\n    },\n    {\n     \"cell_type\": \"markdown\",\n     \"source\": [\n      \"# Title\",\n      \"text\",\n      \"more\"\n     ]\n    }\n   ]\n  }\n ]\n}\n",
			"Notebook validation failed: No schema for validating v2 notebooks:\n\"<UNKNOWN>\"",
			"print(\"hi\")\nx = 'é'"},
		{"v1.ipynb",
			`{"nbformat": 1, "zeta": 1, "cells": [{"code": "1+1", "cell_type": "code", "prompt_number": 3}, {"cell_type": "text", "text": "héllo\nworld\u007f"}], "alpha": [], "empty": {}, "zeta": [2.5, 100.0, -1, "\/", true, null]}`,
			"{\n    \"nbformat\": 1,\n    \"zeta\": [\n        2.5,\n        100.0,\n        -1,\n        \"/\",\n        true,\n        null\n    ],\n    \"cells\": [\n        {\n            \"code\": \"1+1\",\n            \"cell_type\": \"code\",\n            \"prompt_number\": 3\n        },\n        {\n            \"cell_type\": \"text\",\n            \"text\": \"h\\u00e9llo\\nworld\\u007f\"\n        }\n    ],\n    \"alpha\": [],\n    \"empty\": {}\n}\n",
			"Notebook validation failed: No schema for validating v1 notebooks:\n\"<UNKNOWN>\"",
			"1+1"},
	} {
		r := s.do("PUT", "/api/contents/"+tc.name, `{"type":"notebook","content":`+tc.content+`}`)
		expect(t, r, http.StatusCreated)
		if m := r.json(t); m["message"] != tc.message {
			t.Errorf("%s: save answered %s", tc.name, r.body)
		}
		if data, err := os.ReadFile(filepath.Join(s.root, tc.name)); err != nil || string(data) != tc.stored {
			t.Errorf("%s stored as\n%s\nwant\n%s (%v)", tc.name, data, tc.stored, err)
		}
		r = s.do("GET", "/api/contents/"+tc.name, nil)
		expect(t, r, http.StatusOK)
		m := r.json(t)
		nb, _ := m["content"].(map[string]any)
		cells, _ := nb["cells"].([]any)
		if nb["nbformat"] != 4.0 || len(cells) != 2 || cells[0].(map[string]any)["source"] != tc.source || m["message"] != nil {
			t.Errorf("%s reads back %s", tc.name, r.body)
		}
	}

	for _, content := range []string{
		`{"cells": []}`,                   // no nbformat: Jupyter's get_version makes it 1, its save fails
		`{"nbformat": 2, "metadata": {}}`, // no worksheets
		`{"nbformat": 2, "worksheets": [{"cells": [{"cell_type": "code"}]}]}`, // no outputs
		`{"nbformat": 5, "cells": []}`,
	} {
		expect(t, s.do("PUT", "/api/contents/bad.ipynb", `{"type":"notebook","content":`+content+`}`), http.StatusBadRequest)
	}
	if _, err := os.Stat(filepath.Join(s.root, "bad.ipynb")); err == nil {
		t.Error("a refused notebook was stored")
	}
}
