package apiserver_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// restarted is the browser of jar after a restart: the login cookie (30 days) is still there,
// the _xsrf cookie (a session cookie) is not. It returns a fresh client with only the login.
func restarted(t *testing.T, s *testServer, jar http.CookieJar) (*testServer, http.CookieJar) {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	b, fresh := newBrowser(t, s)
	for _, c := range jar.Cookies(u) {
		if strings.HasPrefix(c.Name, "nbkube-user-") {
			fresh.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/"}})
		}
	}
	if len(fresh.Cookies(u)) != 1 {
		t.Fatalf("no login cookie among %v", jar.Cookies(u))
	}
	return b, fresh
}

// xsrfSet is the _xsrf cookie an answer sets; "" when none.
func xsrfSet(r response) string {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "_xsrf" {
			return c.Value
		}
	}
	return ""
}

// After a browser restart the login survives and the _xsrf cookie does not: the pages, the
// API's answers to the login and the refusal of a change that lacked it issue a new one, so
// that the pages' scripts can save again; an answer to a browser that has one leaves it be.
func TestXSRF_ALoginWithoutTheCookieGetsANewOne(t *testing.T) {
	s := newServer(t, withAssets(builtAssets))
	b, jar := newBrowser(t, s)
	expect(t, b.do("GET", "/api/status?token="+testToken, nil, "Authorization", ""), http.StatusOK)

	// A page.
	b, jar = restarted(t, s, jar)
	r := b.do("GET", "/", nil, "Authorization", "", "Accept", acceptHTML)
	expect(t, r, http.StatusOK)
	if xsrfSet(r) == "" {
		t.Errorf("the dashboard sets no _xsrf cookie: %v", r.header)
	}
	// ... and then no more.
	if r := b.do("GET", "/api/contents", nil, "Authorization", ""); xsrfSet(r) != "" {
		t.Errorf("the cookie is issued again: %v", r.header)
	}

	// An API answer a page's scripts get.
	b, jar = restarted(t, s, jar)
	r = b.do("GET", "/api/contents", nil, "Authorization", "")
	expect(t, r, http.StatusOK)
	if xsrfSet(r) == "" {
		t.Errorf("GET /api/contents sets no _xsrf cookie: %v", r.header)
	}

	// A save that lacked it is refused, for XSRF, and the refusal carries a new one, with
	// which the save goes through.
	b, jar = restarted(t, s, jar)
	save := `{"type":"file","format":"text","content":"kept"}`
	r = b.do("PUT", "/api/contents/a.txt", save, "Authorization", "")
	expect(t, r, http.StatusForbidden)
	if m := r.json(t)["message"]; !strings.Contains(m.(string), "_xsrf") {
		t.Errorf("the refusal says %q", m)
	}
	xsrf := xsrfSet(r)
	if xsrf == "" {
		t.Fatalf("the refusal sets no _xsrf cookie: %v", r.header)
	}
	expect(t, b.do("PUT", "/api/contents/a.txt", save, "Authorization", "", "X-XSRFToken", xsrf), http.StatusCreated)

	// A request from another site gets no cookie of ours.
	b, _ = restarted(t, s, jar)
	r = b.do("PUT", "/api/contents/a.txt", save, "Authorization", "", "Origin", "http://evil.example")
	if r.status != http.StatusForbidden || xsrfSet(r) != "" {
		t.Errorf("a cross-origin request: %d %v", r.status, r.header)
	}
}
