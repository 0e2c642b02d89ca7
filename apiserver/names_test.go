package apiserver_test

import (
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Names across providers: owners are bare names, so a user whose name another provider's user
// has would own that user's kernels, sessions and clusters. docs/users.md, "Names across
// providers".

// namesServer is ownedServerOn logging into log.
func namesServer(t *testing.T, l net.Listener, c client.Client, ns string, log *testenv.LogLines, providers ...identity.Provider) *testServer {
	t.Helper()
	return newServerOn(t, l, t.TempDir(), func(o *apiserver.Options) {
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs, StartTimeout: 30 * time.Second}
		o.Kernels = kernels
		o.Sessions = &repository.Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: kernels}
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
		o.KernelSpecs = specs
		o.Providers = providers
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
		o.Log = log.Logger()
	})
}

// expectClaimed checks a refusal of a user whose name another provider's user has: 403 with
// Jupyter's error naming the name, and the reason.
func expectClaimed(t *testing.T, r response, name string) {
	t.Helper()
	expect(t, r, http.StatusForbidden)
	body := r.json(t)
	if msg, _ := body["message"].(string); !strings.Contains(msg, "'"+name+"'") || !strings.Contains(msg, "username prefix") {
		t.Errorf("the refusal's message: %s", r.body)
	}
	if body["reason"] != "name claimed by another identity provider" {
		t.Errorf("the refusal's reason: %s", r.body)
	}
}

// serviceAccountA is a namespace with service account a, its token and name, and the
// kubernetes provider that vouches for it.
func serviceAccountA(t *testing.T) (c client.Client, ns string, kube identity.Provider, saToken, name string) {
	c, cfg := testenv.KubeClientConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns = testenv.Namespace(t, c)
	saToken = testenv.ServiceAccountToken(t, cs, ns, "a")
	kube, err = identity.NewKubernetes(identity.KubernetesOptions{TokenReviews: cs.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return c, ns, kube, saToken, "system:serviceaccount:" + ns + ":a"
}

// A service account whose name is the token's admin's (as a Hub's or an OpenID provider's
// user named admin would be the chart's token admin) is refused: by token and by login
// cookie, on every route, and the log says why; it never sees the admin's kernels. The
// admin's own token works as before.
func TestNames_AKubernetesUserNamedLikeTheTokensAdminIsRefused(t *testing.T) {
	c, ns, kube, saToken, name := serviceAccountA(t)
	createOwned(t, c, ns, map[string]string{"admin": name})
	var log testenv.LogLines
	s := namesServer(t, nil, c, ns, &log, identity.NewToken(testToken, identity.User{Name: name, Admin: true}), kube)

	for _, path := range []string{"/api/kernels", "/api/kernels/k-admin", "/api/sessions/s-admin", "/api/clusters/c-admin", "/api/me"} {
		expectClaimed(t, s.do("GET", path, nil, "Authorization", "Bearer "+saToken), name)
	}
	expectClaimed(t, s.do("DELETE", "/api/kernels/k-admin", nil, "Authorization", "Bearer "+saToken), name)
	if l := log.String(); !strings.Contains(l, "Refused a user whose name another identity provider's user has") ||
		!strings.Contains(l, `"provider"="kubernetes"`) || !strings.Contains(l, `"claimedBy"="token"`) || strings.Contains(l, saToken) {
		t.Errorf("the log of the refusals: %s", l)
	}
	// ?token= makes no login cookie for the refused user.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expectClaimed(t, s.do("GET", "/api/status?token="+url.QueryEscape(saToken), nil, "Authorization", ""), name)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusForbidden)
	s.hc.Jar = nil

	expect(t, s.do("GET", "/api/kernels/k-admin", nil, "Authorization", "token "+testToken), http.StatusOK)
}

// With a username prefix, the provider's users are apart from the token's admin of the same
// name: the prefixed name is who they are and the owner of what they make, their own name
// what pages show; the admin's kernels are not theirs. Their login cookie, re-checked by the
// prefixed name, keeps working.
func TestNames_APrefixPutsAProvidersUsersApart(t *testing.T) {
	c, ns, kube, saToken, name := serviceAccountA(t)
	createOwned(t, c, ns, map[string]string{"admin": name, "a": "k8s:" + name})
	var log testenv.LogLines
	s := namesServer(t, nil, c, ns, &log, identity.NewToken(testToken, identity.User{Name: name, Admin: true}), identity.WithUsernamePrefix(kube, "k8s:"))
	as := []string{"Authorization", "Bearer " + saToken}

	me := s.do("GET", "/api/me", nil, as...)
	if id, _ := me.json(t)["identity"].(map[string]any); me.status != http.StatusOK || id["username"] != "k8s:"+name || id["display_name"] != "a" {
		t.Errorf("the service account's /api/me: %d %s", me.status, me.body)
	}
	if got := kernelIDs(t, s.do("GET", "/api/kernels", nil, as...)); !slices.Equal(got, []string{"k-a"}) {
		t.Errorf("the service account's kernels: %v, want only k-a", got)
	}
	expect(t, s.do("GET", "/api/kernels/k-admin", nil, as...), http.StatusNotFound)
	// What they start is the prefixed name's.
	if err := c.Create(t.Context(), &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python3"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Python 3", Language: "python", Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}}); err != nil {
		t.Fatal(err)
	}
	playKernels(t, c, ns)
	started := s.do("POST", "/api/kernels", map[string]any{"name": "python3"}, as...)
	expect(t, started, http.StatusCreated)
	id, _ := started.json(t)["id"].(string)
	kn := &nbv1.Kernel{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id}, kn); err != nil {
		t.Fatal(err)
	}
	if kn.Spec.Owner != nbv1.Owner("k8s:"+name) || started.json(t)["owner"] != "k8s:"+name {
		t.Errorf("the started kernel's owner: spec %q, model %v", kn.Spec.Owner, started.json(t)["owner"])
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+url.QueryEscape(saToken), nil, "Authorization", ""), http.StatusOK)
	time.Sleep(3 * authTTL) // past the cache: the cookie is re-checked by its prefixed name
	expect(t, s.do("GET", "/api/kernels/k-a", nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/api/kernels/k-admin", nil, "Authorization", ""), http.StatusNotFound)
	if strings.Contains(log.String(), "Refused") {
		t.Errorf("a prefixed user was refused: %s", log.String())
	}
}

// A Hub user who logs in in their browser under the name of the token's admin is refused at
// the callback, with no login cookie, and the log says why.
func TestNames_ABrowserLoginUnderTheTokensAdminsNameIsRefused(t *testing.T) {
	c, _ := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := testenv.StartJupyterHub(t, testenv.HubConfig{Users: []string{"admin", "ann"},
		OAuthRedirectURL: "http://" + l.Addr().String() + "/oauth_callback"})
	createOwned(t, c, ns, map[string]string{"admin": "admin"})
	p, err := identity.NewJupyterHub(identity.JupyterHubOptions{APIURL: hub.APIURL, ServiceToken: hub.ServiceToken, AuthorizeURL: hub.AuthorizeURL})
	if err != nil {
		t.Fatal(err)
	}
	var log testenv.LogLines
	s := namesServer(t, l, c, ns, &log, p, identity.NewToken(testToken, identity.User{Name: "admin", Admin: true}))

	b, jar := newBrowser(t, s)
	r := b.do("GET", "/login?provider=jupyterhub", nil, "Authorization", "")
	back := hub.Login(t, r.header.Get("Location"), "admin")
	expectClaimed(t, b.do("GET", "/oauth_callback?"+back.RawQuery, nil, "Authorization", ""), "admin")
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, ck := range jar.Cookies(u) {
		if strings.HasPrefix(ck.Name, "nbkube-user-") {
			t.Errorf("the refused login set a login cookie")
		}
	}
	if l := log.String(); !strings.Contains(l, `"provider"="jupyterhub"`) || !strings.Contains(l, `"claimedBy"="token"`) {
		t.Errorf("the log of the refusal: %s", l)
	}
	// The Hub's API token of the same user is refused too; another Hub user logs in.
	tok, _ := hub.UserToken(t, "admin")
	expectClaimed(t, s.do("GET", "/api/kernels/k-admin", nil, "Authorization", "token "+tok), "admin")
	ann := browserLogin(t, s, identity.KindJupyterHub, func(loginURL string) *url.URL { return hub.Login(t, loginURL, "ann") })
	expect(t, s.do("GET", "/api/kernels/k-admin", nil, ann...), http.StatusNotFound)
}

// A user whose name a users file comes to have (re-read while the server runs) is refused
// from then on: their open channels close as a revoked user's do, and the other provider's
// users' stay open.
func TestNames_ChannelsCloseWhenTheUsersFileComesToHaveTheName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsersFile(t, path, map[string]string{"carol": userToken(t, "carol")})
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: authTTL})
	if err != nil {
		t.Fatal(err)
	}
	p := &changingUsers{tokens: map[string]string{"ann": "ann-token", "ben": "ben-token"}}
	s := kernelServer(t, nil, users, p)
	ann, ben := dialK1(t, s, "ann", "Authorization", "token ann-token"), dialK1(t, s, "ben", "Authorization", "token ben-token")
	checkRevocationClosesOnlyTheirs(t, ann, ben, func() {
		writeUsersFile(t, path, map[string]string{"carol": userToken(t, "carol"), "ann": userToken(t, "ann")})
	})
	expectClaimed(t, s.do("GET", "/api/kernels", nil, "Authorization", "token ann-token"), "ann")
}
