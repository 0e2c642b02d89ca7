package apiserver_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// builtAssets stand for the web pages' build (web/dist): the server only serves them; what
// they do is tested in a browser (test/browser).
var builtAssets = fstest.MapFS{
	"dashboard.js":     {Data: []byte("export {};")},
	"dashboard.css":    {Data: []byte("body{}")},
	"dashboard.js.gz":  {Data: gzipped("export {};")},
	"notebook.js":      {Data: []byte("export {};")},
	"chunk-ABCDEF.js":  {Data: []byte("export const x = 1;")},
	".gitkeep":         {Data: []byte("#")},
	"asset-KaTeX.woff": {Data: []byte("font")},
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func withAssets(assets fstest.MapFS) serverOption {
	return func(o *apiserver.Options) { o.Assets = assets }
}

// specsOf lists fixed kernel specs: /new reads only their names and languages.
type specsOf []jupyter.KernelSpec

func (l specsOf) ListKernelSpecs(context.Context) ([]jupyter.KernelSpec, error) { return l, nil }
func (l specsOf) GetKernelSpec(_ context.Context, name string) (jupyter.KernelSpec, error) {
	for _, ks := range l {
		if ks.Name == name {
			return ks, nil
		}
	}
	return jupyter.KernelSpec{}, domainerr.ErrNotFound
}
func (l specsOf) GetKernelSpecResource(context.Context, string, string) (repository.KernelSpecResource, error) {
	return repository.KernelSpecResource{}, domainerr.ErrNotFound
}

const acceptHTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

var configBlock = regexp.MustCompile(`<script id="nbkube-config" type="application/json">(.*?)</script>`)

// pageConfig is the configuration a page shell carries for its script.
func pageConfig(t *testing.T, r response) map[string]any {
	t.Helper()
	m := configBlock.FindSubmatch(r.body)
	if m == nil {
		t.Fatalf("no configuration in the page: %s", r.body)
	}
	var cfg map[string]any
	if err := json.Unmarshal(m[1], &cfg); err != nil {
		t.Fatalf("the page's configuration %s: %v", m[1], err)
	}
	return cfg
}

func TestPages_ServeShellsToBrowsersAndKeepRESTAnswersForAPIClients(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	if err := os.MkdirAll(filepath.Join(s.root, "a b", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, s.do("PUT", "/api/contents/a%20b/n.ipynb", `{"type":"notebook","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`), http.StatusCreated)

	// "/" is the dashboard of the root for a browser, with a strict policy and no caching.
	r := s.do("GET", "/", nil, "Accept", acceptHTML)
	expect(t, r, http.StatusOK)
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-eval") ||
		strings.Contains(strings.Split(strings.Split(csp, "script-src")[1], ";")[0], "unsafe-inline") {
		t.Errorf("the dashboard's policy %q", csp)
	}
	if r.header.Get("Cache-Control") != "no-store" || !strings.Contains(string(r.body), `src="/static/nbkube/dashboard.js"`) {
		t.Errorf("dashboard: %v %s", r.header, r.body)
	}
	if cfg := pageConfig(t, r); cfg["page"] != "dashboard" || cfg["path"] != "" || cfg["baseUrl"] != "/" || cfg["user"] != "alice" {
		t.Errorf("dashboard configuration %v", cfg)
	}
	// ... and, as before the pages, a redirect to the root listing for an API client.
	for _, accept := range []string{"", "*/*", "application/json"} {
		r := s.do("GET", "/", nil, "Accept", accept)
		if r.status != http.StatusFound || r.header.Get("Location") != "/api/contents" {
			t.Errorf("GET / with Accept %q: %d to %q", accept, r.status, r.header.Get("Location"))
		}
	}

	// A directory's dashboard; a notebook by path goes to its page by id, a file to /files.
	r = s.do("GET", "/tree/a%20b", nil, "Accept", acceptHTML)
	if cfg := pageConfig(t, r); cfg["page"] != "dashboard" || cfg["path"] != "a b" {
		t.Errorf("directory page configuration %v", cfg)
	}
	r = s.do("GET", "/tree/a%20b/n.ipynb", nil, "Accept", acceptHTML)
	expect(t, r, http.StatusFound)
	id := strings.TrimPrefix(r.header.Get("Location"), "/")
	if !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(id) {
		t.Fatalf("notebook by path sent to %q", r.header.Get("Location"))
	}
	if err := os.WriteFile(filepath.Join(s.root, "a b", "x y.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := s.do("GET", "/tree/a%20b/x%20y.txt", nil, "Accept", acceptHTML); r.status != http.StatusFound || r.header.Get("Location") != "/files/a%20b/x%20y.txt" {
		t.Errorf("a file's tree page: %d to %q", r.status, r.header.Get("Location"))
	}
	r = s.do("GET", "/tree/nowhere", nil, "Accept", acceptHTML)
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "nowhere") || strings.Contains(string(r.body), "<script") {
		t.Errorf("missing directory: %d %s", r.status, r.body)
	}

	// The notebook's page and print view by id.
	for _, tc := range []struct{ path, page string }{{"/" + id, "notebook"}, {"/" + id + "/print", "print"}} {
		r := s.do("GET", tc.path, nil, "Accept", acceptHTML)
		expect(t, r, http.StatusOK)
		if cfg := pageConfig(t, r); cfg["page"] != tc.page || cfg["path"] != "a b/n.ipynb" || cfg["notebookId"] != id {
			t.Errorf("GET %s: configuration %v", tc.path, cfg)
		}
	}
	// An unknown id is a page that says so, 404.
	unknown := "/0e0e0e0e-0e0e-4e0e-8e0e-0e0e0e0e0e0e"
	for _, p := range []string{unknown, unknown + "/print", unknown + "/copy"} {
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "No notebook with id") || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}

	// A client asking for JSON never gets a page: page routes are not found for it, as paths
	// that are not ids are for everyone.
	for _, p := range []string{"/tree", "/tree/a%20b", "/" + id, "/" + id + "/print", "/new", "/not-an-id"} {
		for _, accept := range []string{"application/json", ""} {
			r := s.do("GET", p, nil, "Accept", accept)
			if r.status != http.StatusNotFound || r.json(t)["message"] != "Not Found" {
				t.Errorf("GET %s with Accept %q: %d %s", p, accept, r.status, r.body)
			}
		}
	}
	if r := s.do("GET", "/not-an-id", nil, "Accept", acceptHTML, "Authorization", ""); r.status != http.StatusNotFound {
		t.Errorf("GET /not-an-id unauthenticated: %d", r.status)
	}
}

func TestPages_NewAndCopyMakeNotebooksAndOpenThem(t *testing.T) {
	py := jupyter.KernelSpec{Name: "python3", Spec: jupyter.KernelSpecFile{DisplayName: "Python 3", Language: "python"}}
	r3 := jupyter.KernelSpec{Name: "ir", Spec: jupyter.KernelSpecFile{DisplayName: "R", Language: "R"}}
	s := newServer(t, withAssets(builtAssets), func(o *apiserver.Options) { o.KernelSpecs = specsOf{r3, py} })
	if err := os.Mkdir(filepath.Join(s.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	open := func(p string) (id, path string) {
		t.Helper()
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		if r.status != http.StatusFound {
			t.Fatalf("GET %s: %d %s", p, r.status, r.body)
		}
		page := s.do("GET", r.header.Get("Location"), nil, "Accept", acceptHTML)
		expect(t, page, http.StatusOK)
		cfg := pageConfig(t, page)
		return cfg["notebookId"].(string), cfg["path"].(string)
	}
	kernelOf := func(p string) map[string]any {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(s.root, p))
		if err != nil {
			t.Fatal(err)
		}
		var nb struct {
			Metadata map[string]any `json:"metadata"`
			NBFormat int            `json:"nbformat"`
		}
		if err := json.Unmarshal(data, &nb); err != nil || nb.NBFormat != 4 {
			t.Fatalf("%s: %v %s", p, err, data)
		}
		ks, _ := nb.Metadata["kernelspec"].(map[string]any)
		return ks
	}

	// The default spec, in the root.
	id, p := open("/new")
	if p != "Untitled.ipynb" || kernelOf(p)["name"] != "python3" || kernelOf(p)["display_name"] != "Python 3" {
		t.Errorf("/new made %s (%s) for %v", p, id, kernelOf(p))
	}
	// The one asked for, in the directory asked for.
	_, p = open("/new?dir=d&kernel=ir")
	if p != "d/Untitled.ipynb" || kernelOf(p)["name"] != "ir" || kernelOf(p)["language"] != "R" {
		t.Errorf("/new?dir=d&kernel=ir made %s for %v", p, kernelOf(p))
	}
	if r := s.do("GET", "/new?kernel=nope", nil, "Accept", acceptHTML); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "nope") {
		t.Errorf("/new of an unknown spec: %d %s", r.status, r.body)
	}
	if r := s.do("GET", "/new?dir=missing", nil, "Accept", acceptHTML); r.status != http.StatusNotFound {
		t.Errorf("/new in a missing directory: %d %s", r.status, r.body)
	}

	// Copy: beside the original, opened on its own page.
	copyID, copyPath := open("/" + id + "/copy")
	if copyID == id || copyPath != "Untitled-Copy1.ipynb" || kernelOf(copyPath)["name"] != "python3" {
		t.Errorf("copy of %s: %s %s", id, copyID, copyPath)
	}

	// Another site cannot make notebooks by sending the browser there.
	for _, p := range []string{"/new", "/" + id + "/copy"} {
		if r := s.do("GET", p, nil, "Accept", acceptHTML, "Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden {
			t.Errorf("GET %s from another site: %d", p, r.status)
		}
	}
	entries, _ := os.ReadDir(s.root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".ipynb_checkpoints .nbkube Untitled-Copy1.ipynb Untitled.ipynb d" {
		t.Errorf("the root holds %v after refused requests", names)
	}
}

func TestPages_BrowsersLogInFirstAndAssetsAreServed(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar

	// A browser without a login goes to the login page, which will bring it back.
	r := s.do("GET", "/tree/x?y=1", nil, "Accept", acceptHTML, "Authorization", "")
	if r.status != http.StatusFound || r.header.Get("Location") != "/login?next="+"%2Ftree%2Fx%3Fy%3D1" {
		t.Errorf("unauthenticated page: %d to %q", r.status, r.header.Get("Location"))
	}
	// An API client is refused as before.
	expect(t, s.do("GET", "/", nil, "Authorization", ""), http.StatusForbidden)
	// The printed URL logs the browser in and shows the dashboard, at an address without the
	// token; the page knows it can log out.
	r = s.do("GET", "/?token="+testToken, nil, "Accept", acceptHTML, "Authorization", "")
	if r.status != http.StatusFound || r.header.Get("Location") != "/" {
		t.Errorf("the printed URL: %d to %q", r.status, r.header.Get("Location"))
	}
	r = s.do("GET", "/", nil, "Accept", acceptHTML, "Authorization", "")
	expect(t, r, http.StatusOK)
	if cfg := pageConfig(t, r); cfg["canLogout"] != true {
		t.Errorf("cookie login: %v", cfg)
	}
	// A request with the token in its header has no login to end.
	if cfg := pageConfig(t, s.do("GET", "/", nil, "Accept", acceptHTML)); cfg["canLogout"] != false {
		t.Errorf("token login: %v", cfg)
	}

	// Assets need no login; hashed names are cached for good, entry points revalidated.
	r = s.do("GET", "/static/nbkube/dashboard.js", nil, "Authorization", "", "Accept-Encoding", "identity")
	expect(t, r, http.StatusOK)
	tag := r.header.Get("ETag")
	if string(r.body) != "export {};" || !strings.Contains(r.header.Get("Content-Type"), "javascript") || r.header.Get("Cache-Control") != "no-cache" || tag == "" {
		t.Errorf("dashboard.js: %v %q", r.header, r.body)
	}
	expect(t, s.do("GET", "/static/nbkube/dashboard.js", nil, "If-None-Match", tag, "Accept-Encoding", "identity"), http.StatusNotModified)
	// ... sent gzipped, as the build stored them, to a browser that takes it.
	r = s.do("GET", "/static/nbkube/dashboard.js", nil, "Accept-Encoding", "gzip, deflate, br")
	if r.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(r.body, gzipped("export {};")) || !strings.Contains(r.header.Get("Content-Type"), "javascript") ||
		r.header.Get("Vary") != "Accept-Encoding" || r.header.Get("ETag") == tag {
		t.Errorf("gzipped dashboard.js: %v", r.header)
	}
	if r := s.do("GET", "/static/nbkube/dashboard.js", nil, "Accept-Encoding", "gzip;q=0"); r.header.Get("Content-Encoding") != "" {
		t.Errorf("gzip refused, yet: %v", r.header)
	}
	if r := s.do("GET", "/static/nbkube/chunk-ABCDEF.js", nil); !strings.Contains(r.header.Get("Cache-Control"), "immutable") {
		t.Errorf("chunk: %v", r.header)
	}
	for _, p := range []string{"/static/nbkube/.gitkeep", "/static/nbkube/missing.js", "/static/nbkube/dashboard.js.gz", "/static/nbkube/..%2Fembed.go"} {
		if r := s.do("GET", p, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
}

func TestPages_WithoutBuiltAssetsSayHowToBuildThem(t *testing.T) {
	s := newServer(t, withAssets(fstest.MapFS{".gitkeep": {Data: []byte("#")}}))
	r := s.do("GET", "/", nil, "Accept", acceptHTML)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "make web") || !strings.Contains(string(r.body), "not built") {
		t.Errorf("unbuilt pages: %d %s", r.status, r.body)
	}
	// The API does not need them.
	expect(t, s.do("GET", "/api/contents", nil), http.StatusOK)
}

// Notebook 6's addresses reach the pages (a notebook's /notebooks/<path>, as JupyterHub's
// default_url and old bookmarks have them), and any other address a browser asks for outside
// the API is a page that says it is not found, not Jupyter's JSON.
func TestPages_Notebook6AddressesAndUnknownAddressesAnswerBrowsers(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	if err := os.MkdirAll(filepath.Join(s.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, s.do("PUT", "/api/contents/d/n%201.ipynb", `{"type":"notebook","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/top.ipynb", `{"type":"notebook","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`), http.StatusCreated)
	for path, want := range map[string]string{
		"/notebooks/d/n%201.ipynb": "/tree/d/n%201.ipynb",
		"/notebooks/top.ipynb":     "/tree/top.ipynb",
		"/notebooks/d":             "/tree/d",
	} {
		r := s.do("GET", path, nil, "Accept", acceptHTML)
		if r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want %s", path, r.status, r.header.Get("Location"), want)
		}
	}
	// ... which goes on to the notebook's page by id.
	if r := s.do("GET", "/tree/top.ipynb", nil, "Accept", acceptHTML); r.status != http.StatusFound || !regexp.MustCompile(`^/[0-9a-f-]{36}$`).MatchString(r.header.Get("Location")) {
		t.Errorf("GET /tree/top.ipynb: %d to %q", r.status, r.header.Get("Location"))
	}
	// The older IPython interface's /notebooks/<id> stays JSON, and so does any API path.
	if r := s.do("GET", "/notebooks/0e0e0e0e-0e0e-4e0e-8e0e-0e0e0e0e0e0e", nil, "Accept", acceptHTML); r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("the older interface's notebook by id: %d %s", r.status, r.header.Get("Content-Type"))
	}
	for _, p := range []string{"/no/such/page", "/not-an-id/print", "/not-an-id"} {
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "Not found") {
			t.Errorf("GET %s from a browser: %d %s %.200s", p, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	for _, p := range []string{"/api/no-such", "/no/such/page"} {
		r := s.do("GET", p, nil, "Accept", "application/json")
		if r.status != http.StatusNotFound || r.json(t)["message"] != "Not Found" {
			t.Errorf("GET %s from an API client: %d %s", p, r.status, r.body)
		}
	}
	if r := s.do("GET", "/api/no-such", nil, "Accept", acceptHTML); r.status != http.StatusNotFound || r.json(t)["message"] != "Not Found" {
		t.Errorf("an API path from a browser: %d %s", r.status, r.body)
	}
}

// Every page names the pages' icon, which is served to anyone, as browsers ask for it.
func TestPages_HaveAnIcon(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	r := s.do("GET", "/favicon.ico", nil, "Authorization", "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(string(r.body), "<svg") {
		t.Errorf("GET /favicon.ico: %d %s %.40s", r.status, r.header.Get("Content-Type"), r.body)
	}
	for _, p := range []string{"/", "/tree", "/no/such/page", "/login"} {
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		if !strings.Contains(string(r.body), `<link rel="icon" type="image/svg+xml" href="/favicon.ico">`) {
			t.Errorf("GET %s: no icon in %.300s", p, r.body)
		}
	}
}
