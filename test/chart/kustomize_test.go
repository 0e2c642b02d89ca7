package chart_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/testenv"
)

// kustomizeBuild is `kustomize build config/default`, split into objects.
func kustomizeBuild(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	bin := os.Getenv("NBKUBE_KUSTOMIZE")
	if bin == "" {
		t.Fatal("NBKUBE_KUSTOMIZE is not set: run the tests with make test, which installs kustomize")
	}
	out, err := exec.Command(bin, "build", "../../config/default").Output()
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	return splitObjects(t, string(out))
}

// TestKustomize_ManagerHasRightsInItsNamespaceOnly: the kustomize install, created in a real
// kube-apiserver, lets the manager's service account touch pods and secrets in its own
// namespace and in no other, and tells the manager that namespace (the downward API), as
// the chart does.
func TestKustomize_ManagerHasRightsInItsNamespaceOnly(t *testing.T) {
	objs := kustomizeBuild(t)
	cfg := testenv.ClusterControlPlane(t).RESTConfig()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "nbkube-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ServiceAccount":
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		case "Deployment":
			var d appsv1.Deployment
			if err := runtimeFromUnstructured(o, &d); err != nil {
				t.Fatal(err)
			}
			env := d.Spec.Template.Spec.Containers[0].Env
			if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
				return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
			}) {
				t.Errorf("the manager is not told its namespace: env %+v", env)
			}
		}
	}
	for _, tc := range []struct {
		namespace, verb, resource string
		want                      bool
	}{
		{ns, "create", "pods", true},
		{ns, "get", "secrets", true},
		{"default", "create", "pods", false},
		{"default", "get", "secrets", false},
		{"kube-system", "list", "secrets", false},
	} {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":nbkube-manager",
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: tc.namespace, Verb: tc.verb, Resource: tc.resource},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("the manager may %s %s in %s: %v, want %v", tc.verb, tc.resource, tc.namespace, sar.Status.Allowed, tc.want)
		}
	}
}
