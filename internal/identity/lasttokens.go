package identity

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// lastTokens remembers, per user name, the last good token this process saw, for the Lookup
// of providers that cannot look a user up by name (Kubernetes, OpenID Connect): Lookup asks
// the provider about that token again. Only the most recent users are kept, each for a while;
// a user pushed out, or whose token went, is not found, as if the token had gone.
type lastTokens struct {
	tokens *cache.LRUExpireCache
	keep   time.Duration
	// review is the provider's user of a token; nil when the provider refuses it.
	review func(ctx context.Context, token string) (*User, error)
}

func newLastTokens(size int, keep time.Duration, clk clock.PassiveClock, review func(context.Context, string) (*User, error)) *lastTokens {
	return &lastTokens{tokens: cache.NewLRUExpireCacheWithClock(size, clk), keep: keep, review: review}
}

// remember records token as user's last good one.
func (l *lastTokens) remember(user, token string) { l.tokens.Add(user, token, l.keep) }

// authenticate reviews token and remembers it when it is good.
func (l *lastTokens) authenticate(ctx context.Context, token string) (*User, error) {
	if token == "" {
		return nil, nil
	}
	u, err := l.review(ctx, token)
	if err != nil || u == nil {
		return nil, err
	}
	l.remember(u.Name, token)
	return u, nil
}

// lookup reviews the user's last token again; nil when none is kept or it is no longer
// the user's.
func (l *lastTokens) lookup(ctx context.Context, name string) (*User, error) {
	v, ok := l.tokens.Get(name)
	if !ok {
		return nil, nil
	}
	u, err := l.review(ctx, v.(string))
	if err != nil {
		return nil, err
	}
	if u == nil || u.Name != name {
		l.tokens.Remove(name)
		return nil, nil
	}
	return u, nil
}
