package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nbkube/nbkube/internal/testenv"
)

// TestChart_RolesAreTheGeneratedOnes guards the rule that RBAC comes from the code's markers
// through make manifests, never edited by hand in the chart: the namespaced rules in each
// component's Role, the cluster-wide one (listing nodes, for manager.agentDelivery Auto) in a
// ClusterRole of its own, made only for Auto.
func TestChart_RolesAreTheGeneratedOnes(t *testing.T) {
	rulesOf := func(objs []*unstructured.Unstructured) map[string][]rbacv1.PolicyRule {
		roles := map[string][]rbacv1.PolicyRule{}
		for _, o := range objs {
			if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
				continue
			}
			var r rbacv1.ClusterRole
			if err := runtimeFromUnstructured(o, &r); err != nil {
				t.Fatal(err)
			}
			roles[o.GetKind()+" "+r.Name] = r.Rules
		}
		return roles
	}
	roles := rulesOf(render(t, "nb"))
	for file, role := range map[string]struct{ namespaced, cluster string }{
		"../../config/rbac/role.yaml":           {"nb-nbkube-manager", "nb-nb-nbkube-nodes"},
		"../../config/rbac/apiserver/role.yaml": {"nb-nbkube-apiserver", "none"},
	} {
		data, err := os.ReadFile(filepath.Clean(file))
		if err != nil {
			t.Fatal(err)
		}
		var generated rbacv1.ClusterRole
		if err := yaml.Unmarshal(data, &generated); err != nil {
			t.Fatal(err)
		}
		var namespaced, cluster []rbacv1.PolicyRule
		for _, r := range generated.Rules {
			if slices.Contains(r.Resources, "nodes") {
				cluster = append(cluster, r)
			} else {
				namespaced = append(namespaced, r)
			}
		}
		if diff := cmp.Diff(namespaced, roles["Role "+role.namespaced]); diff != "" {
			t.Errorf("Role %s differs from %s (-generated +chart); run make manifests:\n%s", role.namespaced, file, diff)
		}
		if diff := cmp.Diff(cluster, roles["ClusterRole "+role.cluster]); diff != "" {
			t.Errorf("ClusterRole %s differs from the cluster-wide rules of %s (-generated +chart); run make manifests:\n%s", role.cluster, file, diff)
		}
	}
	if _, ok := roles["ClusterRole nb-nb-nbkube-nodes"]; !ok {
		t.Error("no ClusterRole for listing nodes with manager.agentDelivery Auto")
	}
	for name := range rulesOf(render(t, "nb", "manager.agentDelivery=InitContainer")) {
		if strings.HasPrefix(name, "ClusterRole ") {
			t.Errorf("with manager.agentDelivery InitContainer the chart makes %s", name)
		}
	}
}

// TestChart_KubernetesProviderMayReviewTokens: with auth.type naming kubernetes, the API
// server's service account may create TokenReviews and SubjectAccessReviews (the metrics
// port's grant, made for the API server alone when metrics are off), as a real API server's
// RBAC answers; without it, and without metrics, nothing cluster-wide is granted but the
// manager's listing of nodes (manager.agentDelivery Auto, the default).
func TestChart_KubernetesProviderMayReviewTokens(t *testing.T) {
	for _, o := range render(t, "nb") {
		if strings.HasPrefix(o.GetKind(), "Cluster") && o.GetKind() != "CustomResourceDefinition" && o.GetName() != "nb-nb-nbkube-nodes" {
			t.Errorf("the default chart makes %s %s", o.GetKind(), o.GetName())
		}
	}
	objs := render(t, "nb", "auth.type={kubernetes,token}")
	if args := apiServerPod(t, objs).Containers[0].Args; !slices.Contains(args, "--auth=kubernetes,token") {
		t.Errorf("API server args %v", args)
	}
	cfg := testenv.ClusterControlPlane(t).RESTConfig()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, o := range objs {
		if k := o.GetKind(); k == "ClusterRole" || k == "ClusterRoleBinding" {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		sa, group, resource string
		want                bool
	}{
		{"nb-nbkube-apiserver", "authentication.k8s.io", "tokenreviews", true},
		{"nb-nbkube-apiserver", "authorization.k8s.io", "subjectaccessreviews", true},
		{"nb-nbkube-manager", "", "list nodes", true},
		{"nb-nbkube-manager", "", "watch nodes", false},
		{"nb-nbkube-manager", "", "patch nodes", false},
		{"nb-nbkube-apiserver", "", "list nodes", false},
		{"nb-nbkube-manager", "authentication.k8s.io", "tokenreviews", false},
	} {
		verb, resource, ok := strings.Cut(tc.resource, " ")
		if !ok {
			verb, resource = "create", tc.resource
		}
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:nb:" + tc.sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:nb", "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: tc.group, Resource: resource},
		}}
		// The authorizer learns of new bindings from a watch: the allowed ones are waited for,
		// and the refused one comes after them, when it has caught up.
		testenv.Eventually(t, tc.sa+" on "+tc.resource, 30*time.Second, func() error {
			if err := c.Create(ctx, sar); err != nil {
				return err
			}
			if sar.Status.Allowed != tc.want {
				return fmt.Errorf("%s may %s %s: %v, want %v", tc.sa, verb, resource, sar.Status.Allowed, tc.want)
			}
			return nil
		})
	}
}
