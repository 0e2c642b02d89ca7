package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"

	"github.com/nbkube/nbkube/internal/identity"
)

// usersFileOf writes a users file of those users, each with a token, and returns its path.
func usersFileOf(t *testing.T, names ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("users:\n")
	for _, n := range names {
		tok, err := identity.NewUserToken(n)
		if err != nil {
			t.Fatal(err)
		}
		h, err := identity.HashSecret(tok)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("- name: " + n + "\n  token_hash: '" + h + "'\n")
	}
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// `nbkube local`'s token admin is the machine's user, root here: a users file beside the
// token that names root would give its root the admin's kernels and homes, so the server does
// not start, and says why. A users file alone, or beside a token of another name, starts as
// before, its users' names the owners they were.
func TestAuthFlag_UsersFileMayNotNameTheTokensUser(t *testing.T) {
	root := identity.User{Name: "root", Admin: true}
	path := usersFileOf(t, "ann", "root")
	for _, auth := range []string{"--auth=users,token", "--auth=token,users"} {
		f, err := parseAuth(t, auth, "--users-file="+path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.auth.providers("tok", root, kubeAuth{}, logr.Discard())
		if err == nil || !strings.Contains(err.Error(), `"root"`) || !strings.Contains(err.Error(), "the token's user") {
			t.Errorf("%s: %v; want a refusal naming root and the token", auth, err)
		}
	}

	for _, tc := range []struct {
		auth string
		u    identity.User
	}{{"--auth=users", root}, {"--auth=users,token", identity.User{Name: "admin", Admin: true}}} {
		f, err := parseAuth(t, tc.auth, "--users-file="+path)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := f.auth.providers("tok", tc.u, kubeAuth{}, logr.Discard())
		if err != nil {
			t.Fatalf("%s with the token's user %s: %v", tc.auth, tc.u.Name, err)
		}
		if u, err := identity.Chain(ps).Lookup(t.Context(), identity.KindUsers, "root"); err != nil || u == nil || u.Name != "root" {
			t.Errorf("%s: the file's root: %+v, %v", tc.auth, u, err)
		}
	}
}

func TestAuthFlag_UsernamePrefixesAreChecked(t *testing.T) {
	kube := kubeAuth{config: &rest.Config{Host: "https://127.0.0.1:1"}, namespace: "nbkube"}
	for _, args := range [][]string{
		{"--auth=token", "--oidc-username-prefix=oidc:"},
		{"--auth=token", "--hub-username-prefix=hub:"},
		{"--auth=token", "--kubernetes-username-prefix=k8s:"},
		{"--auth=kubernetes", "--kubernetes-username-prefix=k8s/"},
		{"--auth=kubernetes", "--kubernetes-username-prefix=:"},
	} {
		f, err := parseAuth(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := f.auth.providers("tok", identity.User{Name: "admin"}, kube, logr.Discard()); err == nil {
			t.Errorf("%v: providers built", args)
		}
	}
	f, err := parseAuth(t, "--auth=kubernetes,token", "--kubernetes-username-prefix=k8s:")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := f.auth.providers("tok", identity.User{Name: "admin"}, kube, logr.Discard())
	if err != nil || len(ps) != 2 || ps[0].Kind() != identity.KindKubernetes {
		t.Fatalf("a prefixed kubernetes provider: %v, %v", ps, err)
	}
}

// Two providers whose names others choose, without prefixes, share their names: the start
// says so, once a prefix sets one apart it does not.
func TestAuthFlag_ProvidersSharingNamesAreWarnedOf(t *testing.T) {
	logged := func(args ...string) string {
		t.Helper()
		f, err := parseAuth(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		f.auth.warnSharedNames(funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
		return strings.Join(lines, "\n")
	}
	if l := logged("--auth=oidc,kubernetes,token"); !strings.Contains(l, "share their users' names") || !strings.Contains(l, `["oidc" "kubernetes"]`) {
		t.Errorf("oidc and kubernetes without prefixes: %q", l)
	}
	for _, args := range [][]string{
		{"--auth=oidc,kubernetes", "--kubernetes-username-prefix=k8s:"},
		{"--auth=oidc,users,token", "--users-file=x"},
	} {
		if l := logged(args...); l != "" {
			t.Errorf("%v: %q", args, l)
		}
	}
}

// The API server as the binary builds it, over a real control plane, its token's admin named
// as a service account is: the service account is refused (403), unless
// --kubernetes-username-prefix puts it apart, when it is the prefixed name.
func TestAuthFlag_AKubernetesUserIsApartFromTheTokensUserOnlyByAPrefix(t *testing.T) {
	c, cfg, ns, saToken := serviceAccountCI(t)
	name := "system:serviceaccount:" + ns + ":ci"
	admin := identity.User{Name: name, Admin: true}

	me := serveAPI(t, cfg, c, ns, admin, "--auth=kubernetes,token", "--token=the-token-of-at-least-32-characters")
	status, body := me(saToken)
	if status != http.StatusForbidden || body["reason"] != "name claimed by another identity provider" {
		t.Errorf("the service account named as the token's admin: %d %v", status, body)
	}
	if status, body := me("the-token-of-at-least-32-characters"); status != http.StatusOK {
		t.Errorf("the token's admin: %d %v", status, body)
	}

	me = serveAPI(t, cfg, c, ns, admin, "--auth=kubernetes,token", "--token=the-token-of-at-least-32-characters", "--kubernetes-username-prefix=k8s:")
	status, body = me(saToken)
	if id, _ := body["identity"].(map[string]any); status != http.StatusOK || id["username"] != "k8s:"+name {
		t.Errorf("the service account with a prefix: %d %v", status, body)
	}
}
