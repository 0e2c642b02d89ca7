package identity

import (
	"context"
	"errors"
	"fmt"
)

// Chain asks its providers in order; the first that knows a token answers for it.
type Chain []Provider

// AuthenticateToken returns the first provider's user for the token. A failing provider does
// not hide a later one that knows the token; when none knows it and one failed, the failure
// is the answer, since the token may have been that provider's.
func (c Chain) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	return c.first(func(p Provider) (*User, error) { return p.AuthenticateToken(ctx, token) })
}

// AuthenticatePassword asks the providers that check passwords, in order, as
// AuthenticateToken asks for tokens. Passwords are not cached: a login is rare, and a cache
// keyed by passwords would be one more place to guess them from.
func (c Chain) AuthenticatePassword(ctx context.Context, name, password string) (*User, error) {
	return c.first(func(p Provider) (*User, error) {
		if pp, ok := p.(PasswordProvider); ok {
			return pp.AuthenticatePassword(ctx, name, password)
		}
		return nil, nil
	})
}

// first asks the providers in order and returns the first user one vouches for, marked with
// its kind, unless another provider claims the user's name (a *ClaimedNameError: the
// credential was that provider's, so no later one is asked). Providers that fail do not stop
// the others; only when none vouches do their failures make the answer ErrUnavailable.
func (c Chain) first(ask func(Provider) (*User, error)) (*User, error) {
	var errs []error
	for _, p := range c {
		u, err := ask(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Kind(), err))
			continue
		}
		if u != nil {
			u.Provider = p.Kind()
			if err := c.CheckClaims(u); err != nil {
				return nil, err
			}
			return u, nil
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(errs...))
	}
	return nil, nil
}

// Lookup asks the provider of that kind for the user; nil when the provider is not in the
// chain any more, and a *ClaimedNameError when another provider claims the name now.
func (c Chain) Lookup(ctx context.Context, kind, name string) (*User, error) {
	for _, p := range c {
		if p.Kind() != kind {
			continue
		}
		u, err := p.Lookup(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, kind, err)
		}
		if u != nil {
			u.Provider = kind
			if err := c.CheckClaims(u); err != nil {
				return nil, err
			}
		}
		return u, nil
	}
	return nil, nil
}

// Browser is the chain's providers that log users in in their browsers, in order.
func (c Chain) Browser() []BrowserProvider {
	var b []BrowserProvider
	for _, p := range c {
		if bp, ok := p.(BrowserProvider); ok {
			b = append(b, bp)
		}
	}
	return b
}
