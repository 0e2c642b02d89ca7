package chart_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// imagePuller is the rendered image puller DaemonSet, nil if there is none.
func imagePuller(t *testing.T, sets ...string) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range render(t, "nb", sets...) {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var d appsv1.DaemonSet
		if err := runtimeFromUnstructured(o, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	return nil
}

// The image puller keeps every image a kernel may use on every node, each once: the default
// kernel image, the chart's kernel specs' images and their image parameters' choices, the
// renderer's, and the extra ones; each runs the agent's check after the agent is copied in.
func TestChart_ImagePullerPullsEveryKernelImageOnce(t *testing.T) {
	d := imagePuller(t,
		"kernelImage.repository=example.com/kernel", "kernelImage.tag=v1",
		"kernelSpecs.python3.image=python:3.13",
		"kernelSpecs.python3.parameters[0].name=image", "kernelSpecs.python3.parameters[0].type=string",
		"kernelSpecs.python3.parameters[0].default=python:3.13", "kernelSpecs.python3.parameters[0].image=true",
		"kernelSpecs.python3.parameters[0].enum={python:3.13,python:3.14}",
		"rstRenderer.image=example.com/docutils:2",
		"prePuller.extraImages={r-base:4.4,python:3.14}",
		"prePuller.tolerations[0].key=nvidia.com/gpu", "prePuller.tolerations[0].operator=Exists",
	)
	if d == nil {
		t.Fatal("no image puller DaemonSet")
	}
	spec := d.Spec.Template.Spec
	var pulled []string
	for _, c := range spec.InitContainers[1:] {
		pulled = append(pulled, c.Image)
		if !slices.Equal(c.Command, []string{"/opt/nbkube/bin/nbkube-agent", "check"}) {
			t.Errorf("%s runs %v", c.Name, c.Command)
		}
	}
	want := []string{"example.com/kernel:v1", "python:3.13", "python:3.14", "example.com/docutils:2", "r-base:4.4"}
	if !slices.Equal(pulled, want) {
		t.Errorf("pulled %v, want %v", pulled, want)
	}
	if first := spec.InitContainers[0]; first.Name != "install-agent" || first.Command[1] != "install" {
		t.Errorf("first init container %s %v: want the agent's install", first.Name, first.Command)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("tolerations %v", spec.Tolerations)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the puller's pods get an API token")
	}
	if d := imagePuller(t, "prePuller.enabled=false"); d != nil {
		t.Error("prePuller.enabled=false still renders the DaemonSet")
	}
}

// The puller's pods only wait: a NetworkPolicy of theirs lets nothing in and nothing out.
func TestChart_ImagePullerReachesNothing(t *testing.T) {
	d := imagePuller(t)
	found := false
	for _, o := range render(t, "nb") {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtimeFromUnstructured(o, &np); err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		found = true
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) ||
			len(np.Spec.Ingress) > 0 || len(np.Spec.Egress) > 0 {
			t.Errorf("policy %s lets the puller's pods %v, ingress %v, egress %v; want none either way", np.Name, np.Spec.PolicyTypes, np.Spec.Ingress, np.Spec.Egress)
		}
	}
	if !found {
		t.Error("no NetworkPolicy selects the image puller's pods")
	}
}
