package localnode

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/agentapi"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "team", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": `say "hi"`},
		},
		Spec: corev1.PodSpec{
			NodeName:           "nbkube-local",
			ServiceAccountName: "runner",
			Containers: []corev1.Container{{
				Name: "main",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
		},
	}
}

func testObjects() podObjects {
	return podObjects{
		secrets: map[string]*corev1.Secret{
			"db": {Data: map[string][]byte{"password": []byte("hunter2"), "user": []byte("admin")}},
		},
		configMaps: map[string]*corev1.ConfigMap{
			"settings": {Data: map[string]string{"MODE": "fast", "LEVEL": "3"}},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// endsInError checks err against a table case's wantErr and reports whether the case ends there:
// with a wantErr, err must contain it; without, there must be no error.
func endsInError(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want one containing %q", err, wantErr)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

func TestContainerEnv_ResolvesSourcesAndExpandsEarlierVariables(t *testing.T) {
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	tests := []struct {
		name    string
		env     []corev1.EnvVar
		envFrom []corev1.EnvFromSource
		want    []corev1.EnvVar
		wantErr string
	}{{
		name: "literal values expand earlier variables only",
		env: []corev1.EnvVar{
			{Name: "A", Value: "x"},
			{Name: "B", Value: "$(A)-$(C)-$$(A)"},
			{Name: "C", Value: "c"},
			{Name: "EMPTY"},
		},
		want: []corev1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "x-$(C)-$(A)"}, {Name: "C", Value: "c"}, {Name: "EMPTY"}},
	}, {
		name: "downward API fields",
		env: []corev1.EnvVar{
			fieldEnv("NAME", "metadata.name"),
			fieldEnv("NS", "metadata.namespace"),
			fieldEnv("UID", "metadata.uid"),
			fieldEnv("APP", "metadata.labels['app']"),
			fieldEnv("NOTE", "metadata.annotations['note']"),
			fieldEnv("MISSING", "metadata.labels['nope']"),
			fieldEnv("NODE", "spec.nodeName"),
			fieldEnv("SA", "spec.serviceAccountName"),
			fieldEnv("POD_IP", "status.podIP"),
			fieldEnv("POD_IPS", "status.podIPs"),
			fieldEnv("HOST_IP", "status.hostIP"),
			{Name: "URL", Value: "http://$(POD_IP):8888/"},
		},
		want: []corev1.EnvVar{
			{Name: "NAME", Value: "web-0"}, {Name: "NS", Value: "team"}, {Name: "UID", Value: "uid-1"},
			{Name: "APP", Value: "web"}, {Name: "NOTE", Value: `say "hi"`}, {Name: "MISSING"},
			{Name: "NODE", Value: "nbkube-local"}, {Name: "SA", Value: "runner"},
			{Name: "POD_IP", Value: "127.0.0.7"}, {Name: "POD_IPS", Value: "127.0.0.7"}, {Name: "HOST_IP", Value: "127.0.0.1"},
			{Name: "URL", Value: "http://127.0.0.7:8888/"},
		},
	}, {
		name: "secret and configMap keys, a missing optional key is left out",
		env: []corev1.EnvVar{
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "MODE"}}},
			{Name: "OPTIONAL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "nope", Optional: ptr.To(true)}}},
			{Name: "OPTIONAL_OBJECT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: ptr.To(true)}}},
		},
		want: []corev1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}, {Name: "MODE", Value: "fast"}},
	}, {
		name: "envFrom with a prefix comes first and env overrides it",
		envFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
			{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
		},
		env: []corev1.EnvVar{{Name: "MODE", Value: "slow-$(LEVEL)"}},
		want: []corev1.EnvVar{
			{Name: "LEVEL", Value: "3"}, {Name: "MODE", Value: "slow-3"},
			{Name: "DB_password", Value: "hunter2"}, {Name: "DB_user", Value: "admin"},
		},
	}, {
		name: "resource fields: requests, limits, a divisor, and allocatable for an unset limit",
		env: []corev1.EnvVar{
			{Name: "CPU_REQ", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
			{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				Resource: "limits.cpu"}}},
		},
		want: []corev1.EnvVar{{Name: "CPU_REQ", Value: "250"}, {Name: "MEM_MI", Value: "64"}, {Name: "CPU_LIMIT", Value: "2"}},
	}, {
		name: "a missing secret is a configuration error",
		env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k"}}}},
		wantErr: `secret "absent" not found`,
	}, {
		name: "a missing key is a configuration error",
		env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "nope"}}}},
		wantErr: "couldn't find key nope in ConfigMap team/settings",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Env, c.EnvFrom = tt.env, tt.envFrom
			got, err := containerEnv(c, envContext{pod: pod, podIP: "127.0.0.7", allocatable: allocatable, objects: testObjects()})
			if endsInError(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProcessEnv_InheritsOnlyPathAndHomeFromTheHost(t *testing.T) {
	host := hostEnv{path: "/usr/bin:/bin", home: "/home/me"}
	got := processEnv([]corev1.EnvVar{{Name: "HOME", Value: "/work"}, {Name: "X", Value: "1"}}, host, "web-0")
	want := []string{"PATH=/usr/bin:/bin", "HOME=/work", "HOSTNAME=web-0", "X=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
}

func TestProcessEnv_NamesTheForkServerUnlessTheContainerDoes(t *testing.T) {
	host := hostEnv{path: "/bin", forkServer: "/data/forkserver/kernel-fork.sock"}
	got := processEnv(nil, host, "k")
	want := []string{"PATH=/bin", "HOSTNAME=k", agentapi.EnvForkServer + "=/data/forkserver/kernel-fork.sock"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	// A container that sets it empty opts out: its agent starts kernels itself.
	got = processEnv([]corev1.EnvVar{{Name: agentapi.EnvForkServer}}, host, "k")
	if want[2] = agentapi.EnvForkServer + "="; !cmp.Equal(want, got) {
		t.Errorf("environment %v, want %v", got, want)
	}
}

func TestFormatMap_RendersSortedQuotedLines(t *testing.T) {
	got := formatMap(map[string]string{"b": "2", "a": `x"y`})
	if want := "a=\"x\\\"y\"\nb=\"2\""; got != want {
		t.Errorf("formatMap = %q, want %q", got, want)
	}
}
