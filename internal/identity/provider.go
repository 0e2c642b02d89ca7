package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Provider knows a set of users and their credentials.
type Provider interface {
	// Kind names the provider ("token", "users", ...); users it vouches for carry it.
	Kind() string
	// AuthenticateToken returns the user a token belongs to; nil and no error when the token
	// is not one of the provider's. An error means the provider could not tell (it is down or
	// misconfigured), not that the token is wrong.
	AuthenticateToken(ctx context.Context, token string) (*User, error)
	// Lookup returns the user of that name as the provider knows them now, nil when there is
	// no such user any more; a login is re-validated with it.
	Lookup(ctx context.Context, name string) (*User, error)
}

// PasswordProvider is a Provider that also checks passwords, for a login form.
type PasswordProvider interface {
	Provider
	// AuthenticatePassword returns the user whose password it is; nil and no error for an
	// unknown user or a wrong password.
	AuthenticatePassword(ctx context.Context, name, password string) (*User, error)
}

// ErrUnavailable wraps the errors of providers that could not answer.
var ErrUnavailable = errors.New("identity provider unavailable")

// Fingerprint is a short one-way digest of credential material (a token, a stored hash),
// for User.Credential: equal material gives equal fingerprints, and it tells nothing of
// the material.
func Fingerprint(parts ...string) string {
	h := sha256.New()
	h.Write([]byte("nbkube credential fingerprint"))
	for _, p := range parts {
		fmt.Fprintf(h, "\x00%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// BrowserProvider is a Provider whose users log in at another site, in their browser, by
// OAuth 2's authorization code flow with PKCE: JupyterHub's OAuth, OpenID Connect. The login
// that results is an access token of the provider's: AuthenticateToken knows it for as long
// as the provider keeps it good, which is how a login re-validates and ends.
type BrowserProvider interface {
	Provider
	// LoginURL is where to send the browser: the provider's authorization endpoint, asked to
	// come back to redirectURL with state. The code it returns is bound to verifier (PKCE
	// S256); a provider that also needs a nonce derives it from verifier.
	LoginURL(redirectURL, state, verifier string) string
	// FinishLogin exchanges the code the browser came back with for the login. An error
	// means the code, the verifier or the provider's answer was not good.
	FinishLogin(ctx context.Context, redirectURL, code, verifier string) (*Login, error)
}

// Login is a finished browser login.
type Login struct {
	// User is who logged in.
	User *User
	// Token is the provider's access token; AuthenticateToken returns User's name for it
	// while the login is good. It is a secret: keep it only where only nbkube reads it.
	Token string
	// Expiry is when the provider says the token ends; zero when it did not say.
	Expiry time.Time
}

// providerClient is the HTTP client of a provider that calls a service (a Hub, an OpenID
// provider) with no client of its own given: every phase of a call bounded by timeout.
func providerClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}}
}
