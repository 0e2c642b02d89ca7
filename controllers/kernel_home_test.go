package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// contentsClaim is the claim of a kernel pod's contents volume.
func contentsClaim(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == "contents" && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// With claims per user on (the suite's manager: home-{username}), a kernel in its owner's home
// mounts the owner's claim, whole, where the admin has made one; an owner without one keeps
// the home's subPath of the contents volume, and the kernel's events say so; a kernel over the
// whole volume keeps the contents volume.
func TestKernel_MountsItsOwnersClaimWhereThereIsOne(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	create(t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-carol"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	for _, tc := range []struct {
		name, owner, home, claim, subPath string
	}{
		{"carols", "carol", "", "home-carol", ""},
		{"carols-named", "carol", "carol", "home-carol", ""},
		{"carols-whole", "carol", nbv1.HomeWholeVolume, "contents", ""},
		{"alices", "alice", "", "contents", "alice"},
	} {
		k := kernel(ns, tc.name, "python3")
		k.Spec.Owner, k.Spec.Home = nbv1.Owner(tc.owner), tc.home
		create(t, k)
		pod := kernelPod(t, k)
		if got, sub := contentsClaim(pod), mustSubPath(t, pod); got != tc.claim || sub != tc.subPath {
			t.Errorf("%s: the pod mounts claim %q with subPath %q, want %q with %q", tc.name, got, sub, tc.claim, tc.subPath)
		}
	}
	eventually(t, "alice's kernel says her home is on the contents volume", func() error {
		return findEvent(ns, "alices", "Kernel", nbv1.EventHomeOnSharedVolume)
	})
	if err := findEvent(ns, "carols", "Kernel", nbv1.EventHomeOnSharedVolume); err == nil {
		t.Error("carol's kernel says her home is on the contents volume")
	}
	eventually(t, "carol's kernel names her claim as its pod is made", func() error {
		var evs eventsv1.EventList
		if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "carols" && e.Reason == string(nbv1.EventCreatedPod) {
				if !strings.Contains(e.Note, "home-carol") {
					return fmt.Errorf("the CreatedPod event says %q", e.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("no CreatedPod event yet")
	})
}

func mustSubPath(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	sub, ok := contentsSubPath(pod)
	if !ok {
		t.Fatalf("pod %s does not mount the contents", pod.Name)
	}
	return sub
}
