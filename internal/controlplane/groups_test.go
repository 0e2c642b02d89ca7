package controlplane_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/nbkube/nbkube/internal/testenv"
)

// rbacGroups are the API groups that nbkube's roles (config/rbac, generated from the code's
// RBAC markers, and the API server's) grant anything in: the groups its code uses.
func rbacGroups(t *testing.T) []string {
	t.Helper()
	var groups []string
	for _, pattern := range []string{"../../config/rbac/*.yaml", "../../config/rbac/*/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for doc := range bytes.SplitSeq(data, []byte("\n---")) {
				var role rbacv1.ClusterRole // a Role's rules read the same
				if err := yaml.Unmarshal(doc, &role); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if role.Kind != "Role" && role.Kind != "ClusterRole" {
					continue
				}
				for _, rule := range role.Rules {
					groups = append(groups, rule.APIGroups...)
				}
			}
		}
	}
	slices.Sort(groups)
	return slices.Compact(groups)
}

// The control plane serves only the API groups something here uses: every group nbkube's
// roles name is there (a new one in the code must be added to the server's groups too, or
// nbkube local fails where a cluster works), and the groups of controllers it does not run
// are not.
func TestControlPlane_ServesTheGroupsNbkubeUses(t *testing.T) {
	groups := rbacGroups(t)
	if !slices.Contains(groups, "apps") || !slices.Contains(groups, "coordination.k8s.io") {
		t.Fatalf("the roles name %v: the files were not all read", groups)
	}
	cp := testenv.ControlPlane(t, false)
	served, err := kubernetes.NewForConfigOrDie(cp.RESTConfig()).Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, g := range served.Groups {
		names[g.Name] = true
	}
	for _, g := range groups {
		if g == "nbkube.io" {
			continue // the CRDs' group, which nbkube installs itself
		}
		if !names[g] {
			t.Errorf("API group %q, which nbkube's roles name, is not served", g)
		}
	}
	for _, g := range []string{"batch", "autoscaling", "policy", "certificates.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io"} {
		if names[g] {
			t.Errorf("API group %q is served, though nothing here acts on its objects", g)
		}
	}
}
