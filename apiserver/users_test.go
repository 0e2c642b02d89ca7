package apiserver_test

import (
	"encoding/json"
	"errors"
	"fmt"
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

// The users provider against a real server over real resources: each user sees their own
// kernels, sessions and clusters, the admin everyone's.
func TestUsers_EachSeesTheirOwnAndTheAdminSeesAll(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	ctx := t.Context()
	for _, owner := range []string{"ann", "ben"} {
		for _, o := range []client.Object{
			&nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k-" + owner}, Spec: nbv1.KernelParameters{Owner: nbv1.Owner(owner), KernelSpec: "python3"}},
			&nbv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s-" + owner}, Spec: nbv1.SessionParameters{
				Owner: nbv1.Owner(owner), Path: owner + ".ipynb", Name: owner + ".ipynb", Type: "notebook", Kernel: nbv1.SessionKernel{Name: "k-" + owner}}},
			&nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c-" + owner}, Spec: nbv1.ClusterParameters{Owner: nbv1.Owner(owner), State: nbv1.ClusterStopped, Engines: 1}},
		} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	tokens := map[string]string{"ann": userToken(t, "ann"), "ben": userToken(t, "ben"), "root": userToken(t, "root")}
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsersFile(t, path, tokens, "root")
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *apiserver.Options) {
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs}
		o.Kernels = kernels
		o.Sessions = &repository.Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: kernels}
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
		o.KernelSpecs = specs
		o.Providers = []identity.Provider{users}
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
	})
	as := func(user string) []string { return []string{"Authorization", "token " + tokens[user]} }
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
		for user, want := range map[string][]string{"ann": {l.prefix + "ann"}, "ben": {l.prefix + "ben"}, "root": {l.prefix + "ann", l.prefix + "ben"}} {
			r := s.do("GET", l.path, nil, as(user)...)
			expect(t, r, http.StatusOK)
			if got := ids(r, l.key); !slices.Equal(got, want) {
				t.Errorf("%s lists %s: %v, want %v", user, l.path, got, want)
			}
		}
	}
	// The admin tells whose each is by its owner.
	for _, l := range lists {
		r := s.do("GET", l.path, nil, as("root")...)
		var list []map[string]any
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatal(err)
		}
		for _, m := range list {
			if id := fmt.Sprint(m[l.key]); m["owner"] != strings.TrimPrefix(id, l.prefix) {
				t.Errorf("%s: %s has owner %v", l.path, id, m["owner"])
			}
		}
	}
	var sess struct {
		Owner  string
		Kernel struct{ Owner string }
	}
	if err := json.Unmarshal(s.do("GET", "/api/sessions/s-ben", nil, as("root")...).body, &sess); err != nil || sess.Owner != "ben" || sess.Kernel.Owner != "ben" {
		t.Errorf("ben's session as the admin sees it: %+v %v", sess, err)
	}
	legacy := s.do("GET", "/kernels", nil, as("ben")...)
	if expect(t, legacy, http.StatusOK); strings.Contains(string(legacy.body), "k-ann") {
		t.Errorf("ben's /kernels lists ann's: %s", legacy.body)
	}
	for _, p := range []string{"/api/kernels/k-ann", "/kernels/k-ann", "/api/sessions/s-ann", "/api/clusters/c-ann", "/clusters/c-ann"} {
		expect(t, s.do("GET", p, nil, as("ben")...), http.StatusNotFound)
		expect(t, s.do("GET", p, nil, as("root")...), http.StatusOK)
		expect(t, s.do("GET", p, nil, as("ann")...), http.StatusOK)
	}
	for _, p := range []string{"/api/kernels/k-ann/interrupt", "/kernels/k-ann/interrupt", "/api/clusters/c-ann/start"} {
		expect(t, s.do("POST", p, nil, as("ben")...), http.StatusNotFound)
	}
	expect(t, s.do("DELETE", "/api/sessions/s-ann", nil, as("ben")...), http.StatusNotFound)
	expect(t, s.do("DELETE", "/api/kernels/k-ann", nil, as("ben")...), http.StatusNotFound)
	ws := "ws" + strings.TrimPrefix(s.url, "http")
	for _, p := range []string{"/api/kernels/k-ann/channels", "/kernels/k-ann/shell"} {
		if _, resp, err := websocket.DefaultDialer.Dial(ws+p, http.Header{"Authorization": {"token " + tokens["ben"]}}); err == nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("ben's WebSocket to ann's kernel at %s: %v", p, resp)
		}
	}

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
	eventuallyStatus(t, s, old, http.StatusForbidden)
	eventuallyStatus(t, s, "", http.StatusForbidden)
	expect(t, s.do("GET", "/api/kernels", nil, as("ben")...), http.StatusOK)
	expect(t, s.do("GET", "/api/status?token="+tokens["ben"], nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusOK)
	delete(tokens, "ben")
	writeUsersFile(t, path, tokens, "root")
	eventuallyStatus(t, s, "", http.StatusForbidden)
	expect(t, s.do("GET", "/api/kernels", nil, as("ann")...), http.StatusOK)
}

// eventuallyStatus waits until GET /api/kernels with the token (the cookie alone when
// empty) answers status.
func eventuallyStatus(t *testing.T, s *testServer, token string, status int) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "token " + token
	}
	testenv.Eventually(t, fmt.Sprintf("GET /api/kernels answers %d", status), 10*time.Second, func() error {
		if r := s.do("GET", "/api/kernels", nil, "Authorization", auth); r.status != status {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
}
