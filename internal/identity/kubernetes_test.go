package identity_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

func kubernetesProvider(t *testing.T, cs kubernetes.Interface, ns string) *identity.Kubernetes {
	t.Helper()
	p, err := identity.NewKubernetes(identity.KubernetesOptions{
		TokenReviews: cs.AuthenticationV1().TokenReviews(), SubjectAccessReviews: cs.AuthorizationV1().SubjectAccessReviews(), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Service account tokens of a real API server: the user is the account, its groups the
// API server's, admin and act-as what RBAC in nbkube's namespace grants.
func TestKubernetes_TokenReviewGivesTheUserAndRBACTheirRights(t *testing.T) {
	cs, err := kubernetes.NewForConfig(testenv.ControlPlane(t, false).RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := "nbkube"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, sa := range []string{"plain", "root", "gateway"} {
		tokens[sa] = testenv.ServiceAccountToken(t, cs, ns, sa)
	}
	testenv.Grant(t, cs, ns, "admins", "root", "nbkube.io", "kernels", "delete")
	testenv.Grant(t, cs, ns, "gateways", "gateway", identity.ActAsGroup, identity.ActAsResource, identity.ActAsVerb)
	p := kubernetesProvider(t, cs, ns)

	want := map[string]struct{ admin, actAs bool }{"plain": {}, "root": {admin: true}, "gateway": {actAs: true}}
	for sa, w := range want {
		u, err := p.AuthenticateToken(ctx, tokens[sa])
		if err != nil || u == nil {
			t.Fatalf("%s: %v %v", sa, u, err)
		}
		if u.Name != "system:serviceaccount:nbkube:"+sa || u.DisplayName != sa || u.Admin != w.admin || u.ActAs != w.actAs ||
			u.Provider != identity.KindKubernetes || u.Credential == "" {
			t.Errorf("%s: %+v", sa, u)
		}
		if !slices.Contains(u.Groups, "system:serviceaccounts:nbkube") || !slices.Contains(u.Groups, "system:authenticated") {
			t.Errorf("%s's groups: %v", sa, u.Groups)
		}
		again, err := p.Lookup(ctx, u.Name)
		if err != nil || again == nil || again.Credential != u.Credential || again.Admin != w.admin {
			t.Errorf("%s looked up: %+v %v", sa, again, err)
		}
	}
	for _, tok := range []string{"", "not-a-token", tokens["plain"] + "x"} {
		if u, err := p.AuthenticateToken(ctx, tok); u != nil || err != nil {
			t.Errorf("token %q: %v %v", tok, u, err)
		}
	}
	if u, err := p.Lookup(ctx, "system:serviceaccount:nbkube:never-seen"); u != nil || err != nil {
		t.Errorf("a user that never presented a token: %v %v", u, err)
	}

	// Another token of the same account is the same login; taking the admin right away shows
	// on the next look-up.
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "root", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.AuthenticateToken(ctx, tokens["root"])
	if err != nil {
		t.Fatal(err)
	}
	if u, err := p.AuthenticateToken(ctx, tr.Status.Token); err != nil || u == nil || u.Credential != first.Credential {
		t.Errorf("root's second token: %+v %v", u, err)
	}
	if err := cs.RbacV1().RoleBindings(ns).Delete(ctx, "admins", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u, err := p.Lookup(ctx, "system:serviceaccount:nbkube:root"); err != nil || u == nil || u.Admin {
		t.Errorf("root after its RoleBinding went: %+v %v", u, err)
	}

	// Deleting the account revokes its tokens: neither the token nor a look-up knows it.
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted account's token refused", 10*time.Second, func() error {
		if u, err := p.AuthenticateToken(ctx, tokens["plain"]); u != nil || err != nil {
			return errors.New("still accepted")
		}
		return nil
	})
	if u, err := p.Lookup(ctx, "system:serviceaccount:nbkube:plain"); u != nil || err != nil {
		t.Errorf("the deleted account looked up: %v %v", u, err)
	}
}

// An API server that does not answer is the provider's failure, not a wrong token.
func TestKubernetes_UnreachableAPIServerIsUnavailable(t *testing.T) {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := kubernetesProvider(t, cs, "nbkube").AuthenticateToken(t.Context(), "some-token")
	if u != nil || !errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("%v %v", u, err)
	}
}
