package repository

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestEndpoint_NeedsOnlyTheAPIServersRole: a service account bound to the API server's role
// as make manifests generates it (the chart's) may read no Secret, and still finds a running
// kernel's agent with the token in the kernel's Secret.
func TestEndpoint_NeedsOnlyTheAPIServersRole(t *testing.T) {
	admin, sa, ns, _ := apiServersRole(t)
	ctx := t.Context()

	// A running kernel and its Secret, as the manager makes them.
	kn := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "k1"},
		Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3"}}
	if err := admin.Create(ctx, kn); err != nil {
		t.Fatal(err)
	}
	kn.Status.PodIP = "10.0.0.9"
	if err := admin.Status().Update(ctx, kn); err != nil {
		t.Fatal(err)
	}
	secret := builder.KernelSecret(kn, "hmac", agenttoken.Kernel(testAgentTokenKey, ns, kn.Name, string(kn.UID)))
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}

	if err := sa.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the API server's role reads the kernel's Secret: %v", err)
	}
	k := &Kernels{Reader: sa, Writer: sa, Namespace: ns, AgentTokenKey: testAgentTokenKey}
	e, err := k.Endpoint(ctx, identity.User{Name: "ann"}, kn.Name)
	if err != nil {
		t.Fatal(err)
	}
	if e.Host != "10.0.0.9" || e.Port != agentapi.Port || e.Token != string(secret.Data[agentapi.SecretKeyToken]) {
		t.Errorf("endpoint %s:%d with token %q; want the pod's, with the Secret's token %q", e.Host, e.Port, e.Token, secret.Data[agentapi.SecretKeyToken])
	}
}

// apiServersRole is an admin's client, a fresh namespace, and a client of a service account
// bound there to the API server's role as make manifests generates it (the chart's), and
// the admin's configuration.
func apiServersRole(t *testing.T) (admin, sa client.Client, ns string, cfg *rest.Config) {
	t.Helper()
	admin, cfg = testenv.KubeClientConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns = testenv.Namespace(t, admin)
	data, err := os.ReadFile("../../config/rbac/apiserver/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &generated); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apiserver"}, Rules: generated.Rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apiserver"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "apiserver"}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	saConfig := rest.AnonymousClientConfig(cfg)
	saConfig.BearerToken = testenv.ServiceAccountToken(t, cs, ns, "apiserver")
	sa, err = client.New(saConfig, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return admin, sa, ns, cfg
}
