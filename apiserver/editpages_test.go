package apiserver_test

import (
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// /edit/<path> opens the editor of a text file (UTF-8, Jupyter's check), sends a file that is
// not text to /view, a directory to its dashboard, a notebook to its page; /view/<path> is the
// viewer of any file. A missing file is a page that says so.
func TestEditPages_EditorForTextViewerForTheRestAndRedirects(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	if err := os.MkdirAll(filepath.Join(s.root, "d d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"d d/run me.py": []byte("print('é')\n"),
		"Makefile":      []byte("all:\n\ttrue\n"),
		"empty.txt":     nil,
		"d d/pic.png":   {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0x0d, 0xff},
		"latin1.csv":    []byte("caf\xe9,1\n"),
	} {
		if err := os.WriteFile(filepath.Join(s.root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, s.do("PUT", "/api/contents/d%20d/n.ipynb", `{"type":"notebook","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`), http.StatusCreated)

	// Text files: the editor's page, with the file's path, under the page policy.
	for p, want := range map[string]string{"/edit/d%20d/run%20me.py": "d d/run me.py", "/edit/Makefile": "Makefile", "/edit/empty.txt": "empty.txt"} {
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		expect(t, r, http.StatusOK)
		if cfg := pageConfig(t, r); cfg["page"] != "editor" || cfg["path"] != want {
			t.Errorf("GET %s: configuration %v", p, cfg)
		}
		if !strings.Contains(string(r.body), `src="/static/nbkube/editor.js"`) || r.header.Get("Cache-Control") != "no-store" ||
			!strings.Contains(r.header.Get("Content-Security-Policy"), "script-src 'self';") {
			t.Errorf("GET %s: %v %s", p, r.header, r.body)
		}
	}
	// Other files: to the viewer, which shows them or offers them for download.
	for p, want := range map[string]string{"/edit/d%20d/pic.png": "/view/d%20d/pic.png", "/edit/latin1.csv": "/view/latin1.csv"} {
		if r := s.do("GET", p, nil, "Accept", acceptHTML); r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want %s", p, r.status, r.header.Get("Location"), want)
		}
	}
	for p, want := range map[string]string{"/view/d%20d/pic.png": "d d/pic.png", "/view/latin1.csv": "latin1.csv", "/view/d%20d/run%20me.py": "d d/run me.py"} {
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		expect(t, r, http.StatusOK)
		if cfg := pageConfig(t, r); cfg["page"] != "viewer" || cfg["path"] != want {
			t.Errorf("GET %s: configuration %v", p, cfg)
		}
	}
	// A directory goes to its dashboard, a notebook to its page.
	for _, page := range []string{"edit", "view"} {
		if r := s.do("GET", "/"+page+"/d%20d", nil, "Accept", acceptHTML); r.status != http.StatusFound || r.header.Get("Location") != "/tree/d%20d" {
			t.Errorf("GET /%s of a directory: %d to %q", page, r.status, r.header.Get("Location"))
		}
		r := s.do("GET", "/"+page+"/d%20d/n.ipynb", nil, "Accept", acceptHTML)
		if r.status != http.StatusFound || !regexp.MustCompile(`^/[0-9a-f-]{36}$`).MatchString(r.header.Get("Location")) {
			t.Errorf("GET /%s of a notebook: %d to %q", page, r.status, r.header.Get("Location"))
		}
		// Nothing there: the HTML page that says so.
		r = s.do("GET", "/"+page+"/d%20d/missing.txt", nil, "Accept", acceptHTML)
		if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "missing.txt") {
			t.Errorf("GET /%s of a missing file: %d %s", page, r.status, r.body)
		}
		// An API client never gets a page.
		if r := s.do("GET", "/"+page+"/Makefile", nil, "Accept", "application/json"); r.status != http.StatusNotFound || r.json(t)["message"] != "Not Found" {
			t.Errorf("GET /%s from an API client: %d %s", page, r.status, r.body)
		}
	}
}

// The file pages need a login, as the dashboard does, and show only the user's own files.
func TestEditPages_LoginFirstAndOnlyTheUsersOwnFiles(t *testing.T) {
	s, as := homesServer(t, "users/{username}", withAssets(builtAssets))
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"`+annSecret+`"}`, as("ann")...), http.StatusCreated)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	for _, page := range []string{"edit", "view"} {
		r := s.do("GET", "/"+page+"/f.txt", nil, "Accept", acceptHTML, "Authorization", "")
		if r.status != http.StatusFound || r.header.Get("Location") != "/login?next=%2F"+page+"%2Ff.txt" {
			t.Errorf("GET /%s without a login: %d to %q", page, r.status, r.header.Get("Location"))
		}
		r = s.do("GET", "/"+page+"/f.txt", nil, append(as("ann"), "Accept", acceptHTML)...)
		if expect(t, r, http.StatusOK); pageConfig(t, r)["path"] != "f.txt" {
			t.Errorf("ann's /%s/f.txt: %v", page, pageConfig(t, r))
		}
		r = s.do("GET", "/"+page+"/f.txt", nil, append(as("ben"), "Accept", acceptHTML)...)
		if r.status != http.StatusNotFound || strings.Contains(string(r.body), annSecret) {
			t.Errorf("ben's /%s/f.txt: %d %s", page, r.status, r.body)
		}
		r = s.do("GET", "/"+page+"/..%2Fann%2Ff.txt", nil, append(as("ben"), "Accept", acceptHTML)...)
		if r.status == http.StatusOK || r.status == http.StatusFound {
			t.Errorf("ben's /%s/../ann/f.txt: %d %s", page, r.status, r.body)
		}
	}
}
