// Package identity says who makes a request, for the API server and the repositories that
// scope what a user sees.
//
// A Provider turns a credential into a User and re-validates a user by name; several are on
// at once in a Chain, and a Cache in front of the chain keeps the request path free of
// provider calls while its answers are fresh. Providers live one to a file (token.go,
// users.go, ...). The package knows nothing of HTTP handlers: the API server reads
// credentials from requests and asks here who they belong to.
package identity

// User is who makes a request.
type User struct {
	// Name identifies the user; resources record it as their owner.
	Name string
	// DisplayName is how pages show the user; Name when the provider has none.
	DisplayName string
	// Groups are the provider's groups of the user.
	Groups []string
	// Admin users see and touch everyone's resources.
	Admin bool
	// ActAs users may act for other users, as a gateway naming the kernel's user does.
	ActAs bool
	// Provider is the Kind of the provider that vouched for the user.
	Provider string
	// Credential fingerprints the user's credentials as the provider holds them now (never the
	// credential itself): a login that recorded another fingerprint has been rotated away.
	Credential string
}

// Owns reports whether the user may see and touch a resource of owner.
func (u User) Owns(owner string) bool { return u.Admin || u.Name == owner }

// Display is the name to show: DisplayName, else Name.
func (u User) Display() string {
	if u.DisplayName != "" {
		return u.DisplayName
	}
	return u.Name
}
