package apiserver_test

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Browser logins through a real OpenID provider (ORY Hydra) into a real API server over real
// resources: each user's browser sees their own, the admin group's member everyone's; /login
// goes straight to the provider when it is the only way in; the login ends when the provider
// revokes the user's tokens, and when its access token expires, whatever the cookie's age.
func TestOIDC_BrowserLoginsThroughTheProvider(t *testing.T) {
	c, _ := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	const ttl = 8 * time.Second
	hydra := testenv.StartHydra(t, testenv.HydraConfig{AccessTokenTTL: ttl, Users: map[string]testenv.HydraUser{
		"ann":  {Password: "ann pw", DisplayName: "Ann Lee", Groups: []string{"science"}},
		"ben":  {Password: "ben pw"},
		"root": {Password: "root pw", Groups: []string{"nb-admins"}},
	}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	id, secret := hydra.CreateClient(t, "http://"+l.Addr().String()+"/oauth_callback")
	p, err := identity.NewOIDC(t.Context(), identity.OIDCOptions{IssuerURL: hydra.IssuerURL, ClientID: id, ClientSecret: secret, AdminGroups: []string{"nb-admins"}})
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{"ann": "ann", "ben": "ben"}
	createOwned(t, c, ns, owners)
	s := ownedServerOn(t, l, c, ns, p)

	if r := s.do("GET", "/login", nil, "Authorization", ""); r.status != http.StatusFound || !strings.Contains(r.header.Get("Location"), "client_id="+url.QueryEscape(id)) {
		t.Fatalf("GET /login: %d to %q, want the provider's authorization endpoint", r.status, r.header.Get("Location"))
	}
	login := func(user string) []string {
		return browserLogin(t, s, identity.KindOIDC, func(loginURL string) *url.URL { return hydra.Login(t, loginURL, user, user+" pw") })
	}
	loggedIn := time.Now()
	browsers := map[string][]string{}
	for _, u := range []string{"ann", "ben", "root"} {
		browsers[u] = login(u)
	}
	checkEachSeesTheirOwn(t, s, owners, "ann", "ben", "root", func(user string) []string { return browsers[user] })
	me := s.do("GET", "/api/me", nil, browsers["ann"]...).json(t)["identity"].(map[string]any)
	if me["username"] != "ann" || me["display_name"] != "Ann Lee" {
		t.Errorf("ann's /api/me: %v", me)
	}

	// The provider revokes ben's tokens: his browser's login ends within the cache's TTL.
	hydra.Revoke(t, "ben")
	testenv.Eventually(t, "ben's browser login refused", 10*time.Second, func() error {
		if r := s.do("GET", "/api/kernels", nil, browsers["ben"]...); r.status != http.StatusForbidden {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
	expect(t, s.do("GET", "/api/kernels", nil, browsers["ann"]...), http.StatusOK)

	// The access token expires: so does the login, though the cookie is still sent.
	time.Sleep(time.Until(loggedIn.Add(ttl + time.Second)))
	r := s.do("GET", "/api/kernels", nil, browsers["ann"]...)
	expect(t, r, http.StatusForbidden)
	// A fresh login works again.
	expect(t, s.do("GET", "/api/kernels", nil, login("ann")...), http.StatusOK)
}

// A browser login's open channels close when the OpenID provider revokes the user's tokens;
// another user's stay open. Tokens no provider knows are Jupyter's 403.
func TestOIDC_RevokedLoginsChannelsAreClosed(t *testing.T) {
	hydra := testenv.StartHydra(t, testenv.HydraConfig{Users: map[string]testenv.HydraUser{
		"ann": {Password: "ann pw"}, "ben": {Password: "ben pw"},
	}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	id, secret := hydra.CreateClient(t, "http://"+l.Addr().String()+"/oauth_callback")
	p, err := identity.NewOIDC(t.Context(), identity.OIDCOptions{IssuerURL: hydra.IssuerURL, ClientID: id, ClientSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	s := kernelServer(t, l, p)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "Bearer not-a-token-of-anyone"), http.StatusForbidden)
	dial := func(user string) *websocket.Conn {
		as := browserLogin(t, s, identity.KindOIDC, func(loginURL string) *url.URL { return hydra.Login(t, loginURL, user, user+" pw") })
		return dialK1(t, s, user, as...)
	}
	ann, ben := dial("ann"), dial("ben")
	checkRevocationClosesOnlyTheirs(t, ann, ben, func() { hydra.Revoke(t, "ann") })
}
