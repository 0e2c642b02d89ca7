package identity_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nbkube/nbkube/internal/identity"
)

// counting counts the calls that reach a provider; fail makes it fail like a provider that
// is down.
type counting struct {
	identity.Provider
	tokens, lookups int
	fail            error
}

func (c *counting) AuthenticateToken(ctx context.Context, token string) (*identity.User, error) {
	c.tokens++
	if c.fail != nil {
		return nil, c.fail
	}
	return c.Provider.AuthenticateToken(ctx, token)
}

func (c *counting) Lookup(ctx context.Context, name string) (*identity.User, error) {
	c.lookups++
	if c.fail != nil {
		return nil, c.fail
	}
	return c.Provider.Lookup(ctx, name)
}

// other is a second provider kind, a token provider under another name.
type other struct{ *identity.Token }

func (other) Kind() string { return "other" }

func TestChain_FirstProviderThatKnowsTheTokenWins(t *testing.T) {
	a := identity.NewToken("token-a", identity.User{Name: "alice"})
	b := other{identity.NewToken("token-b", identity.User{Name: "bob", Admin: true})}
	chain := identity.Chain{a, b}
	ctx := t.Context()

	u, err := chain.AuthenticateToken(ctx, "token-b")
	if err != nil || u == nil || u.Name != "bob" || !u.Admin || u.Provider != "other" {
		t.Fatalf("token-b: %+v, %v", u, err)
	}
	u, err = chain.AuthenticateToken(ctx, "token-a")
	if err != nil || u == nil || u.Name != "alice" || u.Provider != identity.KindToken {
		t.Fatalf("token-a: %+v, %v", u, err)
	}
	if u, err := chain.AuthenticateToken(ctx, "token-c"); u != nil || err != nil {
		t.Fatalf("unknown token: %+v, %v", u, err)
	}
	// Lookup goes to the provider that vouched, not to another that knows the name.
	if u, err := chain.Lookup(ctx, "other", "alice"); u != nil || err != nil {
		t.Fatalf("alice by other: %+v, %v", u, err)
	}
	if u, err := chain.Lookup(ctx, "other", "bob"); u == nil || err != nil || u.Name != "bob" {
		t.Fatalf("bob by other: %+v, %v", u, err)
	}
	if u, err := chain.Lookup(ctx, "gone", "bob"); u != nil || err != nil {
		t.Fatalf("a provider no longer configured: %+v, %v", u, err)
	}
}

func TestChain_AFailingProviderIsAnErrorOnlyWhenNoOtherKnowsTheToken(t *testing.T) {
	down := &counting{Provider: other{identity.NewToken("x", identity.User{Name: "x"})}, fail: errors.New("connection refused")}
	chain := identity.Chain{down, identity.NewToken("token-a", identity.User{Name: "alice"})}
	if u, err := chain.AuthenticateToken(t.Context(), "token-a"); err != nil || u == nil || u.Name != "alice" {
		t.Fatalf("known to the second provider: %+v, %v", u, err)
	}
	u, err := chain.AuthenticateToken(t.Context(), "nobodys")
	if u != nil || !errors.Is(err, identity.ErrUnavailable) {
		t.Fatalf("unknown token with a provider down: %+v, %v; want ErrUnavailable", u, err)
	}
	if _, err := chain.Lookup(t.Context(), "other", "x"); !errors.Is(err, identity.ErrUnavailable) {
		t.Fatalf("lookup at a provider that is down: %v", err)
	}
}

func TestToken_CredentialFingerprintChangesWithTheTokenAndHidesIt(t *testing.T) {
	a, _ := identity.NewToken("secret-one", identity.User{Name: "alice"}).Lookup(t.Context(), "alice")
	b, _ := identity.NewToken("secret-two", identity.User{Name: "alice"}).Lookup(t.Context(), "alice")
	if a.Credential == "" || a.Credential == b.Credential {
		t.Fatalf("fingerprints %q and %q", a.Credential, b.Credential)
	}
	for _, c := range []string{a.Credential, b.Credential} {
		if c == "secret-one" || c == "secret-two" {
			t.Fatalf("fingerprint is the token")
		}
	}
}
