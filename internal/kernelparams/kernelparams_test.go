package kernelparams_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/kernelparams"
)

func q(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// A GPU spec as an admin would write one: cores, memory in GiB, a GPU or none, an image from a
// list, a log level passed on the command line and in the environment.
func gpuSpec() *nbv1.KernelSpec {
	return &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{Name: "python-gpu"},
		Spec: nbv1.KernelSpecSpec{
			DisplayName: "Python (GPU)", Language: "python",
			Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level={log_level}"},
			Env:  map[string]string{"LOG_LEVEL": "{log_level}", "PLAIN": "x"},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			},
			Parameters: []nbv1.KernelParameter{
				{Name: "cpu", Type: nbv1.ParameterNumber, Default: "1", Minimum: q("0.5"), Maximum: q("8"),
					Resource: &nbv1.ParameterResource{Name: "cpu"}},
				{Name: "memory", Title: "Memory (GiB)", Type: nbv1.ParameterInteger, Default: "2", Minimum: q("2"), Maximum: q("32"),
					Resource: &nbv1.ParameterResource{Name: "memory", Unit: "Gi"}},
				{Name: "gpu", Type: nbv1.ParameterInteger, Default: "0", Minimum: q("0"), Maximum: q("1"),
					Resource: &nbv1.ParameterResource{Name: "nvidia.com/gpu", Set: nbv1.SetLimits}},
				{Name: "image", Type: nbv1.ParameterString, Default: "python:3.12", Enum: []string{"python:3.12", "python:3.13"}, Image: true},
				{Name: "log_level", Type: nbv1.ParameterString, Default: "INFO", Enum: []string{"DEBUG", "INFO"}},
				{Name: "tag", Type: nbv1.ParameterString, Default: ""},
				{Name: "debug", Type: nbv1.ParameterBoolean, Default: "false"},
			},
		},
	}
}

func TestResolve_ChecksEveryValueAgainstItsBounds(t *testing.T) {
	spec := gpuSpec()
	got, err := kernelparams.Resolve(spec, map[string]any{
		"cpu": json.Number("2.5"), "memory": float64(16), "gpu": "1", "image": "python:3.13", "debug": true, "tag": "{cpu}",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cpu": "2.5", "memory": "16", "gpu": "1", "image": "python:3.13", "debug": "true", "tag": "{cpu}"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("values: %s", d)
	}

	refused := []struct {
		given map[string]any
		msg   string
	}{
		{map[string]any{"cores": 2}, `no parameter "cores"; it has cpu, memory, gpu, image, log_level, tag, debug`},
		{map[string]any{"cpu": json.Number("9")}, "cpu: 9 is above the maximum 8"},
		{map[string]any{"cpu": json.Number("0.25")}, "cpu: 0.25 is below the minimum 0.5"},
		{map[string]any{"memory": json.Number("2.5")}, `memory: "2.5" is not an integer`},
		{map[string]any{"memory": "lots"}, `memory: "lots" is not an integer`},
		{map[string]any{"gpu": json.Number("-1")}, "gpu: -1 is below the minimum 0"},
		{map[string]any{"image": "evil:latest"}, `image: "evil:latest" is not one of python:3.12, python:3.13`},
		{map[string]any{"debug": "maybe"}, `debug: "maybe" is not true or false`},
		{map[string]any{"cpu": []any{1}}, "cpu: the value must be a number"},
		{map[string]any{"cpu": nil}, "cpu: the value must be a number"},
		{map[string]any{"tag": strings.Repeat("x", 1025)}, "tag: the value must be UTF-8 text of at most 1024 bytes"},
		{map[string]any{"tag": "a\x00b"}, "tag: the value must be UTF-8 text"},
	}
	for _, tc := range refused {
		_, err := kernelparams.Resolve(spec, tc.given)
		if !errors.Is(err, domainerr.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Resolve(%v): %v; want ErrInvalid saying %q", tc.given, err, tc.msg)
		}
	}
	plain := gpuSpec()
	plain.Spec.Parameters = nil
	if _, err := kernelparams.Resolve(plain, map[string]any{"cpu": 1}); err == nil || !strings.Contains(err.Error(), "has no parameters") {
		t.Errorf("a parameter of a spec without any: %v", err)
	}
	if got, err := kernelparams.Resolve(plain, nil); got != nil || err != nil {
		t.Errorf("no parameters: %v, %v", got, err)
	}
}

func TestApply_SubstitutesAndSetsResourcesAndImage(t *testing.T) {
	spec := gpuSpec()
	before := spec.DeepCopy()
	got, err := kernelparams.Apply(spec, map[string]string{"cpu": "2.5", "memory": "16", "gpu": "1", "image": "python:3.13", "log_level": "DEBUG", "tag": "{cpu}"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, spec); d != "" {
		t.Errorf("Apply changed the spec it was given: %s", d)
	}
	s := got.Spec
	if s.Image != "python:3.13" {
		t.Errorf("image %q", s.Image)
	}
	if d := cmp.Diff([]string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level=DEBUG"}, s.Argv); d != "" {
		t.Errorf("argv: %s", d)
	}
	if d := cmp.Diff(map[string]string{"LOG_LEVEL": "DEBUG", "PLAIN": "x"}, s.Env); d != "" {
		t.Errorf("env: %s", d)
	}
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"), "cpu": resource.MustParse("2.5"), "memory": resource.MustParse("16Gi")},
		Limits:   corev1.ResourceList{"cpu": resource.MustParse("2.5"), "memory": resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("1")},
	}
	if !equalResources(want, s.Resources) {
		t.Errorf("resources %v, want %v", s.Resources, want)
	}

	// No values: the defaults.
	def, err := kernelparams.Apply(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.Spec.Image != "python:3.12" || def.Spec.Env["LOG_LEVEL"] != "INFO" {
		t.Errorf("defaults: image %q, env %v", def.Spec.Image, def.Spec.Env)
	}
	if m := def.Spec.Resources.Requests["memory"]; m.String() != "2Gi" {
		t.Errorf("default memory %s", m.String())
	}

	// Values recorded on a Kernel made with kubectl are held to the same bounds.
	for _, bad := range []map[string]string{{"cpu": "100"}, {"image": "evil:latest"}, {"nope": "1"}} {
		if _, err := kernelparams.Apply(spec, bad); !errors.Is(err, domainerr.ErrInvalid) {
			t.Errorf("Apply(%v): %v; want ErrInvalid", bad, err)
		}
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	same := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return same(a.Requests, b.Requests) && same(a.Limits, b.Limits)
}

func TestCheck_FindsWhatTheSchemaCannot(t *testing.T) {
	if p := kernelparams.Check(gpuSpec()); len(p) > 0 {
		t.Fatalf("a good spec: %q", p)
	}
	tests := []struct {
		mod  func(*nbv1.KernelParameter)
		want string
	}{
		{func(p *nbv1.KernelParameter) { p.Default = "9" }, "default of parameter cpu: 9 is above the maximum 8"},
		{func(p *nbv1.KernelParameter) { p.Minimum = q("10") }, "minimum 10 is above maximum 8"},
		{func(p *nbv1.KernelParameter) { p.Maximum = nil }, "parameter cpu sets cpu: it needs a minimum and a maximum"},
		{func(p *nbv1.KernelParameter) { p.Name = "connection_file" }, "{connection_file} is the agent's"},
		{func(p *nbv1.KernelParameter) { p.Enum = []string{"1", "two"} }, `enum of parameter cpu: "two" is not a number`},
	}
	for _, tc := range tests {
		spec := gpuSpec()
		tc.mod(&spec.Spec.Parameters[0])
		got := kernelparams.Check(spec)
		if len(got) == 0 || !strings.Contains(strings.Join(got, "; "), tc.want) {
			t.Errorf("problems %q, want one saying %q", got, tc.want)
		}
	}
	// A request the parameter sets above the spec's own limit.
	spec := gpuSpec()
	spec.Spec.Resources.Limits = corev1.ResourceList{"memory": resource.MustParse("1Gi")}
	spec.Spec.Parameters[1].Resource.Set = nbv1.SetRequests
	if got := kernelparams.Check(spec); len(got) != 1 || !strings.Contains(got[0], "memory request of 2Gi exceeds the kernel spec's limit 1Gi") {
		t.Errorf("problems %q", got)
	}
}

func TestSchema_IsJEP87sParametersObject(t *testing.T) {
	b, err := json.Marshal(kernelparams.Schema(gpuSpec()))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "object", "additionalProperties": false,
		"properties": map[string]any{
			"cpu":       map[string]any{"type": "number", "default": 1.0, "minimum": 0.5, "maximum": 8.0},
			"memory":    map[string]any{"type": "integer", "title": "Memory (GiB)", "default": 2.0, "minimum": 2.0, "maximum": 32.0},
			"gpu":       map[string]any{"type": "integer", "default": 0.0, "minimum": 0.0, "maximum": 1.0},
			"image":     map[string]any{"type": "string", "default": "python:3.12", "enum": []any{"python:3.12", "python:3.13"}},
			"log_level": map[string]any{"type": "string", "default": "INFO", "enum": []any{"DEBUG", "INFO"}},
			"tag":       map[string]any{"type": "string", "default": ""},
			"debug":     map[string]any{"type": "boolean", "default": false},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("schema: %s", d)
	}
	plain := gpuSpec()
	plain.Spec.Parameters = nil
	if s := kernelparams.Schema(plain); s != nil {
		t.Errorf("a spec without parameters: %v", s)
	}
}

func TestFromEnv_ReadsAGatewaysKernelVariables(t *testing.T) {
	got := kernelparams.FromEnv(gpuSpec(), map[string]string{"KERNEL_CPU": "4", "KERNEL_LOG_LEVEL": "DEBUG", "KERNEL_USERNAME": "ann", "CPU": "9"})
	if d := cmp.Diff(map[string]any{"cpu": "4", "log_level": "DEBUG"}, got); d != "" {
		t.Error(d)
	}
}
