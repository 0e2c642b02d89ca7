package chart_test

import (
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestChart_ManagerAndAPIServerShareTheAgentTokenKey: one Secret holds the agent token key,
// whatever auth Secret is used, and both Deployments mount it where --agent-token-key-file
// points, so that the API server derives the tokens the manager writes.
func TestChart_ManagerAndAPIServerShareTheAgentTokenKey(t *testing.T) {
	for _, sets := range [][]string{nil, {"auth.existingSecret=mine"}} {
		objs := render(t, "nb", sets...)
		const secretName = "nb-nbkube-agent-token-key"
		var key []byte
		deployments := map[string]*corev1.PodSpec{}
		for _, o := range objs {
			switch {
			case o.GetKind() == "Secret" && o.GetName() == secretName:
				var s corev1.Secret
				if err := runtimeFromUnstructured(o, &s); err != nil {
					t.Fatal(err)
				}
				key = s.Data["key"]
			case o.GetKind() == "Deployment":
				var d appsv1.Deployment
				if err := runtimeFromUnstructured(o, &d); err != nil {
					t.Fatal(err)
				}
				if d.Spec.Template.Annotations["checksum/agent-token-key"] == "" {
					t.Errorf("%v: %s does not roll when the key changes", sets, d.Name)
				}
				deployments[d.Name] = &d.Spec.Template.Spec
			}
		}
		if len(key) < 32 {
			t.Errorf("%v: Secret %s holds a key of %d bytes, want at least 32", sets, secretName, len(key))
		}
		for _, name := range []string{"nb-nbkube-manager", "nb-nbkube-apiserver"} {
			pod := deployments[name]
			if pod == nil {
				t.Fatalf("%v: no Deployment %s", sets, name)
			}
			if file := mountedSecretFile(pod, "--agent-token-key-file="); file != (secretFile{secretName, "key"}) {
				t.Errorf("%v: %s's --agent-token-key-file is %+v, want key of Secret %s", sets, name, file, secretName)
			}
		}
	}
}

// TestChart_APIServerMayReadNoSecrets: the internet-facing API server's role names no
// Secrets (nor every resource): agent tokens are derived, not read.
func TestChart_APIServerMayReadNoSecrets(t *testing.T) {
	for _, o := range render(t, "nb") {
		if o.GetKind() != "Role" || o.GetName() != "nb-nbkube-apiserver" {
			continue
		}
		var r rbacv1.Role
		if err := runtimeFromUnstructured(o, &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, "") && (slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*")) {
				t.Errorf("the API server's role lets it at Secrets: %+v", rule)
			}
		}
		return
	}
	t.Fatal("no API server Role")
}

// secretFile is a key of a Secret, as a container sees it as a file.
type secretFile struct{ secret, key string }

// mountedSecretFile is the Secret key that the first container's flag (prefix, ending in "=")
// names as a file; zero when the flag or its mount is missing.
func mountedSecretFile(pod *corev1.PodSpec, prefix string) secretFile {
	c := pod.Containers[0]
	i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, prefix) })
	if i < 0 {
		return secretFile{}
	}
	file := strings.TrimPrefix(c.Args[i], prefix)
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(file) || m.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return secretFile{v.Secret.SecretName, path.Base(file)}
			}
			for _, it := range v.Secret.Items {
				if it.Path == path.Base(file) {
					return secretFile{v.Secret.SecretName, it.Key}
				}
			}
		}
	}
	return secretFile{}
}
