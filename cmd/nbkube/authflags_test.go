package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

func parseAuth(t *testing.T, args ...string) (*apiFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f apiFlags
	f.bind(fs, "")
	return &f, fs.Parse(args)
}

// annUsersFile writes a users file of one user, ann, and returns her token and its path.
func annUsersFile(t *testing.T) (token, path string) {
	t.Helper()
	token = "nbk_ann_" + strings.Repeat("A", 40)
	h, err := identity.HashSecret(token)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte("users:\n- name: ann\n  token_hash: '"+h+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return token, path
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

	tok, path := annUsersFile(t)
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

// The API server as the binary builds it, with --auth=kubernetes alone, over a real
// control plane (what `nbkube local` runs): the cluster's service accounts are its users,
// and the --token is not.
func TestAuthFlag_KubernetesServesTheClustersServiceAccounts(t *testing.T) {
	c, cfg, ns, saToken := serviceAccountCI(t)
	me := serveAPI(t, cfg, c, ns, identity.User{Name: "admin", Admin: true}, "--auth=kubernetes", "--token=the-token")
	status, body := me(saToken)
	if id, _ := body["identity"].(map[string]any); status != http.StatusOK || id["username"] != "system:serviceaccount:"+ns+":ci" {
		t.Errorf("the service account's /api/me: %d %v", status, body)
	}
	if status, _ := me("the-token"); status != http.StatusForbidden {
		t.Errorf("--token without --auth=token: %d", status)
	}
}

// serveAPI runs the API server as the binary builds it from args over the control plane of
// cfg, the token's user being u, and returns a function asking its /api/me with a bearer
// token.
func serveAPI(t *testing.T, cfg *rest.Config, c client.Client, ns string, u identity.User, args ...string) func(token string) (int, map[string]any) {
	t.Helper()
	call := startAPI(t, cfg, c, ns, u, args...)
	return func(token string) (int, map[string]any) {
		t.Helper()
		return call(http.MethodGet, "api/me", token)
	}
}

// startAPI runs the API server as the binary builds it from args over the control plane of
// cfg, the token's user being u, and returns a function making a request of it without a
// body, with a bearer token, and decoding its JSON answer.
func startAPI(t *testing.T, cfg *rest.Config, c client.Client, ns string, u identity.User, args ...string) func(method, path, token string) (int, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	f, err := parseAuth(t, append(args, "--root="+dir, "--cookie-secret-file="+filepath.Join(dir, "cookie"))...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A registry of its own for the server's metrics, which register once per registry.
	registry := ctrlmetrics.Registry
	ctrlmetrics.Registry = prometheus.NewRegistry()
	t.Cleanup(func() { ctrlmetrics.Registry = registry })
	urls := make(chan string, 1)
	r, err := newAPIRunnable(f, cfg, c, nil, c, ns, nil, u, nil, l, func(url string) { urls <- url })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		t.Fatal(err)
	}
	return func(method, path, token string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
}

func TestAPIFlags_TrustedProxiesAreAddressesOrCIDRs(t *testing.T) {
	f, err := parseAuth(t, "--trusted-proxies=10.42.0.0/16, 192.0.2.7,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range f.trustedProxies {
		got = append(got, p.String())
	}
	if strings.Join(got, " ") != "10.42.0.0/16 192.0.2.7/32 fd00::/8" {
		t.Errorf("trusted proxies %v", got)
	}
	for _, bad := range []string{"--trusted-proxies=ingress", "--trusted-proxies=10.0.0.0/99"} {
		if _, err := parseAuth(t, bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestAuthFlag_MultiUserIsAnyProviderButTheToken(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		multi bool
	}{
		{nil, false},
		{[]string{"--auth=token"}, false},
		{[]string{"--auth=users,token", "--users-file=x"}, true},
		{[]string{"--auth=kubernetes,token"}, true},
		{[]string{"--auth=oidc"}, true},
	} {
		f, err := parseAuth(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.auth.multiUser(); got != tc.multi {
			t.Errorf("%v: multiUser %v, want %v", tc.args, got, tc.multi)
		}
	}
}

// serviceAccountCI is a real control plane with a namespace and its service account ci's
// token.
func serviceAccountCI(t *testing.T) (client.Client, *rest.Config, string, string) {
	c, cfg := testenv.KubeClientConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(t, c)
	return c, cfg, ns, testenv.ServiceAccountToken(t, cs, ns, "ci")
}
