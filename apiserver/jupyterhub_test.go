package apiserver_test

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/apiserver"
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
	ep := startAgent(t)
	s := newServer(t, func(o *apiserver.Options) {
		o.Providers = []identity.Provider{p}
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
		o.Kernels = &oneKernel{id: "k1", ep: ep}
	})
	base := "ws" + strings.TrimPrefix(s.url, "http") + "/api/kernels/k1/channels?session_id="
	dial := func(user string) *websocket.Conn {
		ws, resp, err := websocket.DefaultDialer.Dial(base+user, http.Header{"Authorization": {"token " + tokens[user]}})
		if err != nil {
			t.Fatalf("dial: %v %v", err, resp)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	ann, ben := dial("ann"), dial("ben")
	time.Sleep(4 * authTTL) // several re-validations with the Hub pass
	if got := execute(t, ann, false, "1+1"); got != "2" {
		t.Fatalf("1+1 = %q", got)
	}
	hub.RemoveUser(t, "ann")
	closed := make(chan error, 1)
	go func() {
		_ = ann.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, _, err := ann.ReadMessage(); err != nil {
				closed <- err
				return
			}
		}
	}()
	if err := <-closed; !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("the removed user's connection ended with %v, want a policy-violation close", err)
	}
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "token "+tokens["ann"]), http.StatusForbidden)
	if got := execute(t, ben, false, "2+2"); got != "4" {
		t.Errorf("ben's connection after ann's removal: 2+2 = %q", got)
	}
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "token "+tokens["ben"]), http.StatusOK)
}
