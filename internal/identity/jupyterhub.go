package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// KindJupyterHub is the provider of a JupyterHub's API tokens.
const KindJupyterHub = "jupyterhub"

// DefaultJupyterHubTimeout bounds each call to the Hub.
const DefaultJupyterHubTimeout = 10 * time.Second

// maxHubAnswer bounds what is read of a Hub's answer: a user model is small.
const maxHubAnswer = 1 << 20

// JupyterHubOptions configure a JupyterHub provider.
type JupyterHubOptions struct {
	// APIURL is the Hub's API, e.g. http://hub:8081/hub/api (JupyterHub's
	// JUPYTERHUB_API_URL for its services).
	APIURL string
	// ServiceToken is nbkube's own API token as a Hub service. Its role must grant the
	// read:users scope: users' models (admin flag, groups) are read with it.
	ServiceToken string
	// Timeout bounds each call; DefaultJupyterHubTimeout when zero.
	Timeout time.Duration
	// Client makes the calls; a client with bounded connection and answer times when nil.
	Client *http.Client

	// OAuthClientID is nbkube's OAuth client id at the Hub, for browser logins: JupyterHub
	// names a service's client "service-<name>"; DefaultJupyterHubOAuthClientID when empty.
	// Its secret is ServiceToken, as JupyterHub registers it.
	OAuthClientID string
	// AuthorizeURL is the Hub's OAuth authorization endpoint as browsers reach it, the Hub's
	// public URL, e.g. https://hub.example.org/hub/api/oauth2/authorize; APIURL +
	// "/oauth2/authorize" when empty, which suits only a Hub whose API URL browsers reach.
	AuthorizeURL string
}

// JupyterHub is the provider of the users of a JupyterHub, with nbkube registered as a Hub
// service: a token is the user's when the Hub says whose it is (GET /user with the token),
// and the user's name, admin flag and groups are the Hub's model of them, read with the
// service's token. The credential fingerprint is the name with the Hub's creation time of
// the user, so a removed and re-created user's logins end.
//
// It is also a BrowserProvider: with the service's oauth_redirect_uri registered at the Hub,
// users log in through the Hub's OAuth, and their login is the Hub's OAuth access token,
// good for as long as the Hub keeps the token and the user (jupyterhub_oauth.go).
type JupyterHub struct {
	o   JupyterHubOptions
	api string
}

// NewJupyterHub is the provider asking the Hub at o.APIURL.
func NewJupyterHub(o JupyterHubOptions) (*JupyterHub, error) {
	if o.APIURL == "" || o.ServiceToken == "" {
		return nil, errors.New("the jupyterhub identity provider needs the Hub's API URL and the service's API token")
	}
	api, err := url.Parse(strings.TrimSuffix(o.APIURL, "/"))
	if err != nil || (api.Scheme != "http" && api.Scheme != "https") || api.Host == "" {
		return nil, fmt.Errorf("the Hub's API URL %q is not an http(s) URL", o.APIURL)
	}
	if o.OAuthClientID == "" {
		o.OAuthClientID = DefaultJupyterHubOAuthClientID
	}
	if o.AuthorizeURL == "" {
		o.AuthorizeURL = api.String() + "/oauth2/authorize"
	} else if a, err := url.Parse(o.AuthorizeURL); err != nil || (a.Scheme != "http" && a.Scheme != "https") || a.Host == "" {
		return nil, fmt.Errorf("the Hub's authorization URL %q is not an http(s) URL", o.AuthorizeURL)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultJupyterHubTimeout
	}
	if o.Client == nil {
		o.Client = providerClient(o.Timeout)
	}
	return &JupyterHub{o: o, api: api.String()}, nil
}

// Kind is "jupyterhub".
func (*JupyterHub) Kind() string { return KindJupyterHub }

// hubUser is the part of the Hub's user model nbkube reads.
type hubUser struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Admin   bool     `json:"admin"`
	Groups  []string `json:"groups"`
	Created string   `json:"created"`
}

// AuthenticateToken asks the Hub whose token it is, then reads that user's model.
func (p *JupyterHub) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	if token == "" {
		return nil, nil
	}
	owner, err := p.get(ctx, "/user", token, false)
	if err != nil || owner == nil {
		return nil, err
	}
	if owner.Kind != "user" || owner.Name == "" {
		// A service's own token: services are not users of nbkube.
		return nil, nil
	}
	return p.Lookup(ctx, owner.Name)
}

// Lookup reads the user's model with the service's token; nil when the Hub has no such user.
func (p *JupyterHub) Lookup(ctx context.Context, name string) (*User, error) {
	if name == "" {
		return nil, nil
	}
	hu, err := p.get(ctx, "/users/"+url.PathEscape(name), p.o.ServiceToken, true)
	if err != nil || hu == nil {
		return nil, err
	}
	if hu.Kind != "user" || hu.Name != name {
		return nil, nil
	}
	return &User{Name: hu.Name, Groups: append([]string(nil), hu.Groups...), Admin: hu.Admin,
		Provider: KindJupyterHub, Credential: Fingerprint(KindJupyterHub, hu.Name, hu.Created)}, nil
}

// get is the user model the Hub answers at path with token; nil when the Hub knows no such
// user (404) or refuses a user's token (401, 403). A refused service token is an error: the
// service is misconfigured (no read:users), and its users must not look removed.
func (p *JupyterHub) get(ctx context.Context, path, token string, service bool) (*hubUser, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.api+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: the Hub: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHubAnswer))
	if err != nil {
		return nil, fmt.Errorf("%w: the Hub: %w", ErrUnavailable, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound,
		!service && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		return nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: the Hub answered GET %s with %s", ErrUnavailable, path, resp.Status)
	}
	var hu hubUser
	if err := json.Unmarshal(body, &hu); err != nil {
		return nil, fmt.Errorf("%w: the Hub's answer to GET %s: %w", ErrUnavailable, path, err)
	}
	return &hu, nil
}
