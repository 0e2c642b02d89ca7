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

// --auth=jupyterhub asks the Hub of --hub-api-url with the service token of
// $JUPYTERHUB_API_TOKEN or --hub-api-token-file, and refuses to start without either.
func TestAuthFlag_JupyterHubAsksTheHubWithTheServiceToken(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann"}})
	annTok, _ := hub.UserToken(t, "ann")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(hub.ServiceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(hubTokenEnv, "")
	t.Setenv("JUPYTERHUB_API_URL", "")
	check := func(args ...string) {
		t.Helper()
		f, err := parseAuth(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard())
		if err != nil || len(ps) != 2 || ps[0].Kind() != identity.KindJupyterHub {
			t.Fatalf("%v: %v, %v", args, ps, err)
		}
		if u, err := identity.Chain(ps).AuthenticateToken(t.Context(), annTok); err != nil || u == nil || u.Name != "ann" || u.Provider != identity.KindJupyterHub {
			t.Errorf("%v: ann's Hub token: %+v, %v", args, u, err)
		}
	}
	check("--auth=jupyterhub,token", "--hub-api-url="+hub.APIURL, "--hub-api-token-file="+tokenFile)

	for _, args := range [][]string{
		{"--auth=jupyterhub"},
		{"--auth=jupyterhub", "--hub-api-url=" + hub.APIURL},
		{"--auth=jupyterhub", "--hub-api-token-file=" + tokenFile},
		{"--auth=jupyterhub", "--hub-api-url=" + hub.APIURL, "--hub-api-token-file=" + tokenFile + ".missing"},
	} {
		f, err := parseAuth(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard()); err == nil {
			t.Errorf("%v: providers built", args)
		}
	}

	// As a Hub service is started: both from the environment.
	t.Setenv(hubTokenEnv, hub.ServiceToken)
	t.Setenv("JUPYTERHUB_API_URL", hub.APIURL)
	check("--auth=jupyterhub,token")

	// --hub-username-prefix puts the Hub's users apart: ann is hub:ann, shown as ann.
	f, err := parseAuth(t, "--auth=jupyterhub,token", "--hub-username-prefix=hub:")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := f.auth.providers("tok", identity.User{Name: "ann"}, kubeAuth{}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if u, err := identity.Chain(ps).AuthenticateToken(t.Context(), annTok); err != nil || u == nil || u.Name != "hub:ann" || u.Display() != "ann" {
		t.Errorf("ann's Hub token with a prefix: %+v, %v", u, err)
	}

	// Browsers are sent to the Hub's public authorization endpoint, as nbkube's OAuth client.
	f, err = parseAuth(t, "--auth=jupyterhub", "--hub-authorize-url=https://hub.example.org/hub/api/oauth2/authorize", "--hub-oauth-client-id=service-nb2")
	if err != nil {
		t.Fatal(err)
	}
	ps, err = f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	bp, ok := ps[0].(identity.BrowserProvider)
	if !ok {
		t.Fatal("the jupyterhub provider logs no browser in")
	}
	login, err := url.Parse(bp.LoginURL("http://nbkube.example/oauth_callback", "st", "verifier-verifier-verifier-verifier-verifier"))
	if err != nil || login.Host != "hub.example.org" || login.Path != "/hub/api/oauth2/authorize" || login.Query().Get("client_id") != "service-nb2" {
		t.Errorf("login URL %v, %v", login, err)
	}
	f, err = parseAuth(t, "--auth=jupyterhub", "--hub-authorize-url=ftp://hub.example.org/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard()); err == nil {
		t.Error("an ftp authorization URL accepted")
	}
}
