package identity

import (
	"context"
	"crypto/subtle"
)

// KindToken is the provider of one shared token.
const KindToken = "token"

// Token is the provider of a single token that belongs to a single user: Jupyter Server's
// --token, and `nbkube local`'s.
type Token struct {
	token []byte
	user  User
}

// NewToken is the provider of token, which proves user.
func NewToken(token string, user User) *Token {
	user.Provider = KindToken
	user.Credential = Fingerprint(KindToken, token)
	return &Token{token: []byte(token), user: user}
}

// Kind is "token".
func (*Token) Kind() string { return KindToken }

// AuthenticateToken compares in constant time, so that the answer's timing tells nothing of
// the token.
func (p *Token) AuthenticateToken(_ context.Context, token string) (*User, error) {
	if token == "" || subtle.ConstantTimeCompare([]byte(token), p.token) != 1 {
		return nil, nil
	}
	return copyUser(&p.user), nil
}

// Lookup knows the token's user only.
func (p *Token) Lookup(_ context.Context, name string) (*User, error) {
	if name != p.user.Name {
		return nil, nil
	}
	return copyUser(&p.user), nil
}

// ClaimsName claims the token's user's name: no other provider's user may have it.
func (p *Token) ClaimsName(name string) bool { return name == p.user.Name }
