package chart_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Homes are on by default, with the same template for the API server (what users see) and
// the manager (what kubectl-made kernels mount).
func TestChart_APIServerAndManagerGetTheSameUserHome(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{want: "--user-home={username}"},
		{sets: []string{"contents.userHome=users/{username}"}, want: "--user-home=users/{username}"},
		{sets: []string{"contents.userHome="}, want: "--user-home="},
	} {
		found := 0
		for _, o := range render(t, "nb", tc.sets...) {
			if o.GetKind() != "Deployment" || (o.GetName() != "nb-nbkube-apiserver" && o.GetName() != "nb-nbkube-manager") {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c, _ := containers[0].(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			if !slices.Contains(args, tc.want) {
				t.Errorf("%v: %s args %v lack %s", tc.sets, o.GetName(), args, tc.want)
			}
			found++
		}
		if found != 2 {
			t.Errorf("%v: found %d of the API server and manager Deployments", tc.sets, found)
		}
	}
}

// A home template must stay inside the volume, name one directory per user, and not be
// hidden (the contents store refuses hidden paths).
func TestChart_SchemaRefusesBadUserHomes(t *testing.T) {
	for _, bad := range []string{"../{username}", "users", "users/.{username}", "/srv/{username}"} {
		_, err := helm(t, "template", "nb", chartDir, "--kube-version", "1.36.3", "--set", "contents.userHome="+bad)
		if err == nil || !strings.Contains(err.Error(), "/contents/userHome") {
			t.Errorf("contents.userHome=%s: got error %v, want one naming /contents/userHome", bad, err)
		}
	}
}
