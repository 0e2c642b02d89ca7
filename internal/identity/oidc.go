package identity

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"k8s.io/utils/clock"
)

// KindOIDC is the provider of an OpenID Connect provider's users.
const KindOIDC = "oidc"

// Defaults of an OpenID Connect provider.
const (
	// DefaultOIDCTimeout bounds each call to the provider, discovery included.
	DefaultOIDCTimeout = 10 * time.Second
	// DefaultOIDCRemember is how long the last access token of a user is kept to re-validate
	// their logins with.
	DefaultOIDCRemember = 24 * time.Hour
	// DefaultUsernameClaim, DefaultGroupsClaim and DefaultDisplayNameClaim are the claims a
	// user's name, groups and display name are read from.
	DefaultUsernameClaim    = "preferred_username"
	DefaultGroupsClaim      = "groups"
	DefaultDisplayNameClaim = "name"
	defaultOIDCUsers        = 4096
	// maxOIDCAnswer bounds what is read of any answer of the provider: discovery documents,
	// key sets, tokens and user info are small.
	maxOIDCAnswer = 1 << 20
)

// OIDCOptions configure an OpenID Connect provider.
type OIDCOptions struct {
	// IssuerURL is the provider's issuer, exactly as its discovery document says it.
	IssuerURL string
	// ClientID and ClientSecret are nbkube's as the provider's client. The secret is sent by
	// HTTP basic authentication (client_secret_basic), or in the body (client_secret_post)
	// when the provider's discovery document says it supports only that; without a secret,
	// nbkube is a public client, which PKCE alone protects.
	ClientID, ClientSecret string
	// Scopes are asked for at login; "openid" is added when missing. When empty, they are
	// openid with those of profile, email and groups the provider advertises (profile and
	// email when it advertises no scopes): a provider may refuse a login that asks for a scope
	// it does not know.
	Scopes []string
	// UsernameClaim, GroupsClaim and DisplayNameClaim name the claims of the user's name,
	// groups and display name; DefaultUsernameClaim, DefaultGroupsClaim and
	// DefaultDisplayNameClaim when empty. The name must be one nbkube accepts (letters,
	// digits and .-_@+), or the user cannot log in.
	UsernameClaim, GroupsClaim, DisplayNameClaim string
	// AdminGroups and ActAsGroups are the groups whose members are admins and may act as other
	// users.
	AdminGroups, ActAsGroups []string
	// Timeout bounds each call (FinishLogin's exchange, key fetch and userinfo together);
	// DefaultOIDCTimeout when zero.
	Timeout time.Duration
	// Remember is how long a user's last access token is kept for Lookup; DefaultOIDCRemember
	// when zero.
	Remember time.Duration
	// Client makes the calls; a client with bounded connection and answer times when nil.
	// Every answer it reads is bounded in size either way.
	Client *http.Client
}

// OIDC is the provider of the users of an OpenID Connect provider (Keycloak, Dex, Hydra, a
// cloud's identity service), with nbkube registered as its client. Users log in in their
// browser by the authorization code flow with PKCE; the ID token proves the login (issuer,
// audience, nonce, subject), and the user is its claims with the userinfo endpoint's answer
// for the access token over them, so a login starts with what re-validating it will say. The
// login is the access token: AuthenticateToken asks the userinfo endpoint whose it is, which
// answers for as long as the provider keeps the token good (until it expires or is revoked).
//
// As with Kubernetes, a user cannot be looked up by name, so Lookup re-asks with the last
// access token the user presented to this process, kept in memory only. The credential
// fingerprint is the issuer with the user's subject, which a re-created account does not
// share.
type OIDC struct {
	o        OIDCOptions
	client   *http.Client
	endpoint oauth2.Endpoint
	verifier *oidc.IDTokenVerifier
	userinfo string
	scopes   []string
	// last holds each recent user's last good access token, for Lookup.
	last *lastTokens
}

// NewOIDC is the provider of the issuer at o.IssuerURL, whose discovery document it reads
// (within o.Timeout).
func NewOIDC(ctx context.Context, o OIDCOptions) (*OIDC, error) {
	if o.IssuerURL == "" || o.ClientID == "" {
		return nil, errors.New("the oidc identity provider needs the issuer's URL and a client ID")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultOIDCTimeout
	}
	if o.Remember <= 0 {
		o.Remember = DefaultOIDCRemember
	}
	if o.UsernameClaim == "" {
		o.UsernameClaim = DefaultUsernameClaim
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim = DefaultGroupsClaim
	}
	if o.DisplayNameClaim == "" {
		o.DisplayNameClaim = DefaultDisplayNameClaim
	}
	client := o.Client
	if client == nil {
		client = providerClient(o.Timeout)
	}
	bounded := *client
	rt := bounded.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	bounded.Transport = boundedAnswers{rt: rt, max: maxOIDCAnswer}
	p := &OIDC{o: o, client: &bounded}
	p.last = newLastTokens(defaultOIDCUsers, o.Remember, clock.RealClock{}, p.review)

	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, p.client), o.Timeout)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, o.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery of %s: %w", ErrUnavailable, o.IssuerURL, err)
	}
	p.userinfo = provider.UserInfoEndpoint()
	if p.userinfo == "" {
		return nil, fmt.Errorf("the OpenID provider %s has no userinfo endpoint: nbkube checks access tokens there", o.IssuerURL)
	}
	p.verifier = provider.Verifier(&oidc.Config{ClientID: o.ClientID})
	var meta struct {
		ScopesSupported  []string `json:"scopes_supported"`
		TokenAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := provider.Claims(&meta); err != nil {
		return nil, fmt.Errorf("the OpenID provider's discovery document: %w", err)
	}
	p.scopes = scopes(meta.ScopesSupported, o.Scopes)
	p.endpoint = provider.Endpoint()
	// Said once, so that a refused code is refused once, with the provider's reason, rather
	// than tried again with the secret elsewhere. Basic authentication is the default of
	// OpenID Connect Discovery. A public client (no secret) names itself in the body.
	p.endpoint.AuthStyle = oauth2.AuthStyleInHeader
	if o.ClientSecret == "" || (len(meta.TokenAuthMethods) > 0 && !slices.Contains(meta.TokenAuthMethods, "client_secret_basic") &&
		slices.Contains(meta.TokenAuthMethods, "client_secret_post")) {
		p.endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	return p, nil
}

// scopes are the configured scopes with openid, or the default ones the provider supports.
func scopes(supported, configured []string) []string {
	if len(configured) > 0 {
		out := slices.Clone(configured)
		if !slices.Contains(out, oidc.ScopeOpenID) {
			out = append([]string{oidc.ScopeOpenID}, out...)
		}
		return out
	}
	out := []string{oidc.ScopeOpenID}
	for _, s := range []string{"profile", "email", "groups"} {
		if slices.Contains(supported, s) || (len(supported) == 0 && s != "groups") {
			out = append(out, s)
		}
	}
	return out
}

// Kind is "oidc".
func (*OIDC) Kind() string { return KindOIDC }

// Scopes are the scopes a login asks for.
func (p *OIDC) Scopes() []string { return slices.Clone(p.scopes) }

func (p *OIDC) config(redirectURL string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.o.ClientID, ClientSecret: p.o.ClientSecret, Endpoint: p.endpoint,
		RedirectURL: redirectURL, Scopes: p.scopes}
}

// nonce is the ID token's nonce of a login with that PKCE verifier: a secret of the login
// like the verifier, so that an ID token of another login is refused.
func nonce(verifier string) string {
	h := sha256.Sum256([]byte("nbkube oidc nonce\x00" + verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// LoginURL is the provider's authorization endpoint, asked for a code bound to verifier
// (S256) and an ID token with the nonce derived from it.
func (p *OIDC) LoginURL(redirectURL, state, verifier string) string {
	return p.config(redirectURL).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce(verifier)))
}

// FinishLogin exchanges the code (with the verifier), verifies the ID token, and reads the
// user from its claims and the userinfo endpoint's.
func (p *OIDC) FinishLogin(ctx context.Context, redirectURL, code, verifier string) (*Login, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	tok, err := p.config(redirectURL).Exchange(context.WithValue(ctx, oauth2.HTTPClient, p.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < http.StatusInternalServerError {
			// The error's body and the code stay out of the message; the error code says why.
			return nil, fmt.Errorf("the OpenID provider refused the code: %s (%s)", re.ErrorCode, re.Response.Status)
		}
		if re != nil && re.Response != nil {
			return nil, fmt.Errorf("%w: the OpenID provider's token endpoint answered %s", ErrUnavailable, re.Response.Status)
		}
		return nil, fmt.Errorf("%w: the OpenID provider's token endpoint: %w", ErrUnavailable, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the OpenID provider's answer has no ID token")
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("the OpenID provider's ID token: %w", err)
	}
	if idt.Nonce != nonce(verifier) {
		return nil, errors.New("the OpenID provider's ID token is not of this login (nonce)")
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return nil, fmt.Errorf("the OpenID provider's ID token: %w", err)
		}
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("the OpenID provider's ID token: %w", err)
	}
	info, err := p.userInfo(ctx, tok.AccessToken)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, errors.New("the OpenID provider's userinfo endpoint refused the access token it just gave")
	}
	if sub, _ := info["sub"].(string); sub != idt.Subject {
		return nil, errors.New("the OpenID provider's userinfo is not of the ID token's subject")
	}
	for k, v := range info {
		claims[k] = v
	}
	u, err := p.user(claims)
	if err != nil {
		return nil, err
	}
	p.last.remember(u.Name, tok.AccessToken)
	return &Login{User: u, Token: tok.AccessToken, Expiry: tok.Expiry}, nil
}

// AuthenticateToken asks the userinfo endpoint whose access token it is.
func (p *OIDC) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	return p.last.authenticate(ctx, token)
}

// Lookup re-asks with the user's last access token; nil when this process holds none, or it
// is no longer good.
func (p *OIDC) Lookup(ctx context.Context, name string) (*User, error) {
	return p.last.lookup(ctx, name)
}

// review is the access token's user; nil when the provider refuses the token.
func (p *OIDC) review(ctx context.Context, token string) (*User, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	info, err := p.userInfo(ctx, token)
	if err != nil || info == nil {
		return nil, err
	}
	u, err := p.user(info)
	if err != nil {
		// The token is good but its user cannot be named: the claims are misconfigured.
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return u, nil
}

// userInfo is the userinfo endpoint's answer for the access token; nil when it refuses the
// token (401, 403).
func (p *OIDC) userInfo(ctx context.Context, token string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.userinfo, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: the OpenID provider's userinfo endpoint: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: the OpenID provider's userinfo endpoint: %w", ErrUnavailable, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: the OpenID provider's userinfo endpoint answered %s", ErrUnavailable, resp.Status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		// A signed (application/jwt) answer is a client setting at the provider.
		return nil, fmt.Errorf("%w: the OpenID provider's userinfo endpoint answered %q, not JSON", ErrUnavailable, mt)
	}
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("%w: the OpenID provider's userinfo: %w", ErrUnavailable, err)
	}
	if sub, _ := info["sub"].(string); sub == "" {
		return nil, fmt.Errorf("%w: the OpenID provider's userinfo has no subject", ErrUnavailable)
	}
	return info, nil
}

// user is the user the claims describe.
func (p *OIDC) user(claims map[string]any) (*User, error) {
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil, errors.New("the OpenID provider's claims have no subject")
	}
	name, _ := claims[p.o.UsernameClaim].(string)
	if !userName.MatchString(name) {
		return nil, fmt.Errorf("the %s claim %.80q is not a user name nbkube accepts (letters, digits and .-_@+, at most 253)", p.o.UsernameClaim, name)
	}
	u := &User{Name: name, Provider: KindOIDC, Credential: Fingerprint(p.o.IssuerURL, sub)}
	u.DisplayName, _ = claims[p.o.DisplayNameClaim].(string)
	switch g := claims[p.o.GroupsClaim].(type) {
	case string:
		u.Groups = []string{g}
	case []any:
		for _, v := range g {
			if s, ok := v.(string); ok {
				u.Groups = append(u.Groups, s)
			}
		}
	}
	for _, g := range u.Groups {
		u.Admin = u.Admin || slices.Contains(p.o.AdminGroups, g)
		u.ActAs = u.ActAs || slices.Contains(p.o.ActAsGroups, g)
	}
	return u, nil
}

// boundedAnswers bounds the body of every answer: a reader of more than max bytes gets an
// error, not the rest.
type boundedAnswers struct {
	rt  http.RoundTripper
	max int64
}

func (b boundedAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(r)
	if err == nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max}
	}
	return resp, err
}

var errAnswerTooLarge = errors.New("the answer is too large")

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, errAnswerTooLarge
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
