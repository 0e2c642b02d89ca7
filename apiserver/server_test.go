package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/identity"
)

const testToken = "test-token-0123456789"

type testServer struct {
	t    *testing.T
	url  string
	root string
	hc   *http.Client
}

type serverOption func(*apiserver.Options)

func newServer(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	root := t.TempDir()
	return newServerAt(t, root, opts...)
}

func newServerAt(t *testing.T, root string, opts ...serverOption) *testServer {
	t.Helper()
	return newServerOn(t, nil, root, opts...)
}

// newServerOn serves on l (a fresh loopback port when nil): a test that must tell a provider
// the server's address before the server exists listens first.
func newServerOn(t *testing.T, l net.Listener, root string, opts ...serverOption) *testServer {
	t.Helper()
	hs := httptest.NewUnstartedServer(newHandler(t, root, opts...))
	if l != nil {
		hs.Listener.Close()
		hs.Listener = l
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return clientOf(t, hs.URL, root)
}

// clientOf is a test's client of the server at url, which follows no redirect.
func clientOf(t *testing.T, url, root string) *testServer {
	return &testServer{t: t, url: url, root: root, hc: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// newHandler is the API server over a contents store at root, as the tests and benchmarks
// configure it: alice's, with testToken.
func newHandler(tb testing.TB, root string, opts ...serverOption) http.Handler {
	tb.Helper()
	return newAPIServer(tb, root, opts...).Handler()
}

// servedOn is newServerOn through the server's own Serve, which runs what a replica runs
// beside its handler (the sweeps, the kernel events), until the test ends.
func servedOn(t *testing.T, l net.Listener, root string, opts ...serverOption) *testServer {
	t.Helper()
	srv := newAPIServer(t, root, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return clientOf(t, "http://"+l.Addr().String(), root)
}

func newAPIServer(tb testing.TB, root string, opts ...serverOption) *apiserver.Server {
	tb.Helper()
	store, err := contents.New(root, contents.Options{MaxCheckpoints: 3})
	if err != nil {
		tb.Fatal(err)
	}
	o := apiserver.Options{
		Token:        testToken,
		User:         identity.User{Name: "alice"},
		CookieSecret: bytes.Repeat([]byte("k"), 32),
		Contents:     store,
		MaxBodyBytes: 1 << 20,
		Log:          logr.Discard(),
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := apiserver.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends a request with the token in the Authorization header unless headers say otherwise.
func (s *testServer) do(method, path string, body any, headers ...string) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+testToken)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// expect checks the status and, for errors, Jupyter's error body.
func expect(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if status >= 400 {
		m := r.json(t)
		if _, ok := m["message"].(string); !ok {
			t.Errorf("error body %s lacks a message", r.body)
		}
		if _, ok := m["reason"]; !ok {
			t.Errorf("error body %s lacks a reason", r.body)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("error Content-Type %q", ct)
		}
	}
}

func TestAPI_VersionIsPublicAndEverythingElseNeedsTheToken(t *testing.T) {
	s := newServer(t)
	r := s.do("GET", "/api", nil, "Authorization", "")
	expect(t, r, http.StatusOK)
	if r.json(t)["version"] != apiserver.APIVersion {
		t.Errorf("version %s", r.body)
	}
	for _, p := range []string{"/api/status", "/api/contents", "/api/me", "/files/x", "/notebooks"} {
		r := s.do("GET", p, nil, "Authorization", "")
		expect(t, r, http.StatusForbidden)
		if m := r.json(t); m["message"] != "Forbidden" || m["reason"] != nil {
			t.Errorf("%s: %s", p, r.body)
		}
		expect(t, s.do("GET", p, nil, "Authorization", "token wrong"), http.StatusForbidden)
	}
	expect(t, s.do("GET", "/api/status", nil, "Authorization", "Bearer "+testToken), http.StatusOK)
	expect(t, s.do("GET", "/api/status?token="+testToken, nil, "Authorization", ""), http.StatusOK)
}

func TestAPI_TokenInURLLogsInWithACookieAndXSRFGuardsChanges(t *testing.T) {
	s := newServer(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+testToken, nil, "Authorization", ""), http.StatusOK)

	// Opening the printed URL (the base URL with the token) lands on the root listing.
	r := s.do("GET", "/?token="+testToken, nil, "Authorization", "")
	expect(t, r, http.StatusFound)
	if loc := r.header.Get("Location"); loc != "/api/contents" {
		t.Errorf("base URL redirects to %q", loc)
	}
	// The cookie alone now identifies the browser.
	expect(t, s.do("GET", "/api/contents", nil, "Authorization", ""), http.StatusOK)
	// A state change with the cookie alone is refused; with the XSRF token it passes.
	expect(t, s.do("POST", "/api/contents", `{"type":"notebook"}`, "Authorization", ""), http.StatusForbidden)
	u, _ := url.Parse(s.url)
	var xsrf string
	for _, c := range jar.Cookies(u) {
		if c.Name == "_xsrf" {
			xsrf = c.Value
		}
	}
	if xsrf == "" {
		t.Fatal("no _xsrf cookie after login")
	}
	expect(t, s.do("POST", "/api/contents", `{"type":"notebook"}`, "Authorization", "", "X-XSRFToken", xsrf), http.StatusCreated)
	expect(t, s.do("POST", "/api/contents", `{"type":"notebook"}`, "Authorization", "", "X-XSRFToken", "forged"), http.StatusForbidden)
	// Another site's page cannot use the cookie, even for reads.
	expect(t, s.do("GET", "/api/contents", nil, "Authorization", "", "Origin", "https://evil.example"), http.StatusForbidden)
	// Without the cookie, nothing.
	s.hc.Jar = nil
	expect(t, s.do("GET", "/api/contents", nil, "Authorization", ""), http.StatusForbidden)
}

func TestAPI_SecurityHeaders(t *testing.T) {
	s := newServer(t)
	r := s.do("GET", "/api/contents", nil)
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'self'", "default-src 'none'", "report-uri /api/security/csp-report"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
}

func TestAPI_RedirectsAndBaseURL(t *testing.T) {
	s := newServer(t, func(o *apiserver.Options) { o.BaseURL = "jupyter" })
	r := s.do("GET", "/jupyter/api/contents/?type=directory", nil)
	expect(t, r, http.StatusFound)
	if loc := r.header.Get("Location"); loc != "/jupyter/api/contents?type=directory" {
		t.Errorf("trailing slash redirect to %q", loc)
	}
	for _, m := range []string{"GET", "PUT", "PATCH", "POST", "DELETE"} {
		r := s.do(m, "/jupyter/api/notebooks/a%20b/c.ipynb", nil)
		expect(t, r, http.StatusFound)
		if loc := r.header.Get("Location"); loc != "/jupyter/api/contents/a%20b/c.ipynb" {
			t.Errorf("%s /api/notebooks redirect to %q", m, loc)
		}
	}
	expect(t, s.do("GET", "/jupyter/api/contents", nil), http.StatusOK)
	expect(t, s.do("GET", "/api/contents", nil), http.StatusNotFound)
	expect(t, s.do("GET", "/jupyter/api", nil, "Authorization", ""), http.StatusOK)
}

func TestAPI_StatusMeAndNbconvert(t *testing.T) {
	s := newServer(t)
	st := s.do("GET", "/api/status", nil).json(t)
	for _, k := range []string{"started", "last_activity", "kernels", "connections"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %s: %v", k, st)
		}
	}
	if started, _ := st["started"].(string); !strings.HasSuffix(started, "Z") || len(started) != len("2006-01-02T15:04:05.000000Z") {
		t.Errorf("started %q is not Jupyter's timestamp format", started)
	}
	me := s.do("GET", "/api/me", nil).json(t)
	if id, _ := me["identity"].(map[string]any); id["username"] != "alice" || id["initials"] != "A" {
		t.Errorf("me %v", me)
	}
	nb := s.do("GET", "/api/nbconvert", nil).json(t)
	if html, _ := nb["html"].(map[string]any); html["output_mimetype"] != "text/html" {
		t.Errorf("nbconvert %v", nb)
	}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// A server without kernels, sessions, clusters or kernel specs answers as Jupyter does when
// there are none: empty lists, 404 for an id.
func TestAPI_WithoutServicesAnswersAsWithNone(t *testing.T) {
	s := newServer(t)
	for _, p := range []string{"/api/kernels", "/kernels", "/api/sessions", "/api/clusters", "/clusters"} {
		r := s.do("GET", p, nil)
		expect(t, r, http.StatusOK)
		if string(r.body) != "[]" {
			t.Errorf("GET %s: %s, want []", p, r.body)
		}
	}
	specs := s.do("GET", "/api/kernelspecs", nil).json(t)
	if specs["default"] != "python3" || len(specs["kernelspecs"].(map[string]any)) != 0 {
		t.Errorf("kernel specs %v", specs)
	}
	for _, c := range []struct{ method, path, message string }{
		{method: "GET", path: "/api/kernels/k1", message: "Kernel does not exist: k1"},
		{method: "DELETE", path: "/api/kernels/k1", message: "Kernel does not exist: k1"},
		{method: "POST", path: "/api/kernels/k1/restart", message: "Kernel does not exist: k1"},
		{method: "GET", path: "/api/sessions/s1", message: "Session not found: s1"},
		{method: "GET", path: "/api/clusters/c1", message: "profile not found: c1"},
		{method: "POST", path: "/api/clusters/c1/stop", message: "profile not found: c1"},
		{method: "GET", path: "/api/kernelspecs/python3", message: "Kernel spec python3 not found"},
		{method: "POST", path: "/api/kernels", message: "No such kernel named python3"},
		{method: "POST", path: "/api/sessions", message: "No such kernel named python3"},
	} {
		r := s.do(c.method, c.path, nil)
		expect(t, r, http.StatusNotFound)
		if m := r.json(t)["message"]; m != c.message {
			t.Errorf("%s %s: message %q, want %q", c.method, c.path, m, c.message)
		}
	}
}

// The trailing-slash redirect happens before authentication, so it must never send a browser
// to another site: a path that a browser would read as another host (a backslash, a control
// character it strips, a second slash) is not redirected, or only to a path of this server
// (Jupyter Server's CVE-2020-26232 is this class).
func TestAPI_TrailingSlashRedirectStaysOnTheServer(t *testing.T) {
	s := newServer(t)
	for _, p := range []string{"/%5Cevil.example/", "/%5C%5Cevil.example/", "/%09/evil.example/", "/%2F/evil.example/", "//evil.example/", "/%0D%0A/evil.example/", "/api/%5C/"} {
		r := s.do("GET", p, nil, "Authorization", "")
		loc := r.header.Get("Location")
		if r.status >= 300 && r.status < 400 {
			u, err := url.Parse(loc)
			if err != nil || u.Host != "" || u.Scheme != "" || strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\t\r\n") || !strings.HasPrefix(loc, "/") {
				t.Errorf("GET %s redirects to %q, which a browser can read as another site", p, loc)
			}
		}
	}
	// Ordinary paths keep their redirect, encoded as they came.
	r := s.do("GET", "/api/contents/a%20b/", nil)
	if r.status != http.StatusFound || r.header.Get("Location") != "/api/contents/a%20b" {
		t.Errorf("GET /api/contents/a%%20b/: %d to %q", r.status, r.header.Get("Location"))
	}
}
