package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

func withMount(path string) *nbv1.PodTemplate {
	return &nbv1.PodTemplate{
		Volumes:      []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		VolumeMounts: []nbv1.VolumeMount{{Name: "data", MountPath: path}},
	}
}

// The schema refuses what would override nbkube's parts of a kernel pod, with the same
// verdict as the controller's own check (which guards specs the schema never saw).
func TestKernelSpec_SchemaAndControllerRefuseTemplatesThatOverrideNbkube(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	refused := []struct {
		name string
		t    *nbv1.PodTemplate
		msg  string // the schema's message
	}{
		{"owner label", &nbv1.PodTemplate{Labels: map[string]string{nbv1.LabelOwner: "bob"}}, "label keys under nbkube.io/"},
		{"subdomain label", &nbv1.PodTemplate{Labels: map[string]string{"policy.nbkube.io/x": "1"}}, "label keys under nbkube.io/"},
		{"component label", &nbv1.PodTemplate{Labels: map[string]string{nbv1.LabelComponent: "x"}}, "label keys under nbkube.io/"},
		{"nbkube annotation", &nbv1.PodTemplate{Annotations: map[string]string{nbv1.AnnotationRestart: "x"}}, "annotation keys under nbkube.io/"},
		{"secret volume name", &nbv1.PodTemplate{Volumes: []corev1.Volume{{Name: "kernel-secret", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}, "are nbkube's own"},
		{"mount without volume", &nbv1.PodTemplate{VolumeMounts: []nbv1.VolumeMount{{Name: "data", MountPath: "/data"}}}, "every volumeMount must name"},
		{"mount at home", withMount(builder.HomeDir), "are nbkube's own"},
		{"mount at tmp", withMount("/tmp"), "are nbkube's own"},
		{"mount at root", withMount("/"), "absolute and plain"},
		{"mount in contents", withMount(builder.ContentsDir + "/alice"), "are nbkube's own"},
		{"mount over the agent", withMount(builder.AgentBinDir), "are nbkube's own"},
		{"mount over the secret", withMount(builder.SecretDir), "are nbkube's own"},
		{"mount through ..", withMount("/home/jovyan/x/../work"), "absolute and plain"},
		{"mount with trailing /", withMount(builder.ContentsDir + "/"), "absolute and plain"},
		{"relative mount", withMount("data"), "absolute and plain"},
		{"token without account", &nbv1.PodTemplate{AutomountServiceAccountToken: ptr.To(true)}, "needs a serviceAccountName"},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if p := builder.CheckPodTemplate(tc.t, opts.ContentsClaim); len(p) == 0 {
				t.Errorf("the controller finds nothing wrong with %+v", tc.t)
			}
			ks := kernelSpec(ns, fmt.Sprintf("refused-%d", i))
			ks.Spec.PodTemplate = tc.t
			if err := k8sClient.Create(ctx, ks); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("create: %v; want the schema's refusal %q", err, tc.msg)
			}
		})
	}
	accepted := []*nbv1.PodTemplate{
		withMount("/home/jovyan/datasets"),
		withMount("/home/jovyan/workshop"),
		{Labels: map[string]string{"notnbkube.io/x": "1", "team": "a"}, ServiceAccountName: "sa", AutomountServiceAccountToken: ptr.To(true)},
	}
	for i, tmpl := range accepted {
		if p := builder.CheckPodTemplate(tmpl, opts.ContentsClaim); len(p) > 0 {
			t.Errorf("the controller refuses %+v: %q", tmpl, p)
		}
		ks := kernelSpec(ns, fmt.Sprintf("accepted-%d", i))
		ks.Spec.PodTemplate = tmpl
		if err := k8sClient.Create(ctx, ks); err != nil {
			t.Errorf("create with %+v: %v", tmpl, err)
		}
	}
}

// A kernel's pod is placed and extended as its spec's template says.
func TestKernel_PodFollowsItsSpecsTemplate(t *testing.T) {
	ns := namespace(t)
	ks := kernelSpec(ns, "gpu")
	ks.Spec.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	ks.Spec.PodTemplate = &nbv1.PodTemplate{
		Labels:       map[string]string{"team": "vision"},
		NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Volumes:      []corev1.Volume{{Name: "datasets", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "datasets"}}}}},
		VolumeMounts: []nbv1.VolumeMount{{Name: "datasets", MountPath: "/home/jovyan/datasets", ReadOnly: true}},
	}
	k := kernel(ns, "k1", "gpu")
	create(t, ks, k)
	pod := kernelPod(t, k)
	// The API server's admission adds tolerations of its own (not-ready, unreachable).
	if pod.Labels["team"] != "vision" || pod.Spec.NodeSelector["nvidia.com/gpu.present"] != "true" || !slices.Contains(pod.Spec.Tolerations, ks.Spec.PodTemplate.Tolerations[0]) {
		t.Errorf("pod labels %v, node selector %v, tolerations %v: not the template's", pod.Labels, pod.Spec.NodeSelector, pod.Spec.Tolerations)
	}
	c := pod.Spec.Containers[0]
	if m := c.VolumeMounts[len(c.VolumeMounts)-1]; m.MountPath != "/home/jovyan/datasets" {
		t.Errorf("mounts %v: the template's is missing", c.VolumeMounts)
	}
	if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("limits %v: no GPU", c.Resources.Limits)
	}
}

// A template the schema lets through but the controller refuses (here: a volume of the
// contents claim, every user's home) makes the spec not Ready and its kernels fail, saying why.
func TestKernel_RefusesASpecWhoseTemplateMountsEveryHome(t *testing.T) {
	ns := namespace(t)
	ks := kernelSpec(ns, "all-homes")
	ks.Spec.PodTemplate = &nbv1.PodTemplate{Volumes: []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: opts.ContentsClaim}}}}}
	k := kernel(ns, "k1", "all-homes")
	create(t, ks, k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecInvalid)
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); !strings.Contains(c.Message, "contents claim") {
		t.Errorf("kernel's message %q does not say what is wrong", c.Message)
	}
	specNotReady(t, ks, "contents claim")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Name}}
	if err := get(pod); err == nil {
		t.Error("a pod was created for the kernel")
	}
}

// A Cluster's engine template places its engines; the schema refuses one that takes nbkube's
// names, and the controller starts no engine from one that mounts every home.
func TestCluster_EnginesFollowTheEngineTemplate(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	_, _, engines := startCluster(t, ns, "gpu", 2, "10.30.0.1", func(c *nbv1.Cluster) {
		c.Spec.EngineTemplate = &nbv1.PodTemplate{
			NodeSelector: map[string]string{"pool": "gpu"},
			Volumes:      []corev1.Volume{{Name: "datasets", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			VolumeMounts: []nbv1.VolumeMount{{Name: "datasets", MountPath: "/datasets"}},
		}
	})
	for _, p := range engines {
		if p.Spec.NodeSelector["pool"] != "gpu" || !slices.ContainsFunc(p.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/datasets" }) {
			t.Errorf("engine %s: node selector %v, mounts %v: not the template's", p.Name, p.Spec.NodeSelector, p.Spec.Containers[0].VolumeMounts)
		}
	}

	for name, tmpl := range map[string]*nbv1.PodTemplate{
		"profile volume": {Volumes: []corev1.Volume{{Name: "profile", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
		"profile mount":  withMount(builder.ClusterProfileDir),
	} {
		if p := builder.CheckEngineTemplate(tmpl, opts.ContentsClaim); len(p) == 0 {
			t.Errorf("%s: the controller finds nothing wrong", name)
		}
		c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"}, Spec: nbv1.ClusterParameters{Owner: "alice", EngineTemplate: tmpl}}
		if err := k8sClient.Create(ctx, c); err == nil || !strings.Contains(err.Error(), "nbkube's own") {
			t.Errorf("%s: create %v; want the schema's refusal", name, err)
		}
	}

	allHomes := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all-homes"}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: 2,
		EngineTemplate: &nbv1.PodTemplate{Volumes: []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: opts.ContentsClaim}}}}}}}
	create(t, allHomes)
	runPod(t, &clusterPods(t, allHomes, builder.ComponentClusterController, 1)[0], "10.30.0.2")
	hub.answer("10.30.0.2", nil)
	clusterCondition(t, allHomes, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonSpecInvalid)
	if c := meta.FindStatusCondition(allHomes.Status.Conditions, nbv1.ConditionFailed); !strings.Contains(c.Message, "contents claim") {
		t.Errorf("message %q does not say what is wrong", c.Message)
	}
	clusterPods(t, allHomes, builder.ComponentClusterEngine, 0)
}

// specNotReady waits until the KernelSpec is not Ready, for a reason whose message says want.
func specNotReady(t *testing.T, ks *nbv1.KernelSpec, want string) {
	t.Helper()
	eventually(t, "the spec not Ready", func() error {
		if err := get(ks); err != nil {
			return err
		}
		c := meta.FindStatusCondition(ks.Status.Conditions, nbv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) {
			return fmt.Errorf("conditions %+v", ks.Status.Conditions)
		}
		return nil
	})
}
