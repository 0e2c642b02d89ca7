package identity_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/identity"
)

func TestCache_WarmAnswersMakeNoProviderCallUntilTheyExpire(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	p := &counting{Provider: identity.NewToken("token-a", identity.User{Name: "alice", Groups: []string{"g"}})}
	c := identity.NewCache(identity.Chain{p}, identity.CacheOptions{TTL: 30 * time.Second, NegativeTTL: 5 * time.Second, Clock: clk})
	ctx := t.Context()

	for range 3 {
		u, err := c.AuthenticateToken(ctx, "token-a")
		if err != nil || u == nil || u.Name != "alice" {
			t.Fatalf("%+v, %v", u, err)
		}
		u.Groups[0] = "changed by a caller"
	}
	if p.tokens != 1 {
		t.Errorf("%d provider calls for three requests within the TTL, want 1", p.tokens)
	}
	if u, _ := c.AuthenticateToken(ctx, "token-a"); u.Groups[0] != "g" {
		t.Errorf("a caller changed the cached user: %v", u.Groups)
	}
	clk.SetTime(clk.Now().Add(31 * time.Second))
	if _, err := c.AuthenticateToken(ctx, "token-a"); err != nil || p.tokens != 2 {
		t.Errorf("after the TTL: %d calls (%v), want 2", p.tokens, err)
	}

	// Bad tokens are remembered briefly: a flood of one costs one call.
	for range 100 {
		if u, err := c.AuthenticateToken(ctx, "wrong"); u != nil || err != nil {
			t.Fatalf("wrong token: %+v %v", u, err)
		}
	}
	if p.tokens != 3 {
		t.Errorf("%d calls after 100 wrong tokens, want 3", p.tokens)
	}
	clk.SetTime(clk.Now().Add(6 * time.Second))
	_, _ = c.AuthenticateToken(ctx, "wrong")
	if p.tokens != 4 {
		t.Errorf("the negative answer outlived its TTL: %d calls, want 4", p.tokens)
	}

	// Lookups are cached the same way.
	for range 3 {
		if u, err := c.Lookup(ctx, identity.KindToken, "alice"); err != nil || u == nil {
			t.Fatalf("lookup: %+v %v", u, err)
		}
	}
	if p.lookups != 1 {
		t.Errorf("%d lookups, want 1", p.lookups)
	}
}

func TestCache_FailuresAreNotRemembered(t *testing.T) {
	p := &counting{Provider: identity.NewToken("token-a", identity.User{Name: "alice"}), fail: errors.New("down")}
	c := identity.NewCache(identity.Chain{p}, identity.CacheOptions{})
	if _, err := c.AuthenticateToken(t.Context(), "token-a"); !errors.Is(err, identity.ErrUnavailable) {
		t.Fatalf("provider down: %v", err)
	}
	p.fail = nil
	if u, err := c.AuthenticateToken(t.Context(), "token-a"); err != nil || u == nil {
		t.Fatalf("provider back: %+v %v", u, err)
	}
	if p.tokens != 2 {
		t.Errorf("%d calls, want 2", p.tokens)
	}
}

func TestCache_IsBoundedAndNeverKeysByTheToken(t *testing.T) {
	p := &counting{Provider: identity.NewToken("token-a", identity.User{Name: "alice"})}
	c := identity.NewCache(identity.Chain{p}, identity.CacheOptions{Size: 10})
	var tokens []string
	for i := range 50 {
		tok := fmt.Sprintf("guess-%02d-token", i)
		tokens = append(tokens, tok)
		_, _ = c.AuthenticateToken(t.Context(), tok)
	}
	_, _ = c.AuthenticateToken(t.Context(), "token-a")
	tokens = append(tokens, "token-a")
	keys := identity.CacheKeys(c)
	if len(keys) > 20 {
		t.Errorf("%d entries, bound 10 good and 10 bad", len(keys))
	}
	for _, k := range keys {
		for _, tok := range tokens {
			if strings.Contains(k, tok) {
				t.Errorf("cache key %q holds the token %q", k, tok)
			}
		}
	}
	// The most recent survives the bound.
	before := p.tokens
	_, _ = c.AuthenticateToken(t.Context(), "token-a")
	if p.tokens != before {
		t.Errorf("the most recent entry was evicted")
	}
}

func TestCache_AFloodOfBadTokensDoesNotPushOutTheGoodOnes(t *testing.T) {
	p := &counting{Provider: identity.NewToken("token-a", identity.User{Name: "alice"})}
	c := identity.NewCache(identity.Chain{p}, identity.CacheOptions{Size: 10})
	if u, err := c.AuthenticateToken(t.Context(), "token-a"); err != nil || u == nil {
		t.Fatalf("token-a: %+v %v", u, err)
	}
	for i := range 1000 {
		_, _ = c.AuthenticateToken(t.Context(), fmt.Sprintf("guess-%04d", i))
	}
	before := p.tokens
	if u, err := c.AuthenticateToken(t.Context(), "token-a"); err != nil || u == nil {
		t.Fatalf("token-a after the flood: %+v %v", u, err)
	}
	if p.tokens != before {
		t.Errorf("after 1000 bad tokens the good one costs a provider call again")
	}
	// The bad ones are bounded too, and the latest are remembered.
	if n := len(identity.CacheKeys(c)); n > 11 {
		t.Errorf("%d entries after the flood, want the good one and at most 10 bad", n)
	}
	_, _ = c.AuthenticateToken(t.Context(), "guess-0999")
	if p.tokens != before {
		t.Errorf("the latest bad token was not remembered")
	}
}

func TestCache_TTLIsAtMostAMinute(t *testing.T) {
	c := identity.NewCache(nil, identity.CacheOptions{TTL: time.Hour})
	if c.TTL() != time.Minute {
		t.Errorf("TTL %v, want a minute", c.TTL())
	}
}

// slow holds every call until released, counting them.
type slow struct {
	identity.Provider
	calls   atomic.Int32
	release chan struct{}
}

func (s *slow) AuthenticateToken(ctx context.Context, token string) (*identity.User, error) {
	s.calls.Add(1)
	<-s.release
	return s.Provider.AuthenticateToken(ctx, token)
}

func TestCache_ConcurrentMissesShareOneProviderCall(t *testing.T) {
	p := &slow{Provider: identity.NewToken("token-a", identity.User{Name: "alice"}), release: make(chan struct{})}
	c := identity.NewCache(identity.Chain{p}, identity.CacheOptions{})
	var wg sync.WaitGroup
	names := make(chan string, 20)
	for range 20 {
		wg.Go(func() {
			u, err := c.AuthenticateToken(t.Context(), "token-a")
			if err != nil || u == nil {
				names <- fmt.Sprint(err)
				return
			}
			names <- u.Name
		})
	}
	// Let the callers reach the provider before it answers.
	for p.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(p.release)
	wg.Wait()
	close(names)
	for n := range names {
		if n != "alice" {
			t.Errorf("a caller got %q", n)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("%d provider calls for 20 concurrent misses, want 1", n)
	}
}
