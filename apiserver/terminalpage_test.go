package apiserver_test

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/apiserver"
)

// /terminals/<name> is the terminal's page for a browser (its script, its name in the
// configuration, the pages' policy), after a login; an API client is not served a page, and a
// name no terminal can have is a page that says so.
func TestTerminalPage_ShellForBrowsersNotFoundForAPIClients(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	r := s.do("GET", "/terminals/1", nil, "Accept", acceptHTML)
	expect(t, r, http.StatusOK)
	if cfg := pageConfig(t, r); cfg["page"] != "terminal" || cfg["terminal"] != "1" || cfg["user"] != "alice" || cfg["path"] != "" {
		t.Errorf("configuration %v", cfg)
	}
	body := string(r.body)
	if !strings.Contains(body, `src="/static/nbkube/terminal.js"`) || !strings.Contains(body, `href="/static/nbkube/terminal.css"`) ||
		!strings.Contains(body, "<title>Terminal 1 - nbkube</title>") {
		t.Errorf("the page: %s", body)
	}
	// The pages' policy, unchanged: xterm.js needs inline styles (its renderer writes <style>
	// elements), which every page allows, and nothing else.
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "style-src 'self' 'unsafe-inline';") ||
		!strings.Contains(csp, "connect-src 'self';") || strings.Contains(csp, "eval") || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", r.header)
	}
	if cfg := pageConfig(t, s.do("GET", "/terminals/ann_2-b", nil, "Accept", acceptHTML)); cfg["terminal"] != "ann_2-b" {
		t.Errorf("a name with _ and -: %v", cfg)
	}

	for _, p := range []string{"/terminals/a.b", "/terminals/..", "/terminals/%2E%2E", "/terminals/a%2Fb", "/terminals/%C3%A9"} {
		r := s.do("GET", p, nil, "Accept", acceptHTML)
		if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || strings.Contains(string(r.body), "nbkube-config") {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	for _, accept := range []string{"", "*/*", "application/json"} {
		if r := s.do("GET", "/terminals/1", nil, "Accept", accept); r.status != http.StatusNotFound || r.json(t)["message"] != "Not Found" {
			t.Errorf("GET /terminals/1 with Accept %q: %d %s", accept, r.status, r.body)
		}
	}

	// A browser without a login logs in first and comes back.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	r = s.do("GET", "/terminals/1", nil, "Accept", acceptHTML, "Authorization", "")
	if r.status != http.StatusFound || r.header.Get("Location") != "/login?next=%2Fterminals%2F1" {
		t.Errorf("without a login: %d to %q", r.status, r.header.Get("Location"))
	}
}

// The page's route and the WebSocket's (/terminals/websocket/<name>) share their prefix: the
// WebSocket's path is never the page of a terminal named "websocket", whatever serves it.
func TestTerminalPage_ServedBesideTheWebSocketRoute(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	r := s.do("GET", "/terminals/websocket/1", nil, "Accept", acceptHTML)
	if r.status == http.StatusOK && strings.Contains(string(r.body), `"page":"terminal"`) {
		t.Errorf("GET /terminals/websocket/1 is the terminal page: %s", r.body)
	}
	// Under a base URL too.
	s = newServer(t, withAssets(builtAssets), func(o *apiserver.Options) { o.BaseURL = "/u/ann/" })
	r = s.do("GET", "/u/ann/terminals/7", nil, "Accept", acceptHTML)
	expect(t, r, http.StatusOK)
	if cfg := pageConfig(t, r); cfg["terminal"] != "7" || cfg["baseUrl"] != "/u/ann/" {
		t.Errorf("under a base URL: %v", cfg)
	}
}
