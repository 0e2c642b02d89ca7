package homes

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Claims names each user's own PersistentVolumeClaim, such as "home-{username}", for
// installations whose kernels mount a volume of the user's instead of their home's subPath of
// the shared contents volume: a volume that holds only the user's home (an NFS export of the
// home's directory, say) keeps even a kernel that escaped its container's mounts away from
// other homes. The claims are the admin's: each must be bound to a volume whose root is the
// same directory as the user's home on the contents volume, which the API server serves. The
// zero value is off.
type Claims struct {
	t string
}

// ParseClaims checks a claim template: empty (off), or a template containing Placeholder
// that renders a valid object name.
func ParseClaims(t string) (Claims, error) {
	if t == "" {
		return Claims{}, nil
	}
	if !strings.Contains(t, Placeholder) {
		return Claims{}, fmt.Errorf("claim template %q does not contain %s", t, Placeholder)
	}
	if errs := validation.IsDNS1123Subdomain(strings.ReplaceAll(t, Placeholder, "u")); len(errs) > 0 {
		return Claims{}, fmt.Errorf("claim template %q: %s", t, strings.Join(errs, "; "))
	}
	return Claims{t: t}, nil
}

// On reports whether users may have claims of their own.
func (c Claims) On() bool { return c.t != "" }

// String is the template as configured.
func (c Claims) String() string { return c.t }

// For is the name of user's claim. A name that makes no object name is refused rather than
// changed: folding "Ann" to "ann" would give two users one volume.
func (c Claims) For(user string) (string, error) {
	if !c.On() {
		return "", nil
	}
	if user == "" || strings.Contains(user, "/") {
		return "", fmt.Errorf("user name %q cannot name a claim", user)
	}
	name := strings.ReplaceAll(c.t, Placeholder, user)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("user name %q makes no claim name from %q: %s", user, c.t, strings.Join(errs, "; "))
	}
	return name, nil
}
