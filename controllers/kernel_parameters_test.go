package controllers_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func sizedSpec(ns string) *nbv1.KernelSpec {
	ks := kernelSpec(ns, "sized")
	ks.Spec.Argv = append(ks.Spec.Argv, "--log-level={log_level}")
	ks.Spec.Parameters = []nbv1.KernelParameter{
		{Name: "memory", Type: nbv1.ParameterInteger, Default: "2", Minimum: ptr.To(resource.MustParse("1")), Maximum: ptr.To(resource.MustParse("8")),
			Resource: &nbv1.ParameterResource{Name: "memory", Unit: "Gi"}},
		{Name: "image", Type: nbv1.ParameterString, Default: "python:3.12", Enum: []string{"python:3.12", "python:3.13"}, Image: true},
		{Name: "log_level", Type: nbv1.ParameterString, Default: "INFO", Enum: []string{"DEBUG", "INFO"}},
	}
	return ks
}

// A kernel's pod is built from its spec as the kernel's launch parameters make it; a spec's
// defaults fill in what the kernel does not name.
func TestKernel_PodTakesItsLaunchParameters(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "sized")
	k.Spec.Parameters = map[string]string{"memory": "4", "image": "python:3.13"}
	create(t, sizedSpec(ns), k)
	c := kernelPod(t, k).Spec.Containers[0]
	if m := c.Resources.Limits["memory"]; c.Image != "python:3.13" || m.String() != "4Gi" {
		t.Errorf("image %s, memory limit %s: not the kernel's parameters", c.Image, m.String())
	}
	if got := c.Args[len(c.Args)-1]; got != "--log-level=INFO" {
		t.Errorf("last argument %q: want the default log level", got)
	}
}

// A Kernel whose parameters its spec does not allow (made with kubectl, past the API
// server's check) fails with the reason and gets no pod; a spec whose own parameters are
// wrong is not Ready.
func TestKernel_RefusesParametersItsSpecDoesNotAllow(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "sized")
	k.Spec.Parameters = map[string]string{"memory": "64"}
	create(t, sizedSpec(ns), k)
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonParametersInvalid)
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); !strings.Contains(c.Message, "memory: 64 is above the maximum 8") {
		t.Errorf("message %q does not say what is wrong", c.Message)
	}

	bad := sizedSpec(ns)
	bad.Name = "bad"
	bad.Spec.Parameters[0].Default = "16"
	create(t, bad)
	specNotReady(t, bad, "default of parameter memory: 16 is above the maximum 8")
}

func TestKernelSpec_SchemaRefusesParametersThatCannotWork(t *testing.T) {
	ns := namespace(t)
	for i, tc := range []struct {
		mod func(*nbv1.KernelParameter)
		msg string
	}{
		{func(p *nbv1.KernelParameter) { p.Enum = nil }, "an image parameter is a string with an enum"},
		{func(p *nbv1.KernelParameter) { p.Resource = &nbv1.ParameterResource{Name: "cpu"} }, "a resource parameter is an integer or a number"},
		{func(p *nbv1.KernelParameter) { p.Name = "connection_file"; p.Image = false }, "{connection_file} is the agent's"},
		{func(p *nbv1.KernelParameter) { p.Name = "Bad-Name" }, "spec.parameters[1].name"},
	} {
		ks := sizedSpec(ns)
		ks.Name = fmt.Sprintf("refused-%d", i)
		tc.mod(&ks.Spec.Parameters[1])
		if err := k8sClient.Create(t.Context(), ks); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("create: %v; want the schema's %q", err, tc.msg)
		}
	}
	ks := sizedSpec(ns)
	ks.Name = "unbounded"
	ks.Spec.Parameters[0].Maximum = nil
	if err := k8sClient.Create(t.Context(), ks); err == nil || !strings.Contains(err.Error(), "needs a minimum and a maximum") {
		t.Errorf("an unbounded resource parameter: %v", err)
	}
}

// An owner's memory limit counts what a kernel's parameters ask for, not the spec's default.
func TestQuota_CountsWhatTheParametersAskFor(t *testing.T) {
	ns := namespace(t)
	create(t, sizedSpec(ns), userPolicy(ns, "ann", nbv1.UserPolicySpec{Users: []string{"ann"},
		Limits: nbv1.UserLimits{Memory: ptr.To(resource.MustParse("6Gi"))}}))
	big := kernelOf(ns, "big", "sized", "ann")
	big.Spec.Parameters = map[string]string{"memory": "8"}
	small := kernelOf(ns, "small", "sized", "ann")
	small.Spec.Parameters = map[string]string{"memory": "4"}
	create(t, big, small)
	kernelCondition(t, big, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonQuotaExceeded)
	hasNoPod(t, big)
	if m := kernelPod(t, small).Spec.Containers[0].Resources.Requests["memory"]; m.String() != "4Gi" {
		t.Errorf("the small kernel's memory request %s", m.String())
	}
}

// A session's kernel is started with the session's launch parameters.
func TestSession_StartsItsKernelWithItsParameters(t *testing.T) {
	ns := namespace(t)
	s := session(ns, "s1", nbv1.SessionKernel{KernelSpec: "sized", Parameters: map[string]string{"memory": "4"}})
	create(t, sizedSpec(ns), s)
	k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}}
	eventually(t, "the session's kernel", func() error { return get(k) })
	if k.Spec.Parameters["memory"] != "4" {
		t.Errorf("the kernel's parameters %v", k.Spec.Parameters)
	}
	if m := kernelPod(t, k).Spec.Containers[0].Resources.Limits["memory"]; m.String() != "4Gi" {
		t.Errorf("memory limit %s", m.String())
	}
}
