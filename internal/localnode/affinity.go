package localnode

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// nodeMatches reports whether a pod's nodeSelector and required node affinity accept a node, with
// kube-scheduler's NodeAffinity semantics: every nodeSelector label must be equal, and at least
// one nodeSelectorTerm must match, where a term matches when all of its expressions and fields do
// (an empty term matches nothing). Preferred affinity only ranks nodes, so with one node it is
// irrelevant; the node has no taints, so tolerations are too.
func nodeMatches(pod *corev1.Pod, node *corev1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	return slices.ContainsFunc(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		func(t corev1.NodeSelectorTerm) bool { return termMatches(t, node) })
}

func termMatches(t corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for _, r := range t.MatchExpressions {
		v, ok := node.Labels[r.Key]
		if !requirementMatches(r, v, ok) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		// metadata.name is the only field the API allows here.
		if r.Key != "metadata.name" || !requirementMatches(r, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(r corev1.NodeSelectorRequirement, value string, present bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}
