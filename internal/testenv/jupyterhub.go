package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// JupyterHubBin is Debian's jupyterhub (hack/install-test-deps.sh installs it).
const JupyterHubBin = "/usr/bin/jupyterhub"

// Hub is a real JupyterHub for a test, with nbkube registered as its service "nbkube".
type Hub struct {
	// APIURL is the Hub's API, as its services are told (JUPYTERHUB_API_URL): the Hub's own
	// port, not the proxy's.
	APIURL string
	// PublicURL is where browsers reach the Hub: its proxy, e.g. http://127.0.0.1:8000, with
	// the Hub's pages under /hub/.
	PublicURL string
	// AuthorizeURL is the Hub's OAuth authorization endpoint at PublicURL, for browsers.
	AuthorizeURL string
	// OAuthClientID is the "nbkube" service's OAuth client id ("service-nbkube"); its client
	// secret is ServiceToken. The Hub has the client only when HubConfig.OAuthRedirectURL is
	// set.
	OAuthClientID string
	// ServiceToken is the "nbkube" service's token; its role grants read:users.
	ServiceToken string
	// adminToken is a second service's, with the rights to manage users and tokens.
	adminToken string
}

// HubConfig is the Hub's users: Users ordinary, Admins admin; Groups maps a group to its
// members. Every user may use the "nbkube" service (access:services!service=nbkube, which
// JupyterHub 3.0 gives only admins by default), so that they can log in to it by OAuth.
type HubConfig struct {
	Users, Admins []string
	Groups        map[string][]string
	// OAuthRedirectURL is the "nbkube" service's oauth_redirect_uri: with it the Hub has
	// nbkube as an OAuth client. It may be on any host and port; Login does not follow it.
	OAuthRedirectURL string
	// OAuthConfirm keeps the Hub's page that asks the user to authorize the service; without
	// it the service is oauth_no_confirm, as an admin-run service is.
	OAuthConfirm bool
}

// StartJupyterHub starts Debian's jupyterhub with the dummy authenticator on free local
// ports in a temporary directory, and stops it when the test ends. Without the jupyterhub
// package the test is skipped, except under CI, where it fails: CI must not skip silently.
func StartJupyterHub(t *testing.T, cfg HubConfig) *Hub {
	t.Helper()
	if _, err := os.Stat(JupyterHubBin); err != nil {
		Missing(t, "%s is missing: apt-get install jupyterhub (hack/install-test-deps.sh) to run this test", JupyterHubBin)
	}
	dir := t.TempDir()
	h := &Hub{ServiceToken: randomHex(t), adminToken: randomHex(t)}
	hubPort, proxyPort, proxyAPIPort := freePort(t), freePort(t), freePort(t)
	h.APIURL = fmt.Sprintf("http://127.0.0.1:%d/hub/api", hubPort)
	h.PublicURL = fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	h.AuthorizeURL = h.PublicURL + "/hub/api/oauth2/authorize"
	h.OAuthClientID = "service-nbkube"
	groups := cfg.Groups
	if groups == nil {
		groups = map[string][]string{}
	}
	if cfg.Users == nil {
		cfg.Users = []string{}
	}
	if cfg.Admins == nil {
		cfg.Admins = []string{}
	}
	py := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	nbkube := "{'name': 'nbkube', 'api_token': '" + h.ServiceToken + "'"
	if cfg.OAuthRedirectURL != "" {
		noConfirm := "True"
		if cfg.OAuthConfirm {
			noConfirm = "False"
		}
		nbkube += ", 'oauth_redirect_uri': " + py(cfg.OAuthRedirectURL) + ", 'oauth_no_confirm': " + noConfirm
	}
	nbkube += "}"
	conf := strings.Join([]string{
		"c = get_config()",
		"c.JupyterHub.authenticator_class = 'jupyterhub.auth.DummyAuthenticator'",
		"c.Authenticator.allowed_users = set(" + py(cfg.Users) + ")",
		"c.Authenticator.admin_users = set(" + py(cfg.Admins) + ")",
		"c.JupyterHub.load_groups = " + py(groups),
		fmt.Sprintf("c.JupyterHub.bind_url = 'http://127.0.0.1:%d'", proxyPort),
		fmt.Sprintf("c.JupyterHub.hub_bind_url = 'http://127.0.0.1:%d'", hubPort),
		fmt.Sprintf("c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:%d'", proxyAPIPort),
		"c.JupyterHub.db_url = 'sqlite:///" + filepath.Join(dir, "hub.sqlite") + "'",
		"c.JupyterHub.cookie_secret_file = '" + filepath.Join(dir, "cookie_secret") + "'",
		"c.ConfigurableHTTPProxy.pid_file = '" + filepath.Join(dir, "proxy.pid") + "'",
		"c.JupyterHub.services = [" + nbkube + ", {'name': 'test-admin', 'api_token': '" + h.adminToken + "'}]",
		"c.JupyterHub.load_roles = [" +
			"{'name': 'user', 'scopes': ['self', 'access:services!service=nbkube']}, " +
			"{'name': 'nbkube', 'scopes': ['read:users'], 'services': ['nbkube']}, " +
			"{'name': 'test-admin', 'scopes': ['admin:users', 'tokens'], 'services': ['test-admin']}]",
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "jupyterhub_config.py"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(JupyterHubBin, "-f", filepath.Join(dir, "jupyterhub_config.py"))
	cmd.Dir = dir
	// Debian's configurable-http-proxy finds its modules there even when the node on PATH is
	// not Debian's.
	cmd.Env = append(os.Environ(), "NODE_PATH=/usr/share/nodejs")
	// Its own process group (StartServer), so that the proxy it starts goes with it.
	srv := StartServer(t, "jupyterhub", cmd, filepath.Join(dir, "hub.log"), 10*time.Second)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-srv.Exited():
			t.Fatalf("jupyterhub exited: %v", srv.ExitErr())
		default:
		}
		// Browsers reach the Hub through its proxy, which starts with it.
		if code, _ := h.call("GET", "/users", h.adminToken, nil); code == http.StatusOK && h.proxyUp() {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatal("jupyterhub did not answer within 90s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// call makes an API request of the Hub, returning the status and the body.
func (h *Hub) call(method, path, token string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.APIURL+path, r)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// proxyUp is whether the Hub answers through its proxy.
func (h *Hub) proxyUp() bool {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(h.PublicURL + "/hub/api/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// admin makes an API request as the Hub's admin service, failing the test unless the
// answer is want.
func (h *Hub) admin(t *testing.T, method, path string, body any, want int) []byte {
	t.Helper()
	code, b := h.call(method, path, h.adminToken, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// UserToken creates an API token of the user through the Hub's API, returning the token and
// its id.
func (h *Hub) UserToken(t *testing.T, user string) (token, id string) {
	t.Helper()
	b := h.admin(t, "POST", "/users/"+url.PathEscape(user)+"/tokens", map[string]any{"note": "nbkube test"}, http.StatusCreated)
	var m struct{ Token, ID string }
	if err := json.Unmarshal(b, &m); err != nil || m.Token == "" {
		t.Fatalf("the Hub's new token %s: %v", b, err)
	}
	return m.Token, m.ID
}

// RevokeToken deletes the user's token of that id.
func (h *Hub) RevokeToken(t *testing.T, user, id string) {
	t.Helper()
	h.admin(t, "DELETE", "/users/"+url.PathEscape(user)+"/tokens/"+url.PathEscape(id), nil, http.StatusNoContent)
}

// RemoveUser deletes the user from the Hub, and with them their tokens, OAuth ones too.
func (h *Hub) RemoveUser(t *testing.T, user string) {
	t.Helper()
	h.admin(t, "DELETE", "/users/"+url.PathEscape(user), nil, http.StatusNoContent)
}

// RevokeTokens deletes all the user's tokens, API and OAuth ones alike, returning how many
// there were; the user stays.
func (h *Hub) RevokeTokens(t *testing.T, user string) int {
	t.Helper()
	b := h.admin(t, "GET", "/users/"+url.PathEscape(user)+"/tokens", nil, http.StatusOK)
	var list struct {
		APITokens []struct{ ID string } `json:"api_tokens"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("the Hub's list of %s's tokens %s: %v", user, b, err)
	}
	for _, tok := range list.APITokens {
		h.RevokeToken(t, user, tok.ID)
	}
	return len(list.APITokens)
}

func randomHex(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort is a local port free when asked.
//
// The port is below Linux's ephemeral range (32768 and up): between this check and the Hub's
// (or its proxy's) listening, an outgoing connection of another test could otherwise take it,
// which happened under the parallel load of make test.
func freePort(t *testing.T) int {
	t.Helper()
	for range 200 {
		port := 20000 + mathrand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

// FreeAddr is a loopback address (host:port) free when asked, for a server a test starts
// (freePort says why its port is below the ephemeral range).
func FreeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}

// maxHubPage bounds what a login reads of one of the Hub's pages.
const maxHubPage = 1 << 20

// Login logs user in at the Hub as a browser does, with a new cookie jar: it goes to
// loginURL (the Hub's authorization URL with a client's query, or a client's page that
// redirects there), fills in the Hub's login form (the dummy authenticator takes any
// password), authorizes the client when the Hub asks, and returns where the Hub then sends the
// browser, the client's redirect URL with its code and state, without going there. The test
// fails when the Hub does not send the browser back to a client.
func (h *Hub) Login(t *testing.T, loginURL, user string) *url.URL {
	t.Helper()
	u, err := h.TryLogin(nil, loginURL, user)
	if err != nil {
		t.Fatalf("logging %s in at the Hub: %v", user, err)
	}
	return u
}

// TryLogin is Login with the browser's cookie jar (a new one when nil), for a client's
// cookies on the way and for a second login with the user's Hub session; its error says why
// the Hub did not send the browser back to a client, e.g. a page with an error.
func (h *Hub) TryLogin(jar http.CookieJar, loginURL, user string) (*url.URL, error) {
	if jar == nil {
		var err error
		if jar, err = cookiejar.New(nil); err != nil {
			return nil, err
		}
	}
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next, err := url.Parse(loginURL)
	if err != nil {
		return nil, err
	}
	method, form, referer := http.MethodGet, url.Values(nil), ""
	visitedHub, sentLogin, sentConfirm := false, false, false
	for range 20 {
		here := next
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, here.String(), body)
		if err != nil {
			return nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if referer != "" {
			// The Hub takes the authorization form only from its own page.
			req.Header.Set("Referer", referer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		page, err := io.ReadAll(io.LimitReader(resp.Body, maxHubPage))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		atHub := h.isHub(here)
		visitedHub = visitedHub || atHub
		method, form, referer = http.MethodGet, nil, ""
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			if next, err = resp.Location(); err != nil {
				return nil, fmt.Errorf("%s %s: %d without a good Location: %w", req.Method, here.Redacted(), resp.StatusCode, err)
			}
			if visitedHub && !h.isHub(next) {
				return next, nil
			}
			continue
		}
		if !atHub || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s %s: %d %s", req.Method, here.Redacted(), resp.StatusCode, pageText(page))
		}
		f := findForm(page)
		switch {
		case f == nil:
			return nil, fmt.Errorf("%s %s: a page without a form: %s", req.Method, here.Redacted(), pageText(page))
		case f.hasField["username"]:
			if sentLogin {
				return nil, fmt.Errorf("the Hub refused %s's login: %s", user, pageText(page))
			}
			sentLogin = true
			f.values.Set("username", user)
			f.values.Set("password", "any password")
		default:
			// The Hub's page asking the user to authorize the client.
			if sentConfirm {
				return nil, fmt.Errorf("the Hub asked again to authorize the client: %s", pageText(page))
			}
			sentConfirm = true
			referer = here.String()
		}
		if next, err = here.Parse(f.action); err != nil {
			return nil, err
		}
		method, form = http.MethodPost, f.values
	}
	return nil, errors.New("more than 20 steps without going back to a client")
}

// isHub is whether u is one of the Hub's pages, by its own port or its proxy's.
func (h *Hub) isHub(u *url.URL) bool {
	if !strings.HasPrefix(u.Path, "/hub/") {
		return false
	}
	for _, base := range []string{h.APIURL, h.PublicURL} {
		if b, err := url.Parse(base); err == nil && b.Scheme == u.Scheme && b.Host == u.Host {
			return true
		}
	}
	return false
}

// htmlForm is what a browser sends of a page's first form: its action, its hidden and
// checked inputs' values, and the names of the fields a user fills in.
type htmlForm struct {
	action   string
	values   url.Values
	hasField map[string]bool
}

// findForm is the page's first form; nil when it has none.
func findForm(page []byte) *htmlForm {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return nil
	}
	var f *htmlForm
	var walk func(n *html.Node, inForm bool)
	walk = func(n *html.Node, inForm bool) {
		if n.Type == html.ElementNode && n.DataAtom == atom.Form && f == nil {
			f = &htmlForm{action: attr(n, "action"), values: url.Values{}, hasField: map[string]bool{}}
			inForm = true
		}
		if inForm && n.Type == html.ElementNode && n.DataAtom == atom.Input && attr(n, "name") != "" {
			name := attr(n, "name")
			switch strings.ToLower(attr(n, "type")) {
			case "hidden":
				f.values.Add(name, attr(n, "value"))
			case "checkbox", "radio":
				if hasAttr(n, "checked") {
					f.values.Add(name, attr(n, "value"))
				}
			case "submit", "button", "reset":
			default:
				f.hasField[name] = true
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inForm)
		}
	}
	walk(doc, false)
	return f
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// pageText is the start of a page's text, for an error: the Hub's error pages say why.
func pageText(page []byte) string {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return ""
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.DataAtom == atom.Script || n.DataAtom == atom.Style || n.DataAtom == atom.Head || n.DataAtom == atom.Noscript) {
			return
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil && b.Len() < 4096; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	text := strings.Join(strings.Fields(b.String()), " ")
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}
