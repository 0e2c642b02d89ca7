package identity_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The redirect URL nbkube registers at the Hub. Nothing listens there: the Hub only sends the
// browser to it, and testenv's login stops where the Hub sends it.
const hubCallback = "http://127.0.0.1:1/nbkube/oauth/callback"

func hubOAuthProvider(t *testing.T, hub *testenv.Hub, serviceToken string) *identity.JupyterHub {
	t.Helper()
	p, err := identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: hub.APIURL, ServiceToken: serviceToken,
		OAuthClientID: hub.OAuthClientID, AuthorizeURL: hub.AuthorizeURL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// hubLogin logs user in at the Hub from p's login URL, returning the code the Hub sent back.
func hubLogin(t *testing.T, hub *testenv.Hub, p *identity.JupyterHub, user, state, verifier string) string {
	t.Helper()
	back := hub.Login(t, p.LoginURL(hubCallback, state, verifier), user)
	q := back.Query()
	if got := back.Scheme + "://" + back.Host + back.Path; got != hubCallback || q.Get("state") != state || q.Get("code") == "" {
		t.Fatalf("the Hub sent %s's browser to %s (its state %t, a code %t), want %s with the state and a code",
			user, got, q.Get("state") == state, q.Get("code") != "", hubCallback)
	}
	return q.Get("code")
}

// Users log in through the Hub's OAuth: the login is the Hub's user with their admin flag and
// groups, its token is theirs to AuthenticateToken, and a code is good once.
func TestJupyterHub_BrowserLoginIsTheHubUser(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann"}, Admins: []string{"root"},
		Groups: map[string][]string{"team-a": {"ann"}}, OAuthRedirectURL: hubCallback})
	p := hubOAuthProvider(t, hub, hub.ServiceToken)
	ctx := t.Context()

	verifier := oauth2.GenerateVerifier()
	loginURL, err := url.Parse(p.LoginURL(hubCallback, "state-1", verifier))
	if err != nil {
		t.Fatal(err)
	}
	q := loginURL.Query()
	if base := loginURL.Scheme + "://" + loginURL.Host + loginURL.Path; base != hub.AuthorizeURL ||
		q.Get("client_id") != "service-nbkube" || q.Get("redirect_uri") != hubCallback || q.Get("response_type") != "code" ||
		q.Get("state") != "state-1" || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") != oauth2.S256ChallengeFromVerifier(verifier) {
		t.Fatalf("login URL %s", loginURL.Redacted())
	}

	for _, c := range []struct {
		user   string
		admin  bool
		groups []string
	}{{"ann", false, []string{"team-a"}}, {"root", true, nil}} {
		verifier := oauth2.GenerateVerifier()
		code := hubLogin(t, hub, p, c.user, "state-"+c.user, verifier)
		login, err := p.FinishLogin(ctx, hubCallback, code, verifier)
		if err != nil {
			t.Fatalf("%s's login: %v", c.user, err)
		}
		u := login.User
		if u.Name != c.user || u.Admin != c.admin || !slices.Equal(u.Groups, c.groups) || u.Provider != identity.KindJupyterHub || u.Credential == "" {
			t.Errorf("%s's login is %+v", c.user, u)
		}
		if login.Token == "" || time.Until(login.Expiry) < time.Hour {
			t.Errorf("%s's login: token %t, expiry %v; want a token good for a while", c.user, login.Token != "", login.Expiry)
		}
		if again, err := p.AuthenticateToken(ctx, login.Token); err != nil || again == nil || again.Name != c.user || again.Credential != u.Credential {
			t.Errorf("%s's login token: %+v, %v", c.user, again, err)
		}
		if l, err := p.FinishLogin(ctx, hubCallback, code, verifier); l != nil || err == nil || errors.Is(err, identity.ErrUnavailable) {
			t.Errorf("%s's code used twice: %+v, %v; want a refusal", c.user, l, err)
		} else if strings.Contains(err.Error(), code) {
			t.Errorf("the refusal carries the code: %v", err)
		}
	}
}

// A login ends with the Hub's user: a removed user's and a revoked token's login is no one's
// while another user's goes on.
func TestJupyterHub_BrowserLoginEndsWithTheHubUser(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann", "ben", "cat"}, OAuthRedirectURL: hubCallback})
	p := hubOAuthProvider(t, hub, hub.ServiceToken)
	ctx := t.Context()
	tokens := map[string]string{}
	for _, user := range []string{"ann", "ben", "cat"} {
		verifier := oauth2.GenerateVerifier()
		login, err := p.FinishLogin(ctx, hubCallback, hubLogin(t, hub, p, user, "s", verifier), verifier)
		if err != nil || login.User.Name != user {
			t.Fatalf("%s's login: %+v, %v", user, login, err)
		}
		tokens[user] = login.Token
	}

	hub.RemoveUser(t, "ben")
	if n := hub.RevokeTokens(t, "ann"); n == 0 {
		t.Fatal("ann has no tokens to revoke")
	}
	for user, want := range map[string]bool{"ann": false, "ben": false, "cat": true} {
		u, err := p.AuthenticateToken(ctx, tokens[user])
		if err != nil || (u != nil) != want || (want && u.Name != user) {
			t.Errorf("%s's login token: %+v, %v; want good %t", user, u, err, want)
		}
	}
}

// The Hub refuses a login URL for another redirect URL than nbkube's, and a code exchanged for
// another; a wrong client secret is nbkube's misconfiguration (ErrUnavailable), not a refused
// login. The Hub does not refuse a login without state: checking the state is the callback's.
// This Hub asks users to authorize nbkube, as a Hub without oauth_no_confirm does.
func TestJupyterHub_BrowserLoginRefusals(t *testing.T) {
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"ann"}, OAuthRedirectURL: hubCallback, OAuthConfirm: true})
	p := hubOAuthProvider(t, hub, hub.ServiceToken)
	ctx := t.Context()

	if back, err := hub.TryLogin(nil, p.LoginURL("http://127.0.0.1:1/elsewhere", "s", oauth2.GenerateVerifier()), "ann"); err == nil {
		t.Errorf("a login URL for another redirect URL came back to %s", back.Redacted())
	}

	verifier := oauth2.GenerateVerifier()
	code := hubLogin(t, hub, p, "ann", "s", verifier)
	if l, err := p.FinishLogin(ctx, "http://127.0.0.1:1/elsewhere", code, verifier); l != nil || err == nil || errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("a code exchanged for another redirect URL: %+v, %v; want a refusal", l, err)
	}
	wrongSecret := hubOAuthProvider(t, hub, "not-the-service-token")
	if l, err := wrongSecret.FinishLogin(ctx, hubCallback, code, verifier); l != nil || !errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("a wrong client secret: %+v, %v; want ErrUnavailable", l, err)
	} else if strings.Contains(err.Error(), "not-the-service-token") || strings.Contains(err.Error(), code) {
		t.Errorf("the error carries a secret: %v", err)
	}
	if l, err := p.FinishLogin(ctx, hubCallback, "", verifier); l != nil || err == nil {
		t.Errorf("no code: %+v, %v", l, err)
	}

	back := hub.Login(t, p.LoginURL(hubCallback, "", verifier), "ann")
	if back.Query().Has("state") || back.Query().Get("code") == "" {
		t.Errorf("a login without state came back with %v", back.Query().Has("state"))
	}
}
