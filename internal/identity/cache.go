package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// Cache defaults: a user removed or rotated in a provider loses access within TTL.
const (
	DefaultCacheTTL         = 30 * time.Second
	DefaultNegativeCacheTTL = 5 * time.Second
	DefaultCacheSize        = 4096
	// MaxCacheTTL bounds the TTLs: revocation must take effect within a minute.
	MaxCacheTTL = time.Minute
)

// CacheOptions bound a Cache.
type CacheOptions struct {
	// TTL is how long a provider's positive answer is reused; DefaultCacheTTL when zero,
	// at most MaxCacheTTL.
	TTL time.Duration
	// NegativeTTL is how long "no such token" or "no such user" is reused, so that a
	// flood of one bad token costs no provider calls; DefaultNegativeCacheTTL when zero.
	NegativeTTL time.Duration
	// Size bounds the entries of each kind, positive and negative; DefaultCacheSize when
	// zero.
	Size int
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
}

// Cache remembers a Chain's answers for a short while, so that a request whose token or
// login was checked recently makes no provider call. Tokens are keyed by their SHA-256, never
// kept themselves. Provider failures are not remembered: the next request asks again. A user
// refused for a claimed name (ClaimedNameError) is remembered as a negative answer, with
// its error, so that a refused user's requests cost no provider call either. Requests
// that miss the cache for the same key at once share one provider call, so that a page's
// burst of requests after the TTL costs one call, not one each. Negative answers are kept
// apart from positive ones, each bounded on its own: a flood of made-up tokens pushes out
// only other made-up tokens, never the users who logged in, whose next request would cost
// a provider call (a hash) each in the middle of the flood.
type Cache struct {
	chain       Chain
	ttl, negTTL time.Duration
	entries     *cache.LRUExpireCache
	negatives   *cache.LRUExpireCache
	inFlight    singleflight.Group
}

type cached struct{ user *User }

// NewCache puts a cache in front of chain.
func NewCache(chain Chain, o CacheOptions) *Cache {
	if o.TTL <= 0 {
		o.TTL = DefaultCacheTTL
	}
	o.TTL = min(o.TTL, MaxCacheTTL)
	if o.NegativeTTL <= 0 {
		o.NegativeTTL = DefaultNegativeCacheTTL
	}
	o.NegativeTTL = min(o.NegativeTTL, o.TTL)
	if o.Size <= 0 {
		o.Size = DefaultCacheSize
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Cache{chain: chain, ttl: o.TTL, negTTL: o.NegativeTTL, entries: cache.NewLRUExpireCacheWithClock(o.Size, o.Clock),
		negatives: cache.NewLRUExpireCacheWithClock(o.Size, o.Clock)}
}

// Chain is the chain the cache asks.
func (c *Cache) Chain() Chain { return c.chain }

// TTL is how long a positive answer is reused.
func (c *Cache) TTL() time.Duration { return c.ttl }

// tokenKey names a token in the cache without holding it.
func tokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "t:" + hex.EncodeToString(sum[:])
}

func userKey(kind, name string) string { return "u:" + kind + "\x00" + name }

// AuthenticateToken is the chain's answer for the token, from the cache when fresh.
func (c *Cache) AuthenticateToken(ctx context.Context, token string) (*User, error) {
	if token == "" {
		return nil, nil
	}
	return c.get(tokenKey(token), func() (*User, error) { return c.chain.AuthenticateToken(ctx, token) })
}

// Lookup is the chain's answer for the user of that provider kind, from the cache when fresh.
func (c *Cache) Lookup(ctx context.Context, kind, name string) (*User, error) {
	return c.get(userKey(kind, name), func() (*User, error) { return c.chain.Lookup(ctx, kind, name) })
}

func (c *Cache) get(key string, ask func() (*User, error)) (*User, error) {
	if v, ok := c.entries.Get(key); ok {
		return copyUser(v.(cached).user), nil
	}
	if v, ok := c.negatives.Get(key); ok {
		refused, _ := v.(error)
		return nil, refused
	}
	v, err, _ := c.inFlight.Do(key, func() (any, error) {
		u, err := ask()
		if claimed := (*ClaimedNameError)(nil); errors.As(err, &claimed) {
			c.negatives.Add(key, err, c.negTTL)
		}
		if err != nil {
			return nil, err
		}
		if u == nil {
			c.negatives.Add(key, struct{}{}, c.negTTL)
		} else {
			c.entries.Add(key, cached{copyUser(u)}, c.ttl)
		}
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	return copyUser(v.(*User)), nil
}

// copyUser keeps callers from changing what the cache holds.
func copyUser(u *User) *User {
	if u == nil {
		return nil
	}
	c := *u
	c.Groups = append([]string(nil), u.Groups...)
	return &c
}
