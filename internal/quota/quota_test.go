package quota

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
)

func i32(n int32) *int32 { return &n }

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func policy(name string, spec nbv1.UserPolicySpec) nbv1.UserPolicy {
	return nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func TestEffective_UserOverGroupOverAll(t *testing.T) {
	ps := []nbv1.UserPolicy{
		policy("everyone", nbv1.UserPolicySpec{AllUsers: true, Limits: nbv1.UserLimits{Kernels: i32(2), Engines: i32(4), CPU: q("2"), Memory: q("4Gi")}}),
		policy("students", nbv1.UserPolicySpec{Groups: []string{"students"}, Limits: nbv1.UserLimits{Kernels: i32(3), CPU: q("1")}}),
		policy("staff", nbv1.UserPolicySpec{Groups: []string{"staff"}, Limits: nbv1.UserLimits{Kernels: i32(10), CPU: q("500m")}}),
		policy("ann", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: i32(1)}}),
		policy("ann-too", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: i32(5)}}),
	}
	cases := []struct {
		user     string
		groups   []string
		kernels  int64
		engines  int64
		cpu      string
		policies []string
	}{
		// Named twice: the most restrictive; CPU from her group, engines from everyone's.
		{"ann", []string{"students"}, 1, 4, "1", []string{"ann", "ann-too", "everyone", "students"}},
		// In two groups: the most generous of each field.
		{"ben", []string{"students", "staff"}, 10, 4, "1", []string{"everyone", "staff", "students"}},
		{"cat", nil, 2, 4, "2", []string{"everyone"}},
	}
	for _, c := range cases {
		l := Effective(ps, c.user, c.groups)
		if l.Kernels == nil || *l.Kernels != c.kernels || l.Engines == nil || *l.Engines != c.engines || l.CPU == nil || l.CPU.String() != c.cpu {
			t.Errorf("%s: kernels %v engines %v cpu %v, want %d %d %s", c.user, l.Kernels, l.Engines, l.CPU, c.kernels, c.engines, c.cpu)
		}
		if l.Memory == nil || l.Memory.String() != "4Gi" || l.GPU != nil {
			t.Errorf("%s: memory %v gpu %v", c.user, l.Memory, l.GPU)
		}
		if !slices.Equal(l.Policies, c.policies) {
			t.Errorf("%s: policies %v, want %v", c.user, l.Policies, c.policies)
		}
	}
	if l := Effective(ps[1:3], "dan", nil); l.Kernels != nil || l.Policies != nil {
		t.Errorf("a user no policy selects has limits: %+v", l)
	}
}

func TestEffective_KernelSpecsAndDefaults(t *testing.T) {
	ps := []nbv1.UserPolicy{
		policy("a-everyone", nbv1.UserPolicySpec{AllUsers: true, KernelSpecs: []string{"python3"},
			DefaultResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}),
		policy("b-gpu", nbv1.UserPolicySpec{Groups: []string{"gpu"}, KernelSpecs: []string{"python3-gpu"},
			DefaultResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}}),
		policy("c-r", nbv1.UserPolicySpec{Groups: []string{"r"}, KernelSpecs: []string{"ir", "python3"}}),
	}
	l := Effective(ps, "ann", []string{"gpu", "r"})
	if !slices.Equal(l.KernelSpecs, []string{"ir", "python3", "python3-gpu"}) {
		t.Errorf("two groups' specs: %v", l.KernelSpecs)
	}
	if !l.AllowsSpec("ir") || l.AllowsSpec("julia") {
		t.Errorf("AllowsSpec wrong for %v", l.KernelSpecs)
	}
	mem, cpu := l.DefaultResources.Requests[corev1.ResourceMemory], l.DefaultResources.Requests[corev1.ResourceCPU]
	if mem.String() != "8Gi" || cpu.String() != "250m" {
		t.Errorf("defaults: the group's memory and everyone's cpu, got memory %s cpu %s", mem.String(), cpu.String())
	}
	if l := Effective(ps, "ben", nil); !slices.Equal(l.KernelSpecs, []string{"python3"}) {
		t.Errorf("everyone's specs: %v", l.KernelSpecs)
	}
	if l := Effective(nil, "ben", nil); !l.AllowsSpec("anything") {
		t.Error("no policy must allow every spec")
	}
}

func TestCheck_NamesTheLimitAndTheUsage(t *testing.T) {
	l := Limits{Kernels: new(int64(5)), CPU: q("4"), Memory: q("8Gi")}
	used := Amounts{Kernels: 5, CPU: resource.MustParse("3"), Memory: resource.MustParse("2Gi")}
	err := Check("ann", l, used, Amounts{Kernels: 1})
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Reason() != "kernels: 5 of 5" {
		t.Fatalf("got %v", err)
	}
	de := ex.DomainError()
	var d *domainerr.Error
	if !errors.Is(de, domainerr.ErrForbidden) || !errors.As(de, &d) || d.Reason != "kernels: 5 of 5" {
		t.Errorf("domain error %#v", de)
	}
	used.Kernels = 4
	err = Check("ann", l, used, Amounts{Kernels: 1, CPU: resource.MustParse("1500m")})
	if !errors.As(err, &ex) || ex.Reason() != "cpu: 3 of 4" {
		t.Fatalf("cpu: got %v", err)
	}
	if err := Check("ann", l, used, Amounts{Kernels: 1, CPU: resource.MustParse("1")}); err != nil {
		t.Errorf("exactly at the limit must pass: %v", err)
	}
	// Over a lowered limit, what adds nothing of it is not refused.
	if err := Check("ann", Limits{Kernels: new(int64(1))}, Amounts{Kernels: 3}, Amounts{Engines: 2}); err != nil {
		t.Errorf("adding engines refused for kernels: %v", err)
	}
	if err := Check("ann", Limits{}, Amounts{Kernels: 1000}, Amounts{Kernels: 1}); err != nil {
		t.Errorf("no limits: %v", err)
	}
	// Terminals are counted apart from kernels: a terminal is no kernel.
	room := TerminalRoom("t1", "python3", corev1.ResourceRequirements{})
	add := Of(&room)
	if err := Check("ann", Limits{Kernels: new(int64(1)), Terminals: new(int64(1))}, Amounts{Kernels: 1}, add); err != nil {
		t.Errorf("a terminal refused for kernels: %v", err)
	}
	if err := Check("ann", Limits{Terminals: new(int64(1))}, Amounts{Terminals: 1}, add); !errors.As(err, &ex) || ex.Reason() != "terminals: 1 of 1" {
		t.Errorf("a second terminal over a limit of one: %v", err)
	}
}

func TestRequestedAndKernelResources(t *testing.T) {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("1")},
	}
	cpu, mem, gpu := Requested(res, 3)
	if cpu.String() != "1500m" || mem.String() != "3Gi" || gpu.String() != "3" {
		t.Errorf("3 of %v: cpu %s memory %s gpu %s", res, cpu.String(), mem.String(), gpu.String())
	}
	merged := KernelResources(res, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
	})
	c, m, e := merged.Requests[corev1.ResourceCPU], merged.Limits[corev1.ResourceMemory], merged.Requests[corev1.ResourceEphemeralStorage]
	if c.String() != "500m" || m.String() != "1Gi" || e.String() != "1Gi" {
		t.Errorf("the spec's own resources must win, defaults fill the rest: %v", merged)
	}
	if _, ok := merged.Requests[corev1.ResourceMemory]; ok {
		t.Errorf("a default request added where the spec limits memory: %v", merged)
	}
	if _, ok := res.Requests[corev1.ResourceEphemeralStorage]; ok {
		t.Error("KernelResources changed its argument")
	}
}

func TestSummary(t *testing.T) {
	s := Summary(Limits{Kernels: new(int64(5)), Terminals: new(int64(2)), Memory: q("8Gi"), Policies: []string{"a", "b"}},
		Amounts{Kernels: 2, Engines: 3, Terminals: 1, Memory: resource.MustParse("1Gi")})
	want := nbv1.UserUsageStatus{Policies: "a,b", Kernels: "2/5", Engines: "3", Terminals: "1/2", CPU: "0", Memory: "1Gi/8Gi", GPU: "0"}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
}
