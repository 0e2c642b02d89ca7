package builder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// The policy's selectors, matched against the pods the builders make: the cluster's own
// controller is selected; its engines and its owner's kernels are let in; another cluster's
// engines and another user's kernels are not.
func TestClusterNetworkPolicy_LetsInOnlyItsEnginesAndItsOwnersKernels(t *testing.T) {
	o := DefaultOptions()
	c := testCluster(2)
	c.Spec.Owner = "ann@example.com"
	other := testCluster(1)
	other.Name, other.UID, other.Spec.Owner = "c2", "uid-c2", "ben"
	np := ClusterNetworkPolicy(c)
	if refs := np.OwnerReferences; len(refs) != 1 || refs[0].UID != c.UID {
		t.Errorf("owner references %v", refs)
	}
	selects := func(sel *metav1.LabelSelector, pod *corev1.Pod) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(labels.Set(pod.Labels))
	}
	if !selects(&np.Spec.PodSelector, ClusterControllerPod(c, o)) || selects(&np.Spec.PodSelector, ClusterControllerPod(other, o)) {
		t.Error("the policy selects the wrong controllers")
	}
	admitted := func(pod *corev1.Pod) bool {
		for _, peer := range np.Spec.Ingress[0].From {
			if selects(peer.PodSelector, pod) {
				return true
			}
		}
		return false
	}
	kernel := func(owner nbv1.Owner) *corev1.Pod {
		return KernelPod(testKernel(func(k *nbv1.Kernel) { k.Spec.Owner = owner }), testSpec(nil), o)
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"its engine":               {ClusterEnginePod(c, o, "u"), true},
		"its owner's kernel":       {kernel("ann@example.com"), true},
		"another user's kernel":    {kernel("ben"), false},
		"another cluster's engine": {ClusterEnginePod(other, o, "u"), false},
		"another controller":       {ClusterControllerPod(other, o), false},
	} {
		if got := admitted(tc.pod); got != tc.want {
			t.Errorf("%s (labels %v) let in: %v, want %v", name, tc.pod.Labels, got, tc.want)
		}
	}
	p := np.Spec.Ingress[0].Ports[0]
	if p.Port.IntValue() != 10101 || *p.EndPort != 10115 {
		t.Errorf("ports %v-%v", p.Port, *p.EndPort)
	}
}
