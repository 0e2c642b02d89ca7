package controllers_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// contentsSubPath is the subPath of the contents mount of a kernel pod, and whether it has one.
func contentsSubPath(pod *corev1.Pod) (string, bool) {
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == "contents" {
			return m.SubPath, true
		}
	}
	return "", false
}

// The suite's manager has homes on ({username}), as the chart's does. A Kernel made with
// kubectl without a home mounts its owner's; one that says home "/" the whole volume; one
// whose owner makes no home gets no pod and says why.
func TestKernel_MountsItsOwnersHomeUnlessItNamesOne(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	for _, tc := range []struct {
		name, home, subPath string
	}{{"kubectl-made", "", "alice"}, {"whole-volume", nbv1.HomeWholeVolume, ""}, {"named", "shared/alice", "shared/alice"}} {
		k := kernel(ns, tc.name, "python3")
		k.Spec.Home = tc.home
		create(t, k)
		if got, ok := contentsSubPath(kernelPod(t, k)); !ok || got != tc.subPath {
			t.Errorf("%s: the pod mounts the contents with subPath %q (mounted: %v), want %q", tc.name, got, ok, tc.subPath)
		}
	}

	homeless := kernel(ns, "homeless", "python3")
	homeless.Spec.Owner = ".."
	create(t, homeless)
	kernelCondition(t, homeless, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonHomeInvalid)
	if err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: homeless.Name}}); err == nil {
		t.Error("a kernel whose owner has no home got a pod")
	}
}
