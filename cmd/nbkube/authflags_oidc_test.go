package main

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// --auth=oidc reads the real provider's discovery document at start, logs browsers in as
// nbkube's client with the secret of --oidc-client-secret-file or $NBKUBE_OIDC_CLIENT_SECRET,
// maps the claims and groups the flags name, and refuses to start without issuer and client.
func TestAuthFlag_OIDCIsTheProviderOfTheFlags(t *testing.T) {
	hydra := testenv.StartHydra(t, testenv.HydraConfig{Users: map[string]testenv.HydraUser{
		"ann": {Password: "ann pw", Groups: []string{"nb-admins"}},
	}})
	redirect := "http://127.0.0.1:1/oauth_callback"
	id, secret := hydra.CreateClient(t, redirect)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(oidcSecretEnv, "")
	f, err := parseAuth(t, "--auth=oidc,token", "--oidc-issuer-url="+hydra.IssuerURL, "--oidc-client-id="+id,
		"--oidc-client-secret-file="+secretFile, "--oidc-admin-groups=nb-admins,other", "--oidc-scopes=openid,profile,groups")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard())
	if err != nil || len(ps) != 2 || ps[0].Kind() != identity.KindOIDC {
		t.Fatalf("providers: %v, %v", ps, err)
	}
	bp := ps[0].(identity.BrowserProvider)
	verifier := "a-verifier-of-at-least-forty-three-characters-long"
	loginURL := bp.LoginURL(redirect, "state-of-the-login-1", verifier)
	if u, err := url.Parse(loginURL); err != nil || u.Query().Get("client_id") != id || u.Query().Get("scope") != "openid profile groups" {
		t.Errorf("login URL %s: %v", loginURL, err)
	}
	back := hydra.Login(t, loginURL, "ann", "ann pw")
	login, err := bp.FinishLogin(t.Context(), redirect, back.Query().Get("code"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	if login.User.Name != "ann" || !login.User.Admin {
		t.Errorf("ann logs in as %+v, want the admin ann", login.User)
	}

	// --oidc-username-prefix puts the provider's users apart, at login and after: ann is
	// oidc:ann, the token's user ann another user.
	f, err = parseAuth(t, "--auth=oidc,token", "--oidc-issuer-url="+hydra.IssuerURL, "--oidc-client-id="+id,
		"--oidc-client-secret-file="+secretFile, "--oidc-username-prefix=oidc:")
	if err != nil {
		t.Fatal(err)
	}
	ps, err = f.auth.providers("tok", identity.User{Name: "ann", Admin: true}, kubeAuth{}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	bp = ps[0].(identity.BrowserProvider)
	loginURL = bp.LoginURL(redirect, "state-of-the-login-2", verifier)
	back = hydra.Login(t, loginURL, "ann", "ann pw")
	login, err = bp.FinishLogin(t.Context(), redirect, back.Query().Get("code"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	if login.User.Name != "oidc:ann" || login.User.Display() != "ann" {
		t.Errorf("ann with a prefix logs in as %+v", login.User)
	}
	if u, err := identity.Chain(ps).AuthenticateToken(t.Context(), login.Token); err != nil || u == nil || u.Name != "oidc:ann" || u.Provider != identity.KindOIDC {
		t.Errorf("ann's access token with a prefix: %+v, %v", u, err)
	}

	for _, args := range [][]string{
		{"--auth=oidc"},
		{"--auth=oidc", "--oidc-issuer-url=" + hydra.IssuerURL},
		{"--auth=oidc", "--oidc-client-id=" + id},
		{"--auth=oidc", "--oidc-issuer-url=" + hydra.IssuerURL, "--oidc-client-id=" + id, "--oidc-client-secret-file=" + secretFile + ".missing"},
		{"--auth=oidc", "--oidc-issuer-url=http://127.0.0.1:1/", "--oidc-client-id=" + id},
	} {
		f, err := parseAuth(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard()); err == nil {
			t.Errorf("%v: providers built", args)
		}
	}
}
