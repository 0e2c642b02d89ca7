package apiserver_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// putFile writes a file into the server's contents root, as a kernel or an upload leaves it.
func (s *testServer) putFile(p string, data []byte) {
	s.t.Helper()
	full := filepath.Join(s.root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func corpusNotebook(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "internal", "nbconvert", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// jupyterExporters is what Jupyter Server 1.23 with nbconvert 6.5 lists, less the formats
// that need a TeX installation, a browser or a template of the user's (pdf, webpdf, custom)
// and reveal.js slides.
var jupyterExporters = map[string]string{
	"asciidoc": "text/asciidoc", "html": "text/html", "latex": "text/latex", "markdown": "text/markdown",
	"notebook": "application/json", "python": "text/x-python", "rst": "text/restructuredtext", "script": "",
}

func TestNbconvert_ListsExactlyTheExportersItServes(t *testing.T) {
	s := newServer(t)
	s.putFile("nb.ipynb", corpusNotebook(t, "rich.ipynb"))
	r := s.do("GET", "/api/nbconvert", nil)
	expect(t, r, http.StatusOK)
	var listed map[string]struct {
		OutputMimetype string `json:"output_mimetype"`
	}
	if err := json.Unmarshal(r.body, &listed); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for f, e := range listed {
		got[f] = e.OutputMimetype
		expect(t, s.do("GET", "/nbconvert/"+f+"/nb.ipynb", nil), http.StatusOK)
		expect(t, s.do("POST", "/nbconvert/"+f, fmt.Sprintf(`{"name":"nb.ipynb","content":%s}`, corpusNotebook(t, "rich.ipynb"))), http.StatusOK)
	}
	if d := cmp.Diff(jupyterExporters, got); d != "" {
		t.Errorf("listed exporters (-Jupyter +nbkube):\n%s", d)
	}
}

func TestNbconvert_ExportsAStoredNotebookAsJupyterServes(t *testing.T) {
	s := newServer(t)
	s.putFile("dir/my nb.ipynb", corpusNotebook(t, "math.ipynb"))
	modified := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(s.root, "dir", "my nb.ipynb"), modified, modified); err != nil {
		t.Fatal(err)
	}

	r := s.do("GET", "/nbconvert/html/dir/my%20nb.ipynb", nil)
	expect(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if lm, err := http.ParseTime(r.header.Get("Last-Modified")); err != nil || !lm.Equal(modified) {
		t.Errorf("Last-Modified %q, want %s", r.header.Get("Last-Modified"), modified)
	}
	if cd := r.header.Get("Content-Disposition"); cd != "" {
		t.Errorf("Content-Disposition %q without ?download", cd)
	}
	if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
		t.Errorf("Cache-Control %q", cc)
	}
	for _, want := range []string{"<title>my nb</title>", "highlight hl-ipython3", `<span class="`, "MathJax", `<h1 id=`} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("the HTML export lacks %q", want)
		}
	}

	r = s.do("GET", "/nbconvert/script/dir/my%20nb.ipynb?download=true", nil)
	expect(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "text/x-python; charset=utf-8" {
		t.Errorf("script Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); cd != "attachment; filename*=utf-8''my%20nb.py" {
		t.Errorf("Content-Disposition %q", cd)
	}
	if !bytes.HasPrefix(r.body, []byte("#!/usr/bin/env python")) {
		t.Errorf("script export %q", r.body)
	}
}

func TestNbconvert_ImagesBesideTheDocumentComeZipped(t *testing.T) {
	s := newServer(t)
	s.putFile("images.ipynb", corpusNotebook(t, "images.ipynb"))
	r := s.do("GET", "/nbconvert/markdown/images.ipynb", nil)
	expect(t, r, http.StatusOK)
	if ct, cd := r.header.Get("Content-Type"), r.header.Get("Content-Disposition"); ct != "application/zip" || cd != "attachment; filename*=utf-8''images.zip" {
		t.Errorf("Content-Type %q, Content-Disposition %q", ct, cd)
	}
	z, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
		if f.Name == "images.md" {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			md, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Contains(md, []byte("](output_")) {
				t.Errorf("the Markdown does not refer to its images:\n%s", md)
			}
		}
	}
	sort.Strings(names)
	if len(names) < 2 || !strings.Contains(strings.Join(names, " "), "images.md") || !strings.Contains(strings.Join(names, " "), ".png") {
		t.Errorf("zip holds %v", names)
	}
}

func TestNbconvert_PostedModelIsExported(t *testing.T) {
	s := newServer(t)
	body := fmt.Sprintf(`{"name":"posted.ipynb","content":%s}`, corpusNotebook(t, "errors.ipynb"))
	r := s.do("POST", "/nbconvert/html", body)
	expect(t, r, http.StatusOK)
	if !bytes.Contains(r.body, []byte("<title>posted</title>")) || !bytes.Contains(r.body, []byte("ZeroDivisionError")) {
		t.Errorf("HTML export of the posted model lacks its title or its error output")
	}
	r = s.do("POST", "/nbconvert/notebook", fmt.Sprintf(`{"content":%s}`, corpusNotebook(t, "errors.ipynb")))
	expect(t, r, http.StatusOK)
	var nb map[string]any
	if err := json.Unmarshal(r.body, &nb); err != nil || nb["nbformat"] != 4.0 {
		t.Errorf("notebook export %.200s: %v", r.body, err)
	}
}

func TestNbconvert_ErrorsAreJupytersAnswers(t *testing.T) {
	s := newServer(t)
	s.putFile("nb.ipynb", corpusNotebook(t, "raw.ipynb"))
	s.putFile("broken.ipynb", []byte(`{"cells": [`))
	s.putFile("notes.txt", []byte("text"))
	s.putFile(".hidden/nb.ipynb", corpusNotebook(t, "raw.ipynb"))
	// Larger than twice the server's body limit once exported.
	s.putFile("huge.ipynb", fmt.Appendf(nil, `{"nbformat":4,"nbformat_minor":5,"metadata":{},"cells":[{"cell_type":"code","metadata":{},"source":"x","execution_count":1,"outputs":[{"output_type":"stream","name":"stdout","text":%q}]}]}`, strings.Repeat("x", 3<<20)))

	for _, tc := range []struct {
		method, path, body string
		status             int
		message            string
	}{
		{"GET", "/nbconvert/pdf/nb.ipynb", "", http.StatusNotFound, "No exporter for format: pdf"},
		{"POST", "/nbconvert/slides", `{"content":{}}`, http.StatusNotFound, "No exporter for format: slides"},
		{"GET", "/nbconvert/html/missing.ipynb", "", http.StatusNotFound, ""},
		{"GET", "/nbconvert/html/.hidden/nb.ipynb", "", http.StatusNotFound, ""},
		{"GET", "/nbconvert/html/broken.ipynb", "", http.StatusBadRequest, "Unreadable Notebook"},
		{"GET", "/nbconvert/html/huge.ipynb", "", http.StatusInternalServerError, "nbconvert failed: the export is larger than its limit"},
		{"POST", "/nbconvert/html", `{"content":{"nbformat":3,"cells":[]}}`, http.StatusInternalServerError, "nbconvert failed: unreadable notebook"},
		{"POST", "/nbconvert/html", `{"name":"x.ipynb"}`, http.StatusBadRequest, "No notebook content"},
		{"POST", "/nbconvert/html", `{`, http.StatusBadRequest, "Invalid JSON in body of request"},
		{"GET", "/nbconvert/html", "", http.StatusMethodNotAllowed, ""},
	} {
		r := s.do(tc.method, tc.path, tc.body)
		expect(t, r, tc.status)
		if msg, _ := r.json(t)["message"].(string); !strings.HasPrefix(msg, tc.message) {
			t.Errorf("%s %s: message %q, want it to start with %q", tc.method, tc.path, msg, tc.message)
		}
	}

	// What is not a notebook is sent where it is served.
	r := s.do("GET", "/nbconvert/html/notes.txt", nil)
	expect(t, r, http.StatusFound)
	if loc := r.header.Get("Location"); loc != "/files/notes.txt" {
		t.Errorf("a file redirects to %q", loc)
	}
	// Another site's page cannot export the user's notebooks with the user's cookie.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+testToken, nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/nbconvert/html/nb.ipynb", nil, "Authorization", "", "Sec-Fetch-Site", "same-origin"), http.StatusOK)
	expect(t, s.do("GET", "/nbconvert/html/nb.ipynb", nil, "Authorization", "", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	// A token no provider knows leaves the cookie to authenticate, and the check to be made;
	// the real token skips it.
	for _, p := range []string{"/nbconvert/html/nb.ipynb?token=bogus", "/files/nb.ipynb?token=bogus"} {
		expect(t, s.do("GET", p, nil, "Authorization", "", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	}
	expect(t, s.do("GET", "/files/nb.ipynb?token="+testToken, nil, "Authorization", "", "Sec-Fetch-Site", "cross-site"), http.StatusOK)
}
