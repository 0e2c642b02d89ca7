package identity

import (
	"fmt"
	"regexp"
)

// Names across providers. Resources record their owner by name alone, so two providers that
// vouch for the same name would give their two users one another's kernels, sessions, homes
// and quotas. The token's user and the users file's users are named by the installation's
// admins and known in advance: they claim their names (Claimer), and a user another provider
// vouches for under a claimed name is refused with ClaimedNameError. Providers whose names are
// chosen elsewhere (a Hub's sign-up, an OpenID provider, the cluster) claim nothing; a
// username prefix (WithUsernamePrefix) puts their users' names apart from everyone else's.

// Claimer is a provider that knows every name it vouches for without being asked with a
// credential: those names are its users', and no other provider's user may have one.
type Claimer interface {
	// ClaimsName reports whether one of the provider's users has that name.
	ClaimsName(name string) bool
}

// ClaimedNameError refuses a user whose name another provider's user has: owners are bare
// names, so they would own one another's resources.
type ClaimedNameError struct {
	// Name is the refused user's name; Provider is the kind of the provider that vouched for
	// them, ClaimedBy the kind of the provider whose user has the name.
	Name, Provider, ClaimedBy string
}

func (e *ClaimedNameError) Error() string {
	return fmt.Sprintf("the %s provider's user %q has the name of a user of the %s provider; a username prefix for %s tells them apart",
		e.Provider, e.Name, e.ClaimedBy, e.Provider)
}

// CheckClaims refuses u, whom the chain's provider of kind u.Provider vouched for, when a
// provider of another kind in the chain claims u's name. (An installation names each kind
// once; the chains of tests that hold several token providers hold them for several users.)
func (c Chain) CheckClaims(u *User) error {
	for _, q := range c {
		if q.Kind() == u.Provider {
			continue
		}
		if cl, ok := q.(Claimer); ok && cl.ClaimsName(u.Name) {
			return &ClaimedNameError{Name: u.Name, Provider: u.Provider, ClaimedBy: q.Kind()}
		}
	}
	return nil
}

// usernamePrefix is what a prefix may hold: what a name may (a users file's names, an OpenID
// provider's), and ":", which no users file name has, so that "hub:" sets a provider's names
// apart from the users file's and the token's for good.
var usernamePrefix = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+:-]{0,62}$`)

// CheckUsernamePrefix says why prefix cannot start names; nil when it can.
func CheckUsernamePrefix(prefix string) error {
	if !usernamePrefix.MatchString(prefix) {
		return fmt.Errorf("username prefix %q is not 1 to 63 letters, digits and .-_@+:, starting with a letter or digit", prefix)
	}
	return nil
}
