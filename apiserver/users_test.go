package apiserver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// usersFile writes a users file of name → (token, admin) and swaps it in atomically.
func writeUsersFile(t *testing.T, path string, users map[string]string, admins ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("users:\n")
	names := make([]string, 0, len(users))
	for n := range users {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h, err := identity.HashSecret(users[n])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "- name: %s\n  admin: %v\n  token_hash: %q\n", n, slices.Contains(admins, n), h)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func userToken(t *testing.T, name string) string {
	t.Helper()
	tok, err := identity.NewUserToken(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// createOwned makes, for each key of owners, the kernel k-<key>, the session s-<key> and the
// cluster c-<key>, all owned by owners[key].
func createOwned(t *testing.T, c client.Client, ns string, owners map[string]string) {
	t.Helper()
	for key, owner := range owners {
		for _, o := range []client.Object{
			&nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k-" + key}, Spec: nbv1.KernelParameters{Owner: nbv1.Owner(owner), KernelSpec: "python3"}},
			&nbv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s-" + key}, Spec: nbv1.SessionParameters{
				Owner: nbv1.Owner(owner), Path: key + ".ipynb", Name: key + ".ipynb", Type: "notebook", Kernel: nbv1.SessionKernel{Name: "k-" + key}}},
			&nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-" + key}, Spec: nbv1.ClusterParameters{Owner: nbv1.Owner(owner), State: nbv1.ClusterStopped, Engines: 1}},
		} {
			if err := c.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ownedServer is an API server over the real resources of ns whose users the providers know.
func ownedServer(t *testing.T, c client.Client, ns string, providers ...identity.Provider) *testServer {
	t.Helper()
	return ownedServerOn(t, nil, c, ns, providers...)
}

// ownedServerOn is ownedServer listening on l.
func ownedServerOn(t *testing.T, l net.Listener, c client.Client, ns string, providers ...identity.Provider) *testServer {
	t.Helper()
	return newServerOn(t, l, t.TempDir(), func(o *apiserver.Options) {
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs}
		o.Kernels = kernels
		o.Sessions = &repository.Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: kernels}
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
		o.KernelSpecs = specs
		o.Providers = providers
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
	})
}

// checkEachSeesTheirOwn checks, over what createOwned made for the keys a and b, that a and b
// see and touch only their own (by id, in lists, on the older routes and WebSockets) and that
// admin sees both with their owners; as(key) are the headers that authenticate as key's user.
func checkEachSeesTheirOwn(t *testing.T, s *testServer, owners map[string]string, a, b, admin string, as func(key string) []string) {
	t.Helper()
	ids := func(r response, key string) []string {
		t.Helper()
		var list []map[string]any
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		var out []string
		for _, m := range list {
			out = append(out, fmt.Sprint(m[key]))
		}
		slices.Sort(out)
		return out
	}
	lists := []struct{ path, key, prefix string }{
		{"/api/kernels", "id", "k-"}, {"/api/sessions", "id", "s-"}, {"/api/clusters", "profile", "c-"}, {"/clusters", "profile", "c-"},
	}
	for _, l := range lists {
		for user, want := range map[string][]string{a: {l.prefix + a}, b: {l.prefix + b}, admin: slices.Sorted(slices.Values([]string{l.prefix + a, l.prefix + b}))} {
			r := s.do("GET", l.path, nil, as(user)...)
			expect(t, r, http.StatusOK)
			if got := ids(r, l.key); !slices.Equal(got, want) {
				t.Errorf("%s lists %s: %v, want %v", user, l.path, got, want)
			}
		}
	}
	// The admin tells whose each is by its owner.
	for _, l := range lists {
		r := s.do("GET", l.path, nil, as(admin)...)
		var list []map[string]any
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if id := fmt.Sprint(m[l.key]); m["owner"] != owners[strings.TrimPrefix(id, l.prefix)] {
				t.Errorf("%s: %s has owner %v", l.path, id, m["owner"])
			}
		}
	}
	var sess struct {
		Owner  string
		Kernel struct{ Owner string }
	}
	if err := json.Unmarshal(s.do("GET", "/api/sessions/s-"+b, nil, as(admin)...).body, &sess); err != nil || sess.Owner != owners[b] || sess.Kernel.Owner != owners[b] {
		t.Errorf("%s's session as the admin sees it: %+v %v", b, sess, err)
	}
	legacy := s.do("GET", "/kernels", nil, as(b)...)
	if expect(t, legacy, http.StatusOK); strings.Contains(string(legacy.body), "k-"+a) {
		t.Errorf("%s's /kernels lists %s's: %s", b, a, legacy.body)
	}
	for _, p := range []string{"/api/kernels/k-", "/kernels/k-", "/api/sessions/s-", "/api/clusters/c-", "/clusters/c-"} {
		expect(t, s.do("GET", p+a, nil, as(b)...), http.StatusNotFound)
		expect(t, s.do("GET", p+a, nil, as(admin)...), http.StatusOK)
		expect(t, s.do("GET", p+a, nil, as(a)...), http.StatusOK)
	}
	for _, p := range []string{"/api/kernels/k-" + a + "/interrupt", "/kernels/k-" + a + "/interrupt", "/api/clusters/c-" + a + "/start"} {
		expect(t, s.do("POST", p, nil, as(b)...), http.StatusNotFound)
	}
	expect(t, s.do("DELETE", "/api/sessions/s-"+a, nil, as(b)...), http.StatusNotFound)
	expect(t, s.do("DELETE", "/api/kernels/k-"+a, nil, as(b)...), http.StatusNotFound)
	ws := "ws" + strings.TrimPrefix(s.url, "http")
	header := http.Header{}
	for i := 0; i+1 < len(as(b)); i += 2 {
		header.Set(as(b)[i], as(b)[i+1])
	}
	for _, p := range []string{"/api/kernels/k-" + a + "/channels", "/kernels/k-" + a + "/shell"} {
		if _, resp, err := websocket.DefaultDialer.Dial(ws+p, header); err == nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s's WebSocket to %s's kernel at %s: %v", b, a, p, resp)
		}
	}
}

// The users provider against a real server over real resources: each user sees their own
// kernels, sessions and clusters, the admin everyone's.
func TestUsers_EachSeesTheirOwnAndTheAdminSeesAll(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	owners := map[string]string{"ann": "ann", "ben": "ben"}
	createOwned(t, c, ns, owners)
	tokens := map[string]string{"ann": userToken(t, "ann"), "ben": userToken(t, "ben"), "root": userToken(t, "root")}
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsersFile(t, path, tokens, "root")
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := ownedServer(t, c, ns, users)
	as := func(user string) []string { return []string{"Authorization", "token " + tokens[user]} }
	checkEachSeesTheirOwn(t, s, owners, "ann", "ben", "root", as)

	// Wrong tokens are Jupyter's 403.
	for _, tok := range []string{testToken, tokens["ann"] + "x", strings.Replace(tokens["ann"], "_ann_", "_ben_", 1)} {
		expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "token "+tok), http.StatusForbidden)
	}

	// Ben logs in with a cookie; his token rotates: the new one works, the old one and his
	// cookie do not. Then he is removed.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+tokens["ben"], nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusOK)
	old := tokens["ben"]
	tokens["ben"] = userToken(t, "ben")
	writeUsersFile(t, path, tokens, "root")
	eventuallyForbidden(t, s, old)
	eventuallyForbidden(t, s, "")
	expect(t, s.do("GET", "/api/kernels", nil, as("ben")...), http.StatusOK)
	expect(t, s.do("GET", "/api/status?token="+tokens["ben"], nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusOK)
	delete(tokens, "ben")
	writeUsersFile(t, path, tokens, "root")
	eventuallyForbidden(t, s, "")
	expect(t, s.do("GET", "/api/kernels", nil, as("ann")...), http.StatusOK)
}

// eventuallyForbidden waits until GET /api/kernels with the token (the cookie alone when
// empty) answers 403.
func eventuallyForbidden(t *testing.T, s *testServer, token string) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "token " + token
	}
	testenv.Eventually(t, "GET /api/kernels answers 403", 10*time.Second, func() error {
		if r := s.do("GET", "/api/kernels", nil, "Authorization", auth); r.status != http.StatusForbidden {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
}
