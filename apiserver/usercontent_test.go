package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The routes that answer with a user's content, which a browser may show as a page of its
// own (docs/api.md, "User content and the browser"), must not make it a page of nbkube's
// origin: an admin who opens another user's export or file would run that user's scripts with
// the admin's login. The kernel spec resources and /rstservice/render are checked the same way
// in their own tests (kernelspecs_test.go, rst_test.go), which need a control plane or a
// renderer.

// sandboxFlags checks that r is confined by the CSP sandbox, never with allow-same-origin, and
// carries nosniff; it returns the sandbox's flags.
func sandboxFlags(t *testing.T, what string, r response) []string {
	t.Helper()
	if r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: no X-Content-Type-Options: nosniff", what)
	}
	csp := r.header.Get("Content-Security-Policy")
	// Several policies (or sandbox directives) would all apply, each narrowing: one sandbox
	// is what the server means to send.
	var flags []string
	found := 0
	for d := range strings.SplitSeq(csp, ";") {
		f := strings.Fields(d)
		if len(f) > 0 && strings.EqualFold(f[0], "sandbox") {
			found++
			flags = f[1:]
		}
	}
	if found != 1 {
		t.Errorf("%s: CSP %q has %d sandbox directives, want 1", what, csp, found)
		return nil
	}
	for _, f := range flags {
		if f != "allow-scripts" {
			t.Errorf("%s: CSP %q lets the document %s", what, csp, f)
		}
	}
	return flags
}

// bensNotebook is a user's notebook made to run script in whoever opens its exports: a
// JavaScript output and an HTML one, and a language whose scripts are HTML, so that the
// "script" export is an HTML page too.
const bensNotebook = `{"nbformat": 4, "nbformat_minor": 5,
 "metadata": {"language_info": {"name": "evil", "mimetype": "text/html", "file_extension": ".html"}},
 "cells": [
  {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1,
   "source": "<script>fetch('/api/contents/../bob', {method: 'PUT'})</script>",
   "outputs": [
    {"output_type": "display_data", "metadata": {}, "data": {
      "application/javascript": "fetch('/api/kernels')",
      "text/plain": "x"}},
    {"output_type": "display_data", "metadata": {}, "data": {
      "text/html": "<img src=x onerror=\"fetch('/api/sessions')\">",
      "text/plain": "y"}}]},
  {"cell_type": "raw", "id": "b", "metadata": {"raw_mimetype": "text/html"}, "source": "<script>alert(document.cookie)</script>"}
 ]}`

func TestUserContent_EveryExportIsSandboxed(t *testing.T) {
	s := newServer(t)
	s.putFile("ben.ipynb", []byte(bensNotebook))
	s.putFile("rich.ipynb", corpusNotebook(t, "rich.ipynb"))
	s.putFile("images.ipynb", corpusNotebook(t, "images.ipynb"))

	var formats map[string]json.RawMessage
	if err := json.Unmarshal(s.do("GET", "/api/nbconvert", nil).body, &formats); err != nil || len(formats) == 0 {
		t.Fatalf("formats %v: %v", formats, err)
	}
	for format := range formats {
		// The HTML keeps its scripts (MathJax, JavaScript outputs), in the sandbox's opaque
		// origin; the text formats need none.
		var want []string
		if format == "html" {
			want = []string{"allow-scripts"}
		}
		for _, nb := range []string{"ben.ipynb", "rich.ipynb", "images.ipynb"} {
			model := fmt.Sprintf(`{"name":%q,"content":%s}`, nb, s.do("GET", "/files/"+nb, nil).body)
			for _, tc := range []struct {
				method, path, body string
				download           bool
			}{
				{"GET", "/nbconvert/" + format + "/" + nb, "", false},
				{"GET", "/nbconvert/" + format + "/" + nb + "?download=true", "", true},
				{"GET", "/nbconvert/" + format + "/" + nb + "?download=True", "", true},
				{"POST", "/nbconvert/" + format, model, false},
			} {
				what := tc.method + " " + tc.path
				r := s.do(tc.method, tc.path, tc.body)
				expect(t, r, http.StatusOK)
				if got := sandboxFlags(t, what, r); !slices.Equal(got, want) {
					t.Errorf("%s: sandbox flags %q, want %q", what, got, want)
				}
				zipped := r.header.Get("Content-Type") == "application/zip"
				if cd := r.header.Get("Content-Disposition"); (tc.download || zipped) != strings.HasPrefix(cd, "attachment;") {
					t.Errorf("%s: Content-Disposition %q", what, cd)
				}
			}
		}
	}

	// What ben's notebook makes of the exports: HTML pages with his scripts, which the
	// sandbox holds. The "script" export is HTML because his notebook says so (as Jupyter
	// serves it), and runs none of them.
	r := s.do("GET", "/nbconvert/script/ben.ipynb", nil)
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" || !bytes.Contains(r.body, []byte("<script>fetch(")) {
		t.Errorf("ben's script export: %q\n%s", ct, r.body)
	}
	r = s.do("GET", "/nbconvert/html/ben.ipynb", nil)
	if !bytes.Contains(r.body, []byte("fetch('/api/kernels')")) {
		t.Errorf("ben's HTML export lacks his script:\n%s", r.body)
	}
}

func TestUserContent_FilesAreSandboxed(t *testing.T) {
	s := newServer(t)
	s.putFile("page.html", []byte("<script>fetch('/api/kernels')</script>"))
	s.putFile("image.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>fetch('/api/kernels')</script></svg>`))
	s.putFile("page.xhtml", []byte(`<html xmlns="http://www.w3.org/1999/xhtml"><script>fetch('/api/kernels')</script></html>`))
	s.putFile("ben.ipynb", []byte(bensNotebook))
	for _, p := range []string{"page.html", "image.svg", "page.xhtml", "ben.ipynb"} {
		for _, q := range []string{"", "?download=1"} {
			for _, m := range []string{"GET", "HEAD"} {
				what := m + " /files/" + p + q
				r := s.do(m, "/files/"+p+q, nil)
				expect(t, r, http.StatusOK)
				// Jupyter's /files sandbox: a page of the user's runs its scripts, in no
				// origin of nbkube's.
				if got := sandboxFlags(t, what, r); !slices.Equal(got, []string{"allow-scripts"}) {
					t.Errorf("%s: sandbox flags %q", what, got)
				}
				if cd := r.header.Get("Content-Disposition"); (q != "") != strings.HasPrefix(cd, "attachment;") {
					t.Errorf("%s: Content-Disposition %q", what, cd)
				}
			}
		}
	}
	// A file that /nbconvert/ does not convert is sent to /files, where the sandbox holds it.
	r := s.do("GET", "/nbconvert/html/page.html", nil)
	expect(t, r, http.StatusFound)
	if loc := r.header.Get("Location"); loc != "/files/page.html" {
		t.Errorf("redirected to %q", loc)
	}
}

// What the sandbox leaves a page's scripts: requests with the reader's login cookie, sent from
// an opaque origin. The server must refuse those that would change something or that serve a
// user's content, even when they carry the right XSRF token.
func TestUserContent_RequestsFromASandboxedPageAreRefused(t *testing.T) {
	s := newServer(t)
	s.putFile("nb.ipynb", []byte(bensNotebook))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+testToken, nil, "Authorization", ""), http.StatusOK)
	u, _ := url.Parse(s.url)
	var xsrf string
	for _, c := range jar.Cookies(u) {
		if c.Name == "_xsrf" {
			xsrf = c.Value
		}
	}
	// The same requests from nbkube's own pages pass.
	expect(t, s.do("POST", "/api/contents", `{"type":"notebook"}`, "Authorization", "", "X-XSRFToken", xsrf, "Origin", s.url), http.StatusCreated)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/contents", `{"type":"notebook"}`},
		{"PUT", "/api/contents/other.txt", `{"type":"file","format":"text","content":"x"}`},
		{"GET", "/api/kernels", ""},
		{"GET", "/api/contents", ""},
		{"POST", "/nbconvert/html", fmt.Sprintf(`{"content":%s}`, bensNotebook)},
	} {
		r := s.do(tc.method, tc.path, tc.body, "Authorization", "", "X-XSRFToken", xsrf, "Origin", "null", "Sec-Fetch-Site", "cross-site")
		expect(t, r, http.StatusForbidden)
	}
	for _, p := range []string{"/files/nb.ipynb", "/nbconvert/html/nb.ipynb"} {
		expect(t, s.do("GET", p, nil, "Authorization", "", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	}
}
