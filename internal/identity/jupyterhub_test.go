package identity_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

func jupyterHubProvider(t *testing.T, apiURL, serviceToken string) *identity.JupyterHub {
	t.Helper()
	p, err := identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: apiURL, ServiceToken: serviceToken, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// API tokens of a real JupyterHub: the user is the token's owner, with the Hub's admin flag
// and groups; wrong and service tokens are no one's; a revoked token and a removed user end
// within the cache's TTL.
func TestJupyterHub_TokensAreTheHubUsers(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann", "ben"}, Admins: []string{"root"},
		Groups: map[string][]string{"team-a": {"ann"}}})
	p := jupyterHubProvider(t, hub.APIURL, hub.ServiceToken)
	ctx := t.Context()
	annTok, annID := hub.UserToken(t, "ann")
	rootTok, _ := hub.UserToken(t, "root")

	ann, err := p.AuthenticateToken(ctx, annTok)
	if err != nil || ann == nil || ann.Name != "ann" || ann.Admin || !slices.Equal(ann.Groups, []string{"team-a"}) || ann.Provider != identity.KindJupyterHub {
		t.Fatalf("ann's token: %+v, %v", ann, err)
	}
	root, err := p.AuthenticateToken(ctx, rootTok)
	if err != nil || root == nil || root.Name != "root" || !root.Admin {
		t.Fatalf("root's token: %+v, %v", root, err)
	}
	if root.Credential == ann.Credential || ann.Credential == "" {
		t.Errorf("fingerprints: ann %q, root %q", ann.Credential, root.Credential)
	}
	for _, tok := range []string{"", "wrong", annTok + "x", hub.ServiceToken} {
		if u, err := p.AuthenticateToken(ctx, tok); u != nil || err != nil {
			t.Errorf("token %.6q…: %+v, %v; want nobody", tok, u, err)
		}
	}
	if u, err := p.Lookup(ctx, "ann"); err != nil || u == nil || u.Credential != ann.Credential {
		t.Errorf("Lookup(ann): %+v, %v", u, err)
	}

	const ttl = 300 * time.Millisecond
	c := identity.NewCache(identity.Chain{p}, identity.CacheOptions{TTL: ttl, NegativeTTL: ttl})
	if u, err := c.AuthenticateToken(ctx, annTok); err != nil || u == nil || u.Name != "ann" {
		t.Fatalf("cached ann: %+v, %v", u, err)
	}
	hub.RevokeToken(t, "ann", annID)
	time.Sleep(2 * ttl)
	if u, err := c.AuthenticateToken(ctx, annTok); u != nil || err != nil {
		t.Errorf("ann's revoked token past the TTL: %+v, %v", u, err)
	}

	if u, err := c.Lookup(ctx, identity.KindJupyterHub, "ben"); err != nil || u == nil || u.Name != "ben" {
		t.Fatalf("Lookup(ben): %+v, %v", u, err)
	}
	hub.RemoveUser(t, "ben")
	time.Sleep(2 * ttl)
	if u, err := c.Lookup(ctx, identity.KindJupyterHub, "ben"); u != nil || err != nil {
		t.Errorf("removed ben past the TTL: %+v, %v", u, err)
	}
}

// A service token the Hub refuses, and a Hub that does not answer, are errors, not "no such
// user": a misconfigured provider must not look like removed users.
func TestJupyterHub_UnreachableOrRefusingHubIsUnavailable(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann"}})
	tok, _ := hub.UserToken(t, "ann")
	bad := jupyterHubProvider(t, hub.APIURL, "not-the-service-token")
	if u, err := bad.AuthenticateToken(t.Context(), tok); u != nil || !errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("with a refused service token: %+v, %v; want ErrUnavailable", u, err)
	}
	if u, err := bad.Lookup(t.Context(), "ann"); u != nil || !errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("Lookup with a refused service token: %+v, %v; want ErrUnavailable", u, err)
	}
	down := jupyterHubProvider(t, "http://127.0.0.1:1/hub/api", hub.ServiceToken)
	if u, err := down.AuthenticateToken(t.Context(), tok); u != nil || !errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("with no Hub: %+v, %v; want ErrUnavailable", u, err)
	}
}
