// Package homes renders where each user's home is on the contents volume, for the API server
// (which roots a user's contents there) and for kernel pods (which mount only it). A home is
// a template relative to the volume, such as "{username}" or "users/{username}"; the empty
// template turns homes off, and every user shares the volume's root.
//
// A rendered home must name one directory below the volume for one user, whatever name a
// provider let through: so the template and the rendered path are both checked to be clean
// relative paths without "." or ".." components, without hidden components (which the
// contents store refuses, and one of which is the store's own .nbkube), and a user name may
// not contain a slash, which would make one user's home a directory inside another's.
package homes

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Placeholder is replaced by the user's name in a template.
const Placeholder = "{username}"

// Template is a checked home template; its zero value is homes off.
type Template struct {
	t string
}

// Parse checks a home template: empty (homes off), or a relative path whose components are
// plain names, containing Placeholder.
func Parse(t string) (Template, error) {
	if t == "" {
		return Template{}, nil
	}
	if !strings.Contains(t, Placeholder) {
		return Template{}, fmt.Errorf("home template %q does not contain %s", t, Placeholder)
	}
	if err := checkPath(strings.ReplaceAll(t, Placeholder, "u")); err != nil {
		return Template{}, fmt.Errorf("home template %q: %w", t, err)
	}
	return Template{t: t}, nil
}

// On reports whether users have homes.
func (t Template) On() bool { return t.t != "" }

// String is the template as configured.
func (t Template) String() string { return t.t }

// For is the home of user, relative to the volume's root; "" when homes are off.
func (t Template) For(user string) (string, error) {
	if !t.On() {
		return "", nil
	}
	if user == "" || strings.ContainsAny(user, "/\x00") || strings.HasPrefix(user, ".") {
		return "", fmt.Errorf("user name %q cannot name a home", user)
	}
	h := strings.ReplaceAll(t.t, Placeholder, user)
	if err := checkPath(h); err != nil {
		return "", fmt.Errorf("home of %q: %w", user, err)
	}
	return h, nil
}

// Glob matches every home the template renders (path.Match syntax), for walking them; a
// user name with glob characters in it is matched too.
func (t Template) Glob() string {
	return strings.ReplaceAll(t.t, Placeholder, "*")
}

// checkPath accepts a relative path of plain, visible names.
func checkPath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return errors.New("not a clean relative path")
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, ".") {
			return fmt.Errorf("component %q is not a plain name", part)
		}
	}
	return nil
}
