package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

func TestValidateKernelSpec(t *testing.T) {
	valid := nbv1.KernelSpecSpec{DisplayName: "P", Language: "python", Argv: []string{"python3", "-f", "{connection_file}"}}
	tests := []struct {
		name   string
		mod    func(*nbv1.KernelSpecSpec)
		defImg string
		want   []string // substrings, one per problem
	}{
		{name: "valid with default image", mod: func(*nbv1.KernelSpecSpec) {}, defImg: "img:1", want: nil},
		{name: "no image anywhere", mod: func(*nbv1.KernelSpecSpec) {}, defImg: "", want: []string{"no image"}},
		{name: "bad image", mod: func(s *nbv1.KernelSpecSpec) { s.Image = "example.com/UPPER:1" }, defImg: "", want: []string{`image "example.com/UPPER:1"`}},
		{name: "empty program", mod: func(s *nbv1.KernelSpecSpec) { s.Argv[0] = " " }, defImg: "img:1", want: []string{"argv[0]"}},
		{name: "bad env name", mod: func(s *nbv1.KernelSpecSpec) { s.Env = map[string]string{"A=B": "x", "OK": "y"} }, defImg: "img:1", want: []string{`env "A=B"`}},
		{name: "request above limit", mod: func(s *nbv1.KernelSpecSpec) {
			s.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
			s.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, defImg: "img:1", want: []string{"memory request 2Gi exceeds its limit 1Gi"}},
		{name: "png logo that is not", mod: func(s *nbv1.KernelSpecSpec) {
			s.Logo = &nbv1.KernelLogo{FileName: "logo-64x64.png", Data: []byte("<svg/>")}
		}, defImg: "img:1", want: []string{"not a PNG"}},
		{name: "image parameter of a bad image", mod: func(s *nbv1.KernelSpecSpec) {
			s.Parameters = []nbv1.KernelParameter{{Name: "image", Type: nbv1.ParameterString, Default: "python:3.12",
				Enum: []string{"python:3.12", "Bad Image"}, Image: true}}
		}, defImg: "img:1", want: []string{`parameter image: image "Bad Image"`}},
		{name: "svg logo", mod: func(s *nbv1.KernelSpecSpec) {
			s.Logo = &nbv1.KernelLogo{FileName: "logo-svg.svg", Data: []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>`)}
		}, defImg: "img:1", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := *valid.DeepCopy()
			tc.mod(&s)
			got := validateKernelSpec(&s, builder.Options{DefaultKernelImage: tc.defImg})
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q lacks %q", got[i], tc.want[i])
				}
			}
		})
	}
	if d := cmp.Diff([]string(nil), validateKernelSpec(&valid, builder.Options{DefaultKernelImage: "docker.io/library/python:3.12"})); d != "" {
		t.Error(d)
	}
}
