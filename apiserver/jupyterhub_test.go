package apiserver_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The users of a real JupyterHub through a real API server over real resources: each sees
// their own kernels, sessions and clusters, the Hub's admin everyone's; a wrong token, a
// revoked token and a removed user's token and login cookie are 403.
func TestJupyterHub_EachHubUserSeesTheirOwnAndTheHubAdminSeesAll(t *testing.T) {
	c, _ := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann", "ben"}, Admins: []string{"root"}})
	tokens, ids := map[string]string{}, map[string]string{}
	for key, user := range map[string]string{"a": "ann", "b": "ben", "root": "root"} {
		tokens[key], ids[key] = hub.UserToken(t, user)
	}
	owners := map[string]string{"a": "ann", "b": "ben"}
	createOwned(t, c, ns, owners)
	p, err := identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: hub.APIURL, ServiceToken: hub.ServiceToken})
	if err != nil {
		t.Fatal(err)
	}
	s := ownedServer(t, c, ns, p)
	as := func(key string) []string { return []string{"Authorization", "token " + tokens[key]} }
	checkEachSeesTheirOwn(t, s, owners, "a", "b", "root", as)

	me := s.do("GET", "/api/me", nil, as("a")...)
	if id, _ := me.json(t)["identity"].(map[string]any); id["username"] != "ann" {
		t.Errorf("ann's /api/me: %s", me.body)
	}
	for _, tok := range []string{testToken, tokens["a"] + "x", hub.ServiceToken} {
		expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "token "+tok), http.StatusForbidden)
	}

	// ben's token revoked in the Hub: 403 within the cache's TTL.
	hub.RevokeToken(t, "ben", ids["b"])
	eventuallyForbidden(t, s, tokens["b"])

	// ann logs in with a cookie; removing her from the Hub ends the token and the cookie.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+tokens["a"], nil, "Authorization", ""), http.StatusOK)
	time.Sleep(3 * authTTL) // past the cache: the cookie is re-validated with the Hub
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusOK)
	hub.RemoveUser(t, "ann")
	eventuallyForbidden(t, s, tokens["a"])
	eventuallyForbidden(t, s, "")
	s.hc.Jar = nil
	expect(t, s.do("GET", "/api/kernels", nil, as("root")...), http.StatusOK)
}

// A Hub user's open channels stay open while the Hub knows them, and close when the Hub's
// admin removes them; their token is then 403.
func TestJupyterHub_RemovedHubUsersChannelsAreClosed(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann", "ben"}})
	tokens := map[string]string{}
	for _, user := range []string{"ann", "ben"} {
		tokens[user], _ = hub.UserToken(t, user)
	}
	p, err := identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: hub.APIURL, ServiceToken: hub.ServiceToken})
	if err != nil {
		t.Fatal(err)
	}
	s := kernelServer(t, nil, p)
	ann, ben := dialK1(t, s, "ann", "Authorization", "token "+tokens["ann"]), dialK1(t, s, "ben", "Authorization", "token "+tokens["ben"])
	checkRevocationClosesOnlyTheirs(t, ann, ben, func() { hub.RemoveUser(t, "ann") })
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "token "+tokens["ann"]), http.StatusForbidden)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "token "+tokens["ben"]), http.StatusOK)
}

// Browser logins through the Hub's OAuth: each Hub user's browser sees their own, the Hub's
// admin everyone's; /login goes straight to the Hub when it is the only way in; a callback
// that is not this browser's login is refused; the Hub's revoking a user's tokens ends the
// login.
func TestJupyterHub_BrowserLoginsThroughTheHub(t *testing.T) {
	c, _ := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann", "ben"}, Admins: []string{"root"},
		OAuthRedirectURL: "http://" + l.Addr().String() + "/oauth_callback"})
	owners := map[string]string{"a": "ann", "b": "ben"}
	createOwned(t, c, ns, owners)
	p, err := identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: hub.APIURL, ServiceToken: hub.ServiceToken, AuthorizeURL: hub.AuthorizeURL})
	if err != nil {
		t.Fatal(err)
	}
	s := ownedServerOn(t, l, c, ns, p)

	// The Hub is the only way in: /login goes there.
	if r := s.do("GET", "/login", nil, "Authorization", ""); r.status != http.StatusFound || !strings.HasPrefix(r.header.Get("Location"), hub.AuthorizeURL+"?") {
		t.Fatalf("GET /login: %d to %q, want the Hub's authorization endpoint", r.status, r.header.Get("Location"))
	}
	browsers := map[string][]string{}
	for key, user := range map[string]string{"a": "ann", "b": "ben", "root": "root"} {
		browsers[key] = browserLogin(t, s, identity.KindJupyterHub, func(loginURL string) *url.URL { return hub.Login(t, loginURL, user) })
	}
	checkEachSeesTheirOwn(t, s, owners, "a", "b", "root", func(key string) []string { return browsers[key] })
	me := s.do("GET", "/api/me", nil, browsers["root"]...)
	if id, _ := me.json(t)["identity"].(map[string]any); id["username"] != "root" {
		t.Errorf("root's /api/me: %s", me.body)
	}

	// The Hub's answer comes back to a browser that did not start this login: refused, as
	// is this browser's login with another state.
	r := s.do("GET", "/login?provider=jupyterhub", nil, "Authorization", "")
	back := hub.Login(t, r.header.Get("Location"), "ann")
	expect(t, s.do("GET", "/oauth_callback?"+back.RawQuery, nil, "Authorization", ""), http.StatusBadRequest)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	r = s.do("GET", "/login?provider=jupyterhub", nil, "Authorization", "")
	back = hub.Login(t, r.header.Get("Location"), "ann")
	q := back.Query()
	q.Set("state", q.Get("state")+"x")
	expect(t, s.do("GET", "/oauth_callback?"+q.Encode(), nil, "Authorization", ""), http.StatusBadRequest)
	expect(t, s.do("GET", "/api/me", nil, "Authorization", ""), http.StatusForbidden)
	s.hc.Jar = nil

	// The Hub revokes ben's tokens: his browser's login ends; ann's stays.
	hub.RevokeTokens(t, "ben")
	testenv.Eventually(t, "ben's browser login refused", 10*time.Second, func() error {
		if r := s.do("GET", "/api/kernels", nil, browsers["b"]...); r.status != http.StatusForbidden {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
	expect(t, s.do("GET", "/api/kernels", nil, browsers["a"]...), http.StatusOK)
}
