package apiserver_test

import (
	"net/http"
	"strings"
	"testing"
)

// The output frame is served to anyone (it is the same for everyone), sandboxed into an
// opaque origin by its own policy, which lets inline scripts run there and nowhere else.
func TestOutputFrame_IsSandboxedWithAPolicyOfItsOwn(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	r := s.do("GET", "/output-frame", nil, "Authorization", "", "Accept", acceptHTML)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /output-frame without a login: %d %s %.200s", r.status, r.header.Get("Content-Type"), r.body)
	}
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"sandbox allow-scripts;", "script-src 'self' 'unsafe-inline'", "frame-ancestors 'self'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the frame's policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "allow-same-origin") {
		t.Errorf("the frame's policy %q gives it nbkube's origin", csp)
	}
	if !strings.Contains(string(r.body), `<script src="/static/nbkube/outputframe.js"></script>`) {
		t.Errorf("the frame does not load its script: %s", r.body)
	}
	// The pages' own policy still refuses inline scripts.
	page := s.do("GET", "/tree", nil, "Accept", acceptHTML)
	if p := page.header.Get("Content-Security-Policy"); !strings.Contains(p, "script-src 'self';") {
		t.Errorf("the pages' policy allows inline scripts: %s", p)
	}
}
