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
		{name: "nothing asked", selector: nil, affinity: nil, want: true},
		{name: "matching selector", selector: map[string]string{"kubernetes.io/os": "linux"}, affinity: nil, want: true},
		{name: "mismatching selector", selector: map[string]string{"kubernetes.io/os": "windows"}, affinity: nil, want: false},
		{name: "selector on a missing label", selector: map[string]string{"gpu": "true"}, affinity: nil, want: false},
		{name: "In", selector: nil, affinity: affinity(exprs(req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64", "amd64"))), want: true},
		{name: "In without the value", selector: nil, affinity: affinity(exprs(req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64"))), want: false},
		{name: "NotIn", selector: nil, affinity: affinity(exprs(req("kubernetes.io/arch", corev1.NodeSelectorOpNotIn, "arm64"))), want: true},
		{name: "NotIn on a missing label", selector: nil, affinity: affinity(exprs(req("zone", corev1.NodeSelectorOpNotIn, "a"))), want: true},
		{name: "Exists", selector: nil, affinity: affinity(exprs(req("cores", corev1.NodeSelectorOpExists))), want: true},
		{name: "Exists on a missing label", selector: nil, affinity: affinity(exprs(req("gpu", corev1.NodeSelectorOpExists))), want: false},
		{name: "DoesNotExist", selector: nil, affinity: affinity(exprs(req("gpu", corev1.NodeSelectorOpDoesNotExist))), want: true},
		{name: "Gt", selector: nil, affinity: affinity(exprs(req("cores", corev1.NodeSelectorOpGt, "4"))), want: true},
		{name: "Lt", selector: nil, affinity: affinity(exprs(req("cores", corev1.NodeSelectorOpLt, "4"))), want: false},
		{name: "all expressions of a term must hold", selector: nil, affinity: affinity(exprs(
			req("cores", corev1.NodeSelectorOpExists), req("gpu", corev1.NodeSelectorOpExists))), want: false},
		{name: "any term may hold", selector: nil, affinity: affinity(
			exprs(req("gpu", corev1.NodeSelectorOpExists)), exprs(req("cores", corev1.NodeSelectorOpExists))), want: true},
		{name: "an empty term matches nothing", selector: nil, affinity: affinity(corev1.NodeSelectorTerm{}), want: false},
		{name: "matchFields on the node name", selector: nil, affinity: affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			req("metadata.name", corev1.NodeSelectorOpIn, "nbkube-local")}}), want: true},
		{name: "selector and affinity both apply", selector: map[string]string{"kubernetes.io/os": "windows"},
			affinity: affinity(exprs(req("cores", corev1.NodeSelectorOpExists))), want: false},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: tt.selector, Affinity: tt.affinity}}
		if got := nodeMatches(pod, node); got != tt.want {
			t.Errorf("%s: nodeMatches = %v, want %v", tt.name, got, tt.want)
		}
	}
}
