// Package identity says who makes a request, for the API server and the repositories that
// scope what a user sees.
package identity

// User is who makes a request.
type User struct {
	// Name identifies the user; resources record it as their owner.
	Name string
	// Admin users see and touch everyone's resources.
	Admin bool
}

// Owns reports whether the user may see and touch a resource of owner.
func (u User) Owns(owner string) bool { return u.Admin || u.Name == owner }
