package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
