package apiserver_test

import (
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// writePasswordsFile writes a users file of name → password, and swaps it in atomically.
func writePasswordsFile(t *testing.T, path string, passwords map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("users:\n")
	for n, pw := range passwords {
		h, err := identity.HashSecret(pw)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "- name: %s\n  password_hash: %q\n", n, h)
	}
	if err := os.WriteFile(path+".tmp", []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// browser is a test client that keeps cookies and does not follow redirects.
func browser(t *testing.T, s *testServer) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
}

var xsrfField = regexp.MustCompile(`name="_xsrf" value="([^"]+)"`)

// loginForm GETs the login page and returns its form's XSRF token.
func loginForm(t *testing.T, s *testServer) string {
	t.Helper()
	r := s.do("GET", "/login", nil, "Authorization", "")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /login: %d %s", r.status, r.header.Get("Content-Type"))
	}
	m := xsrfField.FindSubmatch(r.body)
	if m == nil {
		t.Fatalf("the login page has no _xsrf field: %s", r.body)
	}
	return html.UnescapeString(string(m[1]))
}

// postLogin posts the login form.
func postLogin(t *testing.T, s *testServer, form url.Values) response {
	t.Helper()
	return s.do("POST", "/login", form.Encode(), "Authorization", "", "Content-Type", "application/x-www-form-urlencoded")
}

func TestLogin_PasswordFormLogsInUntilThePasswordChangesOrLogout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	writePasswordsFile(t, path, map[string]string{"ann": "correct horse", "ben": "battery staple"})
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *apiserver.Options) {
		o.Providers = []identity.Provider{users}
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
	})
	browser(t, s)
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)

	xsrf := loginForm(t, s)
	page := s.do("GET", "/login", nil, "Authorization", "")
	if !strings.Contains(string(page.body), `name="username"`) {
		t.Errorf("a users provider's login page asks for no user name: %s", page.body)
	}
	// Without the form's XSRF token the form is refused, even with the right password.
	expect(t, postLogin(t, s, url.Values{"username": {"ann"}, "password": {"correct horse"}}), http.StatusForbidden)
	for _, bad := range []url.Values{
		{"username": {"ann"}, "password": {"battery staple"}},
		{"username": {"nobody"}, "password": {"correct horse"}},
		{"username": {"ann"}, "password": {""}},
	} {
		bad.Set("_xsrf", xsrf)
		r := postLogin(t, s, bad)
		if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "Invalid credentials") {
			t.Errorf("POST /login %v: %d %s, want 401 and the page saying so", bad.Get("username"), r.status, r.body)
		}
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)

	r := postLogin(t, s, url.Values{"username": {"ann"}, "password": {"correct horse"}, "_xsrf": {xsrf}, "next": {"/api/contents"}})
	if r.status != http.StatusFound || r.header.Get("Location") != "/api/contents" {
		t.Fatalf("POST /login: %d to %q, want 302 to /api/contents; %s", r.status, r.header.Get("Location"), r.body)
	}
	me := s.do("GET", "/api/me", nil, "Authorization", "")
	expect(t, me, http.StatusOK)
	if name := me.json(t)["identity"].(map[string]any)["username"]; name != "ann" {
		t.Errorf("logged in as %v, want ann", name)
	}
	// A logged-in browser's /login goes on to next.
	if r := s.do("GET", "/login?next=/api/kernels", nil, "Authorization", ""); r.status != http.StatusFound || r.header.Get("Location") != "/api/kernels" {
		t.Errorf("GET /login when logged in: %d to %q", r.status, r.header.Get("Location"))
	}

	// A new password ends the login.
	writePasswordsFile(t, path, map[string]string{"ann": "new password", "ben": "battery staple"})
	eventuallyForbidden(t, s, "")

	// Logging in again and out: the cookie is gone, and the page says so.
	r = postLogin(t, s, url.Values{"username": {"ann"}, "password": {"new password"}, "_xsrf": {xsrf}})
	if r.status != http.StatusFound || r.header.Get("Location") != "/" {
		t.Fatalf("POST /login: %d to %q, want 302 to /", r.status, r.header.Get("Location"))
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusOK)
	out := s.do("GET", "/logout", nil, "Authorization", "")
	if out.status != http.StatusOK || !strings.Contains(string(out.body), "logged out") {
		t.Errorf("GET /logout: %d %s", out.status, out.body)
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)
}

func TestLogin_TheFormTakesATokenAndTheCookieDoesNotShowIt(t *testing.T) {
	s := newServer(t)
	browser(t, s)
	xsrf := loginForm(t, s)
	page := s.do("GET", "/login", nil, "Authorization", "")
	if strings.Contains(string(page.body), `name="username"`) {
		t.Errorf("the token provider's login page asks for a user name")
	}
	r := postLogin(t, s, url.Values{"password": {testToken + "x"}, "_xsrf": {xsrf}})
	if r.status != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", r.status)
	}
	r = postLogin(t, s, url.Values{"password": {testToken}, "_xsrf": {xsrf}})
	if r.status != http.StatusFound {
		t.Fatalf("POST /login with the token: %d %s", r.status, r.body)
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusOK)
	// The cookie keeps the token so that every replica can re-validate it: encrypted.
	u, _ := url.Parse(s.url)
	for _, c := range s.hc.Jar.Cookies(u) {
		if !strings.HasPrefix(c.Name, "nbkube-user-") {
			continue
		}
		for _, form := range []string{c.Value, decodeAll(c.Value)} {
			if strings.Contains(form, testToken) || strings.Contains(form, base64.StdEncoding.EncodeToString([]byte(testToken))[:16]) {
				t.Fatalf("the login cookie shows the token: %s", form)
			}
		}
	}
}

// decodeAll undoes the base64 layers of a securecookie value, as far as they go.
func decodeAll(v string) string {
	for range 3 {
		d, err := base64.URLEncoding.DecodeString(v)
		if err != nil {
			return v
		}
		v = string(d)
		if i := strings.IndexByte(v, '|'); i >= 0 {
			v = strings.ReplaceAll(v, "|", " ")
		}
	}
	return v
}

func TestLogin_NextNeverLeavesTheServer(t *testing.T) {
	s := newServer(t, func(o *apiserver.Options) { o.BaseURL = "/nb/" })
	browser(t, s)
	xsrf := func() string {
		r := s.do("GET", "/nb/login", nil, "Authorization", "")
		m := xsrfField.FindSubmatch(r.body)
		if m == nil {
			t.Fatalf("GET /nb/login: %d %s", r.status, r.body)
		}
		return html.UnescapeString(string(m[1]))
	}()
	for next, want := range map[string]string{
		"/nb/tree/a b":           "/nb/tree/a b",
		"//evil.example/nb/":     "/nb/",
		"/nb/\\evil.example":     "/nb/",
		"https://evil.example/":  "/nb/",
		"/nb/\t/evil":            "/nb/",
		"/other/":                "/nb/",
		"javascript:alert(1)":    "/nb/",
		"/nb/ok?x=1":             "/nb/ok?x=1",
		"/nb/../../evil.example": "/nb/",
	} {
		r := s.do("POST", "/nb/login", url.Values{"password": {testToken}, "_xsrf": {xsrf}, "next": {next}}.Encode(),
			"Authorization", "", "Content-Type", "application/x-www-form-urlencoded")
		if r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("next %q: %d to %q, want %q", next, r.status, r.header.Get("Location"), want)
		}
		if loc, err := url.Parse(r.header.Get("Location")); err != nil || loc.Host != "" {
			t.Errorf("next %q goes to another host: %q", next, r.header.Get("Location"))
		}
	}
}

func TestLogin_CallbackWithoutALoginUnderWayIs400(t *testing.T) {
	s := newServer(t)
	browser(t, s)
	expect(t, s.do("GET", "/oauth_callback?code=c&state=s", nil, "Authorization", ""), http.StatusBadRequest)
	expect(t, s.do("GET", "/login?provider=oidc", nil, "Authorization", ""), http.StatusNotFound)
}

// asCookies are the headers that authenticate as the browser whose cookies jar holds for s:
// its cookies, the XSRF header that state-changing requests need, and no token.
func asCookies(t *testing.T, s *testServer, jar http.CookieJar) []string {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	xsrf, login := "", false
	for _, c := range jar.Cookies(u) {
		pairs = append(pairs, c.Name+"="+c.Value)
		switch {
		case c.Name == "_xsrf":
			xsrf = c.Value
		case strings.HasPrefix(c.Name, "nbkube-user-"):
			login = true
		}
	}
	if !login || xsrf == "" {
		t.Fatalf("the browser has no login cookie and XSRF cookie: %v", pairs)
	}
	return []string{"Authorization", "", "Cookie", strings.Join(pairs, "; "), "X-XSRFToken", xsrf}
}

// newBrowser is a fresh browser of s: a client with cookies of its own that does not follow
// redirects.
func newBrowser(t *testing.T, s *testServer) (*testServer, http.CookieJar) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{t: t, url: s.url, root: s.root, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, jar
}

// formLogin logs a fresh browser in through the login form and returns its headers.
func formLogin(t *testing.T, s *testServer, name, password string) []string {
	t.Helper()
	b, jar := newBrowser(t, s)
	r := postLogin(t, b, url.Values{"username": {name}, "password": {password}, "_xsrf": {loginForm(t, b)}})
	if r.status != http.StatusFound {
		t.Fatalf("%s's login: %d %s", name, r.status, r.body)
	}
	return asCookies(t, b, jar)
}

// browserLogin logs a fresh browser in through the browser provider of that kind: nbkube
// sends it to the provider, drive plays the user at the provider and returns where the
// provider sends the browser back, and nbkube's callback sets the login. It returns the
// browser's headers.
func browserLogin(t *testing.T, s *testServer, kind string, drive func(loginURL string) *url.URL) []string {
	t.Helper()
	b, jar := newBrowser(t, s)
	r := b.do("GET", "/login?provider="+kind+"&next=/api/kernels", nil, "Authorization", "")
	if r.status != http.StatusFound {
		t.Fatalf("GET /login?provider=%s: %d %s", kind, r.status, r.body)
	}
	back := drive(r.header.Get("Location"))
	if want := s.url + "/oauth_callback"; back.Scheme+"://"+back.Host+back.Path != want {
		t.Fatalf("the provider sends the browser back to %s, want %s", back, want)
	}
	r = b.do("GET", "/oauth_callback?"+back.RawQuery, nil, "Authorization", "")
	if r.status != http.StatusFound || r.header.Get("Location") != "/api/kernels" {
		t.Fatalf("the callback: %d to %q; %s", r.status, r.header.Get("Location"), r.body)
	}
	return asCookies(t, b, jar)
}

func TestLogin_EachFormLoginSeesTheirOwn(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	owners := map[string]string{"ann": "ann", "ben": "ben"}
	createOwned(t, c, ns, owners)
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("users:\n- name: ann\n  password_hash: %q\n- name: ben\n  password_hash: %q\n- name: root\n  admin: true\n  password_hash: %q\n",
		hash(t, "ann pw"), hash(t, "ben pw"), hash(t, "root pw"))), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := ownedServer(t, c, ns, users)
	browsers := map[string][]string{}
	for _, u := range []string{"ann", "ben", "root"} {
		browsers[u] = formLogin(t, s, u, u+" pw")
	}
	checkEachSeesTheirOwn(t, s, owners, "ann", "ben", "root", func(user string) []string { return browsers[user] })
	// The cookie without its XSRF header changes nothing.
	expect(t, s.do("DELETE", "/api/kernels/k-ann", nil, browsers["ann"][:4]...), http.StatusForbidden)
}

func hash(t *testing.T, secret string) string {
	t.Helper()
	h, err := identity.HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Behind a TLS-terminating proxy that nbkube trusts, a request the proxy forwarded over HTTPS
// gets Secure cookies; a proxy it does not trust cannot ask for them (nor for the reverse),
// and a plain request gets plain ones.
func TestLogin_CookiesAreSecureBehindATrustedTLSProxy(t *testing.T) {
	secure := func(s *testServer, proto string) map[string]bool {
		t.Helper()
		r := s.do("GET", "/api/status?token="+testToken, nil, "Authorization", "", "X-Forwarded-Proto", proto)
		expect(t, r, http.StatusOK)
		out := map[string]bool{}
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			name := c.Name
			if strings.HasPrefix(name, "nbkube-user-") {
				name = "login"
			}
			out[name] = c.Secure
		}
		if len(out) != 2 {
			t.Fatalf("cookies set: %v", out)
		}
		return out
	}
	trusting := newServer(t, func(o *apiserver.Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	if got := secure(trusting, "https"); !got["login"] || !got["_xsrf"] {
		t.Errorf("through a trusted proxy over HTTPS: Secure %v, want both", got)
	}
	if got := secure(trusting, ""); got["login"] || got["_xsrf"] {
		t.Errorf("a plain request: Secure %v, want neither", got)
	}
	elsewhere := newServer(t, func(o *apiserver.Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} })
	if got := secure(elsewhere, "https"); got["login"] || got["_xsrf"] {
		t.Errorf("an untrusted proxy's X-Forwarded-Proto: Secure %v, want neither", got)
	}
}

// Login CSRF and cross-site logout: a page of another site must not log the browser in as
// someone of its choosing, nor out. What browsers send from this server's own pages (and
// what a client that is no browser sends: none of it) still works.
func TestLogin_OnlyThisServersOwnPagesLogInOrOut(t *testing.T) {
	s := newServer(t, func(o *apiserver.Options) { o.PublicURL = "https://nb.example.com" })
	browser(t, s)
	xsrf := loginForm(t, s)
	form := url.Values{"password": {testToken}, "_xsrf": {xsrf}}.Encode()
	login := func(headers ...string) response {
		t.Helper()
		return s.do("POST", "/login", form, append([]string{"Authorization", "", "Content-Type", "application/x-www-form-urlencoded"}, headers...)...)
	}
	for _, foreign := range [][]string{
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
		{"Origin", "http://" + strings.TrimPrefix(s.url, "http://") + ".evil.example"},
		{"Referer", "https://evil.example/login"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site", "Origin", "https://other.example.com"},
	} {
		r := login(foreign...)
		expect(t, r, http.StatusForbidden)
		if len(r.header.Values("Set-Cookie")) != 0 {
			t.Errorf("a login posted with %v sets cookies: %v", foreign, r.header.Values("Set-Cookie"))
		}
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)

	for _, own := range [][]string{
		{"Origin", s.url, "Sec-Fetch-Site", "same-origin"},
		{"Origin", s.url},
		{"Referer", s.url + "/login?next=%2F"},
		{"Origin", "https://nb.example.com"},
		nil,
	} {
		if r := login(own...); r.status != http.StatusFound {
			t.Errorf("a login posted with %v: %d, want 302; %s", own, r.status, r.body)
		}
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusOK)

	// Logout: a link, an image or a fetch of another site leaves the login alone.
	for _, foreign := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Referer", "https://evil.example/page"},
		{"Origin", "https://evil.example"},
	} {
		r := s.do("GET", "/logout", nil, append([]string{"Authorization", ""}, foreign...)...)
		expect(t, r, http.StatusForbidden)
		expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusOK)
	}
	// The pages' own "Log out" link, as Chromium follows it.
	r := s.do("GET", "/logout", nil, "Authorization", "", "Sec-Fetch-Site", "same-origin", "Referer", s.url+"/tree")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "logged out") {
		t.Fatalf("logout from the dashboard: %d %s", r.status, r.body)
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)
	// An address typed in.
	if r := login(); r.status != http.StatusFound {
		t.Fatalf("login: %d", r.status)
	}
	if r := s.do("GET", "/logout", nil, "Authorization", "", "Sec-Fetch-Site", "none"); r.status != http.StatusOK {
		t.Errorf("logout typed in: %d %s", r.status, r.body)
	}
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)
}
