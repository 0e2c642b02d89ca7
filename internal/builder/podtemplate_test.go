package builder

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// A full template, as an admin would write one for a GPU node pool.
func gpuTemplate() *nbv1.PodTemplate {
	return &nbv1.PodTemplate{
		Labels:       map[string]string{"team": "vision"},
		Annotations:  map[string]string{"example.com/cost-center": "42"},
		NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}},
		}}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway}},
		PriorityClassName:         "interactive",
		RuntimeClassName:          ptr.To("nvidia"),
		ServiceAccountName:        "vision-kernels",
		Volumes:                   []corev1.Volume{{Name: "datasets", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "datasets"}}}}},
		VolumeMounts:              []nbv1.VolumeMount{{Name: "datasets", MountPath: HomeDir + "/datasets", ReadOnly: true}},
	}
}

func TestKernelPod_TemplatePlacesAndExtendsThePod(t *testing.T) {
	opts := DefaultOptions()
	opts.ContentsClaim = "notebooks"
	plain := KernelPod(testKernel(nil), testSpec(nil), opts)
	tmpl := gpuTemplate()
	// The controller refuses such a label before a pod is built; were one to get here, the
	// kernel's own label stays.
	tmpl.Labels[nbv1.LabelKernel] = "not-this"
	spec := testSpec(func(s *nbv1.KernelSpec) {
		s.Spec.PodTemplate = tmpl
		s.Spec.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	})
	pod := KernelPod(testKernel(nil), spec, opts)

	if pod.Labels["team"] != "vision" || pod.Labels[nbv1.LabelKernel] != "k1" {
		t.Errorf("labels %v: want the template's team and nbkube's own kernel label", pod.Labels)
	}
	if pod.Annotations["example.com/cost-center"] != "42" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	s := pod.Spec
	if d := cmp.Diff(tmpl.NodeSelector, s.NodeSelector); d != "" {
		t.Errorf("nodeSelector: %s", d)
	}
	if d := cmp.Diff(tmpl.Tolerations, s.Tolerations); d != "" {
		t.Errorf("tolerations: %s", d)
	}
	if d := cmp.Diff(tmpl.Affinity, s.Affinity); d != "" {
		t.Errorf("affinity: %s", d)
	}
	if d := cmp.Diff(tmpl.TopologySpreadConstraints, s.TopologySpreadConstraints); d != "" {
		t.Errorf("topologySpreadConstraints: %s", d)
	}
	if s.PriorityClassName != "interactive" || ptr.Deref(s.RuntimeClassName, "") != "nvidia" {
		t.Errorf("priority class %q, runtime class %v", s.PriorityClassName, s.RuntimeClassName)
	}
	// The account runs the pod; its token is not mounted unless asked.
	if s.ServiceAccountName != "vision-kernels" || ptr.Deref(s.AutomountServiceAccountToken, true) {
		t.Errorf("service account %q, automount %v: want the account without its token", s.ServiceAccountName, s.AutomountServiceAccountToken)
	}
	if d := cmp.Diff(append(plain.Spec.Volumes, tmpl.Volumes...), s.Volumes); d != "" {
		t.Errorf("volumes: nbkube's, then the template's: %s", d)
	}
	c := s.Containers[0]
	if d := cmp.Diff(append(plain.Spec.Containers[0].VolumeMounts, tmpl.VolumeMounts[0].Mount()), c.VolumeMounts); d != "" {
		t.Errorf("mounts: nbkube's, then the template's: %s", d)
	}
	if q := c.Resources.Limits["nvidia.com/gpu"]; q.String() != "1" {
		t.Errorf("GPU limit %v", c.Resources.Limits)
	}
	// What the template has no say in is as without it.
	if d := cmp.Diff(plain.Spec.SecurityContext, s.SecurityContext); d != "" {
		t.Errorf("pod security context changed: %s", d)
	}
	if d := cmp.Diff(plain.Spec.Containers[0].Env, c.Env); d != "" {
		t.Errorf("env changed: %s", d)
	}
	// Building the pod leaves the KernelSpec as it was.
	want := gpuTemplate()
	want.Labels[nbv1.LabelKernel] = "not-this"
	if d := cmp.Diff(want, spec.Spec.PodTemplate); d != "" {
		t.Errorf("the template was changed: %s", d)
	}

	tmpl.AutomountServiceAccountToken = ptr.To(true)
	if pod := KernelPod(testKernel(nil), spec, opts); !ptr.Deref(pod.Spec.AutomountServiceAccountToken, false) {
		t.Error("automountServiceAccountToken asked for: the token is not mounted")
	}
}

// Every name and path nbkube gives a kernel pod is one a template cannot take, in every
// shape of the pod: with the agent copied or mounted from the host, with a cluster attached;
// and a terminal pod's, which takes the same template.
func TestReserved_CoverEveryKernelPod(t *testing.T) {
	local := DefaultOptions()
	local.AgentHostDir = "/usr/lib/nbkube"
	for _, o := range []Options{DefaultOptions(), local} {
		o.ContentsClaim = "notebooks"
		for _, pod := range []*corev1.Pod{
			KernelPod(testKernel(func(k *nbv1.Kernel) { k.Spec.Cluster = "default" }), testSpec(nil), o),
			TerminalPod(testTerminal(nil), testSpec(nil), o),
		} {
			checkReserved(t, pod, o.ContentsClaim)
		}
	}
}

// checkReserved says where a template could take a name, path, label or annotation of pod.
func checkReserved(t *testing.T, pod *corev1.Pod, contentsClaim string) {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if p := CheckPodTemplate(&nbv1.PodTemplate{Volumes: []corev1.Volume{v}}, contentsClaim); len(p) == 0 {
			t.Errorf("volume %s of pod %s: a template may take its name", v.Name, pod.Name)
		}
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if kernelReserved.mountPathProblem(m.MountPath) == "" {
				t.Errorf("container %s mounts at %s: a template may mount there too", c.Name, m.MountPath)
			}
		}
	}
	for k := range pod.Labels {
		if p := CheckPodTemplate(&nbv1.PodTemplate{Labels: map[string]string{k: "x"}}, ""); len(p) == 0 {
			t.Errorf("label %s of pod %s: a template may set it", k, pod.Name)
		}
	}
	for k := range pod.Annotations {
		// The template may say its kernels are safe to evict (TestKernelPod_SafeToEvict).
		if !nbkubeKey(k) && k != AnnotationSafeToEvict {
			t.Errorf("annotation %s of pod %s: a template may set it", k, pod.Name)
		}
	}
}

func TestCheckPodTemplate(t *testing.T) {
	vol := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	mount := func(path string) *nbv1.PodTemplate {
		return &nbv1.PodTemplate{Volumes: []corev1.Volume{vol("data")}, VolumeMounts: []nbv1.VolumeMount{{Name: "data", MountPath: path}}}
	}
	tests := []struct {
		name string
		t    *nbv1.PodTemplate
		want string // a substring of the one problem; "" for none
	}{
		{"none", nil, ""},
		{"a full one", gpuTemplate(), ""},
		{"mount under home", mount("/home/jovyan/datasets"), ""},
		{"mount elsewhere", mount("/data"), ""},
		{"nbkube label", &nbv1.PodTemplate{Labels: map[string]string{nbv1.LabelOwner: "bob"}}, "labels: nbkube.io/owner is nbkube's own"},
		{"nbkube subdomain label", &nbv1.PodTemplate{Labels: map[string]string{"x.nbkube.io/y": "1"}}, "x.nbkube.io/y is nbkube's own"},
		{"managed-by label", &nbv1.PodTemplate{Labels: map[string]string{nbv1.LabelManagedBy: "me"}}, "managed-by is nbkube's own"},
		{"label lookalike", &nbv1.PodTemplate{Labels: map[string]string{"notnbkube.io/x": "1"}}, ""},
		{"bad label value", &nbv1.PodTemplate{Labels: map[string]string{"team": "not a value"}}, "podTemplate.labels"},
		{"bad node selector", &nbv1.PodTemplate{NodeSelector: map[string]string{"a b": "c"}}, "podTemplate.nodeSelector"},
		{"nbkube annotation", &nbv1.PodTemplate{Annotations: map[string]string{nbv1.AnnotationStartedBy: "bob"}}, "annotations: nbkube.io/started-by"},
		{"nbkube volume", &nbv1.PodTemplate{Volumes: []corev1.Volume{vol("kernel-secret")}}, "kernel-secret is nbkube's own"},
		{"volume name", &nbv1.PodTemplate{Volumes: []corev1.Volume{vol("Data")}}, "not a DNS label"},
		{"contents claim", &nbv1.PodTemplate{Volumes: []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "notebooks"}}}}}, "the contents claim notebooks"},
		{"another claim", &nbv1.PodTemplate{Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}}}, ""},
		{"mount without volume", &nbv1.PodTemplate{VolumeMounts: []nbv1.VolumeMount{{Name: "data", MountPath: "/data"}}}, "names no volume"},
		{"mount at home", mount(HomeDir), "is nbkube's own"},
		{"mount at tmp", mount("/tmp"), "is nbkube's own"},
		{"mount at root", mount("/"), "is nbkube's own"},
		{"mount over contents", mount(ContentsDir), "under /home/jovyan/work"},
		{"mount in contents", mount(ContentsDir + "/x"), "under /home/jovyan/work"},
		{"mount in the secret dir", mount(SecretDir), "under /var/run/nbkube"},
		{"mount over the agent", mount("/opt/nbkube"), "under /opt/nbkube"},
		{"mount through ..", mount("/home/jovyan/x/../work"), "plain path"},
		{"mount with trailing slash", mount("/home/jovyan/work/"), "plain path"},
		{"relative mount", mount("data"), "plain path"},
		{"mount beside contents", mount("/home/jovyan/workshop"), ""},
		{"token without account", &nbv1.PodTemplate{AutomountServiceAccountToken: ptr.To(true)}, "needs a serviceAccountName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckPodTemplate(tc.t, "notebooks")
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one like %q", got, tc.want)
			}
		})
	}
}

// A kernel pod is not the autoscaler's to evict, unless its spec says its kernels may go.
func TestKernelPod_SafeToEvict(t *testing.T) {
	if got := KernelPod(testKernel(nil), testSpec(nil), DefaultOptions()).Annotations[AnnotationSafeToEvict]; got != "false" {
		t.Errorf("%s = %q, want \"false\"", AnnotationSafeToEvict, got)
	}
	cheap := testSpec(func(s *nbv1.KernelSpec) {
		s.Spec.PodTemplate = &nbv1.PodTemplate{Annotations: map[string]string{AnnotationSafeToEvict: "true"}}
	})
	if got := KernelPod(testKernel(nil), cheap, DefaultOptions()).Annotations[AnnotationSafeToEvict]; got != "true" {
		t.Errorf("with the template's \"true\": %q", got)
	}
}

// An engine pod takes its cluster's template; nbkube's names and paths in it are reserved.
func TestClusterEnginePod_Template(t *testing.T) {
	c := testCluster(1)
	plain := ClusterEnginePod(c, DefaultOptions(), "uid")
	c.Spec.EngineTemplate = gpuTemplate()
	pod := ClusterEnginePod(c, DefaultOptions(), "uid")
	if d := cmp.Diff(c.Spec.EngineTemplate.NodeSelector, pod.Spec.NodeSelector); d != "" {
		t.Errorf("node selector: %s", d)
	}
	if d := cmp.Diff(append(plain.Spec.Volumes, c.Spec.EngineTemplate.Volumes...), pod.Spec.Volumes); d != "" {
		t.Errorf("volumes: %s", d)
	}
	if pod.Annotations[AnnotationControllerPod] != "uid" || pod.Labels["team"] != "vision" {
		t.Errorf("annotations %v, labels %v", pod.Annotations, pod.Labels)
	}
	for _, v := range plain.Spec.Volumes {
		if p := CheckEngineTemplate(&nbv1.PodTemplate{Volumes: []corev1.Volume{v}}, ""); len(p) == 0 {
			t.Errorf("volume %s of an engine pod: a template may take its name", v.Name)
		}
	}
	for _, m := range plain.Spec.Containers[0].VolumeMounts {
		if engineReserved.mountPathProblem(m.MountPath) == "" {
			t.Errorf("engines mount at %s: a template may mount there too", m.MountPath)
		}
	}
}
