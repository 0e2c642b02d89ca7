package localnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeMatches_AppliesNodeSelectorAndRequiredAffinity(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nbkube-local", Labels: map[string]string{
		"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "cores": "8",
	}}}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	exprs := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	tests := []struct {
		name     string
		selector map[string]string
		affinity *corev1.Affinity
		want     bool
	}{
		{"nothing asked", nil, nil, true},
		{"matching selector", map[string]string{"kubernetes.io/os": "linux"}, nil, true},
		{"mismatching selector", map[string]string{"kubernetes.io/os": "windows"}, nil, false},
		{"selector on a missing label", map[string]string{"gpu": "true"}, nil, false},
		{"In", nil, affinity(exprs(req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64", "amd64"))), true},
		{"In without the value", nil, affinity(exprs(req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64"))), false},
		{"NotIn", nil, affinity(exprs(req("kubernetes.io/arch", corev1.NodeSelectorOpNotIn, "arm64"))), true},
		{"NotIn on a missing label", nil, affinity(exprs(req("zone", corev1.NodeSelectorOpNotIn, "a"))), true},
		{"Exists", nil, affinity(exprs(req("cores", corev1.NodeSelectorOpExists))), true},
		{"Exists on a missing label", nil, affinity(exprs(req("gpu", corev1.NodeSelectorOpExists))), false},
		{"DoesNotExist", nil, affinity(exprs(req("gpu", corev1.NodeSelectorOpDoesNotExist))), true},
		{"Gt", nil, affinity(exprs(req("cores", corev1.NodeSelectorOpGt, "4"))), true},
		{"Lt", nil, affinity(exprs(req("cores", corev1.NodeSelectorOpLt, "4"))), false},
		{"all expressions of a term must hold", nil, affinity(exprs(
			req("cores", corev1.NodeSelectorOpExists), req("gpu", corev1.NodeSelectorOpExists))), false},
		{"any term may hold", nil, affinity(
			exprs(req("gpu", corev1.NodeSelectorOpExists)), exprs(req("cores", corev1.NodeSelectorOpExists))), true},
		{"an empty term matches nothing", nil, affinity(corev1.NodeSelectorTerm{}), false},
		{"matchFields on the node name", nil, affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			req("metadata.name", corev1.NodeSelectorOpIn, "nbkube-local")}}), true},
		{"selector and affinity both apply", map[string]string{"kubernetes.io/os": "windows"},
			affinity(exprs(req("cores", corev1.NodeSelectorOpExists))), false},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: tt.selector, Affinity: tt.affinity}}
		if got := nodeMatches(pod, node); got != tt.want {
			t.Errorf("%s: nodeMatches = %v, want %v", tt.name, got, tt.want)
		}
	}
}
