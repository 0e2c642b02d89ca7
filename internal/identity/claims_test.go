package identity_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// hubLike is a provider whose names are chosen elsewhere, as a Hub's or an OpenID provider's
// are: it claims none (counting hides the token provider's ClaimsName), and it vouches for
// whatever name its token says, here root, the name of the token's admin.
func hubLike() *counting {
	return &counting{Provider: other{identity.NewToken("hub-token", identity.User{Name: "root"})}}
}

func TestChain_ANameTheTokensUserHasIsRefusedToOtherProviders(t *testing.T) {
	ctx := t.Context()
	admin := identity.NewToken("admin-token", identity.User{Name: "root", Admin: true})
	chain := identity.Chain{admin, hubLike()}

	var claimed *identity.ClaimedNameError
	u, err := chain.AuthenticateToken(ctx, "hub-token")
	if u != nil || !errors.As(err, &claimed) || claimed.Name != "root" || claimed.Provider != "other" || claimed.ClaimedBy != identity.KindToken {
		t.Fatalf("the other provider's root: %+v, %v; want a ClaimedNameError", u, err)
	}
	if u, err := chain.Lookup(ctx, "other", "root"); u != nil || !errors.As(err, &claimed) {
		t.Fatalf("a login of the other provider's root: %+v, %v", u, err)
	}
	// The token's own user is theirs.
	if u, err := chain.AuthenticateToken(ctx, "admin-token"); err != nil || u == nil || u.Name != "root" || !u.Admin {
		t.Fatalf("the token's root: %+v, %v", u, err)
	}
}

func TestChain_AUsersFileNameIsRefusedToOtherProviders(t *testing.T) {
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t, testUser{name: "root", token: newToken(t, "root")})})
	users, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var claimed *identity.ClaimedNameError
	if u, err := (identity.Chain{users, hubLike()}).AuthenticateToken(t.Context(), "hub-token"); u != nil || !errors.As(err, &claimed) || claimed.ClaimedBy != identity.KindUsers {
		t.Fatalf("the other provider's root beside the file's: %+v, %v", u, err)
	}
}

func TestWithUsernamePrefix_PrefixedNamesAreTheProvidersOwnApart(t *testing.T) {
	ctx := t.Context()
	hub := hubLike()
	chain := identity.Chain{identity.NewToken("admin-token", identity.User{Name: "root", Admin: true}), identity.WithUsernamePrefix(hub, "hub:")}
	u, err := chain.AuthenticateToken(ctx, "hub-token")
	if err != nil || u == nil || u.Name != "hub:root" || u.Display() != "root" || u.Admin || u.Provider != "other" {
		t.Fatalf("the other provider's root with a prefix: %+v, %v", u, err)
	}
	if u, err := chain.Lookup(ctx, "other", "hub:root"); err != nil || u == nil || u.Name != "hub:root" {
		t.Fatalf("the prefixed name looked up: %+v, %v", u, err)
	}
	// The provider is asked for its own name; names without the prefix are none of its.
	lookups := hub.lookups
	for _, name := range []string{"root", "hub:", "other:root"} {
		if u, err := chain.Lookup(ctx, "other", name); u != nil || err != nil {
			t.Errorf("Lookup(%q): %+v, %v", name, u, err)
		}
	}
	if hub.lookups != lookups {
		t.Errorf("names without the prefix reached the provider")
	}
	if identity.WithUsernamePrefix(hub, "") != identity.Provider(hub) {
		t.Errorf("an empty prefix wraps the provider")
	}
}

func TestCheckUsernamePrefix(t *testing.T) {
	for _, ok := range []string{"hub:", "oidc-", "k8s:", "a"} {
		if err := identity.CheckUsernamePrefix(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ":x", "a/b", "hub ", ".hub", strings.Repeat("a", 64)} {
		if err := identity.CheckUsernamePrefix(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// A refused name is remembered as briefly as a wrong token: a refused user's requests cost no
// provider call each.
func TestCache_RemembersARefusedName(t *testing.T) {
	hub := hubLike()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := identity.NewCache(identity.Chain{identity.NewToken("admin-token", identity.User{Name: "root"}), hub},
		identity.CacheOptions{TTL: 10 * time.Second, NegativeTTL: 5 * time.Second, Clock: clk})
	var claimed *identity.ClaimedNameError
	for range 3 {
		if u, err := c.AuthenticateToken(t.Context(), "hub-token"); u != nil || !errors.As(err, &claimed) {
			t.Fatalf("%+v, %v", u, err)
		}
	}
	if hub.tokens != 1 {
		t.Errorf("%d provider calls for three requests", hub.tokens)
	}
	clk.SetTime(clk.Now().Add(6 * time.Second))
	if _, err := c.AuthenticateToken(t.Context(), "hub-token"); !errors.As(err, &claimed) || hub.tokens != 2 {
		t.Errorf("after the negative TTL: %v, %d calls", err, hub.tokens)
	}
}

func TestUsersFile_ANameReservedToAnotherProvidersUserIsRefused(t *testing.T) {
	reserved := map[string]string{"root": "the token's user"}
	root := newToken(t, "root")
	v := newSecretVolume(t, map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", token: newToken(t, "ann")}, testUser{name: "root", token: root})})
	_, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{Reserved: reserved})
	if err == nil || !strings.Contains(err.Error(), `"root"`) || !strings.Contains(err.Error(), "the token's user") {
		t.Fatalf("a file naming the token's user at start: %v", err)
	}

	// Added later, the name makes the file not valid: the last good version stays.
	v.update(map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", token: newToken(t, "ann")})})
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var logs testenv.LogLines
	p, err := identity.NewUsersFile(filepath.Join(v.dir, "users.yaml"), identity.UsersFileOptions{Reserved: reserved, Clock: clk, CheckEvery: time.Second, Log: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	v.update(map[string]string{"users.yaml": usersYAML(t, testUser{name: "ann", token: newToken(t, "ann")}, testUser{name: "root", token: root})})
	clk.SetTime(clk.Now().Add(time.Second))
	if u, err := p.AuthenticateToken(t.Context(), root); u != nil || err != nil {
		t.Errorf("the file's root after a reload: %+v, %v", u, err)
	}
	if p.ClaimsName("root") || !p.ClaimsName("ann") {
		t.Errorf("the file claims root or not ann")
	}
	if l := logs.String(); !strings.Contains(l, "not valid") || !strings.Contains(l, "the token's user") {
		t.Errorf("log of the refused file: %s", l)
	}
}
