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

// Claims per user are the manager's alone (the API server serves homes from the contents
// volume), off unless set; the schema refuses a template that makes no claim name.
func TestChart_HomeClaimGoesToTheManager(t *testing.T) {
	argsOf := func(sets ...string) map[string][]string {
		out := map[string][]string{}
		for _, o := range render(t, "nb", sets...) {
			if o.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c, _ := containers[0].(map[string]any)
			out[o.GetName()], _, _ = unstructured.NestedStringSlice(c, "args")
		}
		return out
	}
	hasClaim := func(args []string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--home-claim") })
	}
	for name, args := range argsOf() {
		if hasClaim(args) {
			t.Errorf("by default %s has %v", name, args)
		}
	}
	on := argsOf("contents.homeClaim=home-{username}")
	if !slices.Contains(on["nb-nbkube-manager"], "--home-claim=home-{username}") {
		t.Errorf("the manager's args %v lack --home-claim=home-{username}", on["nb-nbkube-manager"])
	}
	if hasClaim(on["nb-nbkube-apiserver"]) {
		t.Errorf("the API server got a claim template: %v", on["nb-nbkube-apiserver"])
	}
	for _, bad := range []string{"home", "Home-{username}", "home_{username}", "homes/{username}"} {
		_, err := helm(t, "template", "nb", chartDir, "--kube-version", "1.36.3", "--set", "contents.homeClaim="+bad)
		if err == nil || !strings.Contains(err.Error(), "/contents/homeClaim") {
			t.Errorf("contents.homeClaim=%s: got error %v, want one naming /contents/homeClaim", bad, err)
		}
	}
}
