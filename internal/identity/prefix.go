package identity

import (
	"context"
	"strings"
)

// WithUsernamePrefix is p with prefix before the name of every user it vouches for, as
// Kubernetes' --oidc-username-prefix: the Hub's ann becomes "hub:ann", the owner of what she
// makes, and Lookup takes the prefixed name. The provider itself still sees its own names (a
// Hub is asked for "ann"). A user without a display name of their own shows the provider's
// name, without the prefix. An empty prefix is p itself. For providers whose users log in
// with a token or in their browser; a provider that checks passwords keeps its own names
// (the login form's name is the owner).
func WithUsernamePrefix(p Provider, prefix string) Provider {
	if prefix == "" {
		return p
	}
	base := &prefixed{Provider: p, prefix: prefix}
	if bp, ok := p.(BrowserProvider); ok {
		return &prefixedBrowser{prefixed: base, browser: bp}
	}
	return base
}

type prefixed struct {
	Provider
	prefix string
}

// add puts the prefix before u's name.
func (p *prefixed) add(u *User) *User {
	if u == nil {
		return nil
	}
	if u.DisplayName == "" {
		u.DisplayName = u.Name
	}
	u.Name = p.prefix + u.Name
	return u
}

func (p *prefixed) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	u, err := p.Provider.AuthenticateToken(ctx, token)
	return p.add(u), err
}

// Lookup knows only prefixed names: the provider's own name of the user is the rest.
func (p *prefixed) Lookup(ctx context.Context, name string) (*User, error) {
	own, ok := strings.CutPrefix(name, p.prefix)
	if !ok || own == "" {
		return nil, nil
	}
	u, err := p.Provider.Lookup(ctx, own)
	return p.add(u), err
}

// prefixedBrowser is a prefixed BrowserProvider: its logins' users are prefixed too.
type prefixedBrowser struct {
	*prefixed
	browser BrowserProvider
}

func (p *prefixedBrowser) LoginURL(redirectURL, state, verifier string) string {
	return p.browser.LoginURL(redirectURL, state, verifier)
}

func (p *prefixedBrowser) FinishLogin(ctx context.Context, redirectURL, code, verifier string) (*Login, error) {
	l, err := p.browser.FinishLogin(ctx, redirectURL, code, verifier)
	if l != nil {
		l.User = p.add(l.User)
	}
	return l, err
}

var _ BrowserProvider = (*prefixedBrowser)(nil)
