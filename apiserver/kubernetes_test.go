package apiserver_test

import (
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Service accounts of a real API server through a real API server over real resources: each
// sees their own kernels, sessions and clusters, the admin by RBAC everyone's; a wrong token
// and the token of a deleted account are 403, and so is a deleted account's login cookie.
func TestKubernetes_EachServiceAccountSeesItsOwnAndTheAdminSeesAll(t *testing.T) {
	c, cfg := testenv.KubeClientConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(t, c)
	tokens := map[string]string{}
	for _, sa := range []string{"a", "b", "admin-sa", "gateway"} {
		tokens[sa] = testenv.ServiceAccountToken(t, cs, ns, sa)
	}
	testenv.Grant(t, cs, ns, "nbkube-admins", "admin-sa", "nbkube.io", "kernels", "delete")
	testenv.Grant(t, cs, ns, "nbkube-gateways", "gateway", identity.ActAsGroup, identity.ActAsResource, identity.ActAsVerb)
	owners := map[string]string{"a": "system:serviceaccount:" + ns + ":a", "b": "system:serviceaccount:" + ns + ":b"}
	createOwned(t, c, ns, owners)
	p, err := identity.NewKubernetes(identity.KubernetesOptions{TokenReviews: cs.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	s := ownedServer(t, c, ns, p)
	as := func(sa string) []string { return []string{"Authorization", "Bearer " + tokens[sa]} }
	checkEachSeesTheirOwn(t, s, owners, "a", "b", "admin-sa", as)

	me := s.do("GET", "/api/me", nil, as("gateway")...)
	if id, _ := me.json(t)["identity"].(map[string]any); id["username"] != "system:serviceaccount:"+ns+":gateway" || id["display_name"] != "gateway" {
		t.Errorf("the gateway's /api/me: %s", me.body)
	}
	// The gateway may act for others, but is no admin.
	expect(t, s.do("GET", "/api/kernels/k-a", nil, as("gateway")...), http.StatusNotFound)

	for _, tok := range []string{testToken, tokens["a"] + "x", tokens["a"][:len(tokens["a"])/2]} {
		expect(t, s.do("GET", "/api/kernels", nil, "Authorization", "Bearer "+tok), http.StatusForbidden)
	}

	// b logs in with a cookie; deleting its service account revokes its tokens, which ends
	// the cookie too, within the cache's TTL.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	expect(t, s.do("GET", "/api/status?token="+tokens["b"], nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusOK)
	time.Sleep(3 * authTTL) // past the cache: the cookie is re-validated with the API server
	expect(t, s.do("GET", "/api/kernels", nil, "Authorization", ""), http.StatusOK)
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyForbidden(t, s, tokens["b"])
	eventuallyForbidden(t, s, "")
	expect(t, s.do("GET", "/api/kernels", nil, as("a")...), http.StatusOK)
}

// A service account's open channels stay open while its token is good, and close when the
// account goes.
func TestKubernetes_DeletedServiceAccountsChannelsAreClosed(t *testing.T) {
	c, cfg := testenv.KubeClientConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(t, c)
	tokens := map[string]string{"a": testenv.ServiceAccountToken(t, cs, ns, "a"), "b": testenv.ServiceAccountToken(t, cs, ns, "b")}
	p, err := identity.NewKubernetes(identity.KubernetesOptions{TokenReviews: cs.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	s := kernelServer(t, nil, p)
	a, b := dialK1(t, s, "a", "Authorization", "Bearer "+tokens["a"]), dialK1(t, s, "b", "Authorization", "Bearer "+tokens["b"])
	checkRevocationClosesOnlyTheirs(t, a, b, func() {
		if err := cs.CoreV1().ServiceAccounts(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
