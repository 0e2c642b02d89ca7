package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/agentapi"
)

func TestRSTRendererDeployment_RunsTheAgentInTheKernelImageLockedDown(t *testing.T) {
	o := DefaultOptions()
	o.RSTRenderer.Python = []string{"python3", "/usr/bin/python3"}
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "nbkube-manager", UID: "uid-m", Controller: ptr.To(true)}
	d := RSTRendererDeployment("ns", "uid-s", o, owner)

	if d.Name != RSTRendererName || d.Namespace != "ns" || !cmp.Equal(d.OwnerReferences, []metav1.OwnerReference{*owner}) {
		t.Errorf("meta %+v", d.ObjectMeta)
	}
	if d.Spec.Selector == nil || !cmp.Equal(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || *d.Spec.Replicas != 1 {
		t.Errorf("selector %v of template labels %v, replicas %d", d.Spec.Selector, d.Spec.Template.Labels, *d.Spec.Replicas)
	}
	if got := d.Spec.Template.Annotations[AnnotationRSTSecret]; got != "uid-s" {
		t.Errorf("secret annotation %q", got)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != o.DefaultKernelImage {
		t.Errorf("image %q, want the kernel image %q", c.Image, o.DefaultKernelImage)
	}
	if d := cmp.Diff([]string{AgentBinary}, c.Command); d != "" {
		t.Errorf("command (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{agentapi.CommandRenderRST, "--python", "python3", "--python", "/usr/bin/python3"}, c.Args); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{
		"HOME":                     "/tmp",
		agentapi.EnvNamespace:      "from:metadata.namespace",
		agentapi.EnvPodIP:          "from:status.podIP",
		agentapi.EnvAgentPort:      "8777",
		agentapi.EnvSecretDir:      SecretDir,
		agentapi.EnvTerminationLog: TerminationLog,
	}, envMap(c.Env)); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	// As locked down as a kernel, and holding less: no service account token, no contents
	// volume, only the token's Secret, the agent and a scratch directory.
	if !*c.SecurityContext.ReadOnlyRootFilesystem || *c.SecurityContext.AllowPrivilegeEscalation || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("security context %+v / %+v", c.SecurityContext, pod.SecurityContext)
	}
	if *pod.AutomountServiceAccountToken || *pod.EnableServiceLinks {
		t.Error("the renderer gets a service account token or service links")
	}
	var volumes []string
	for _, v := range pod.Volumes {
		volumes = append(volumes, v.Name)
		if v.PersistentVolumeClaim != nil {
			t.Errorf("volume %s mounts a claim", v.Name)
		}
		if v.Secret != nil && v.Secret.SecretName != RSTRendererName {
			t.Errorf("volume %s mounts secret %s", v.Name, v.Secret.SecretName)
		}
	}
	if d := cmp.Diff([]string{"agent-bin", "renderer-secret", "tmp"}, volumes); d != "" {
		t.Errorf("volumes (-want +got):\n%s", d)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != o.AgentImage {
		t.Errorf("init containers %+v", pod.InitContainers)
	}
	if c.ReadinessProbe.HTTPGet.Path != agentapi.PathReadyz || c.LivenessProbe.HTTPGet.Path != agentapi.PathHealthz {
		t.Error("probes")
	}

	o.RSTRenderer.Image = "renderer:1"
	o.AgentHostDir = "/opt/nbkube"
	d = RSTRendererDeployment("ns", "uid-s", o, nil)
	pod = d.Spec.Template.Spec
	if pod.Containers[0].Image != "renderer:1" || len(pod.InitContainers) != 0 || pod.Volumes[0].HostPath == nil || d.OwnerReferences != nil {
		t.Errorf("with an image, a host agent and no owner: %+v", d)
	}
}

func TestRSTRendererSecret_HoldsTheTokenOnly(t *testing.T) {
	s := RSTRendererSecret("ns", "tok", nil)
	if d := cmp.Diff(map[string]string{agentapi.SecretKeyToken: "tok"}, s.StringData); d != "" {
		t.Errorf("data (-want +got):\n%s", d)
	}
	if s.Name != RSTRendererName || !*s.Immutable || s.Type != corev1.SecretTypeOpaque || !cmp.Equal(s.Labels, RSTRendererLabels()) {
		t.Errorf("secret %+v", s)
	}
}
