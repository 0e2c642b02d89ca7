package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/nbkube/nbkube/internal/identity"
)

func parseAuth(t *testing.T, args ...string) (*apiFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f apiFlags
	f.bind(fs, "")
	return &f, fs.Parse(args)
}

func TestAuthFlag_TokenByDefaultAndProvidersInOrder(t *testing.T) {
	f, err := parseAuth(t)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := f.auth.providers("tok", identity.User{Name: "admin", Admin: true}, kubeAuth{}, logr.Discard())
	if err != nil || len(ps) != 1 || ps[0].Kind() != identity.KindToken {
		t.Fatalf("default providers: %v, %v", ps, err)
	}

	tok := "nbk_ann_" + strings.Repeat("A", 40)
	h, err := identity.HashSecret(tok)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte("users:\n- name: ann\n  token_hash: '"+h+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = parseAuth(t, "--auth=users,token", "--users-file="+path)
	if err != nil {
		t.Fatal(err)
	}
	ps, err = f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard())
	if err != nil || len(ps) != 2 || ps[0].Kind() != identity.KindUsers || ps[1].Kind() != identity.KindToken {
		t.Fatalf("users,token: %v, %v", ps, err)
	}
	if u, err := identity.Chain(ps).AuthenticateToken(t.Context(), tok); err != nil || u == nil || u.Name != "ann" {
		t.Errorf("ann's token through the flags' providers: %+v %v", u, err)
	}
}

func TestAuthFlag_KubernetesAsksTheProcessCluster(t *testing.T) {
	f, err := parseAuth(t, "--auth=kubernetes,token")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{config: &rest.Config{Host: "https://127.0.0.1:1"}, namespace: "nbkube"}, logr.Discard())
	if err != nil || len(ps) != 2 || ps[0].Kind() != identity.KindKubernetes || ps[1].Kind() != identity.KindToken {
		t.Fatalf("kubernetes,token: %v, %v", ps, err)
	}
	if _, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{namespace: "nbkube"}, logr.Discard()); err == nil {
		t.Error("kubernetes without a cluster: providers built")
	}
}

func TestAuthFlag_RefusesWhatCannotWork(t *testing.T) {
	for _, args := range [][]string{
		{"--auth=bogus"},
		{"--auth=oidc"},
		{"--auth=token,token"},
		{"--auth=,"},
	} {
		if _, err := parseAuth(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	broken := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(broken, []byte("users: [{name: ann}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--auth=users"},
		{"--auth=token", "--users-file=" + broken},
		{"--auth=users", "--users-file=" + broken},
		{"--auth=users", "--users-file=" + broken + ".missing"},
	} {
		f, err := parseAuth(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := f.auth.providers("tok", identity.User{Name: "admin"}, kubeAuth{}, logr.Discard()); err == nil {
			t.Errorf("%v: providers built", args)
		}
	}
}
