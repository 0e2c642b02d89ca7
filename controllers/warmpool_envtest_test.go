package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

// warmKernels are the unclaimed warm kernels of owner in ns.
func warmKernels(t *testing.T, ns, owner string) []nbv1.Kernel {
	t.Helper()
	var l nbv1.KernelList
	if err := k8sClient.List(context.Background(), &l, client.InNamespace(ns), client.MatchingLabels{nbv1.LabelWarm: "true"}); err != nil {
		t.Fatal(err)
	}
	var out []nbv1.Kernel
	for _, k := range l.Items {
		if string(k.Spec.Owner) == owner && k.DeletionTimestamp == nil {
			out = append(out, k)
		}
	}
	return out
}

// waitWarm waits until alice has n warm kernels and returns them.
func waitWarm(t *testing.T, ns string, n int) []nbv1.Kernel {
	t.Helper()
	var ks []nbv1.Kernel
	eventually(t, fmt.Sprintf("%d warm kernels of alice", n), func() error {
		if ks = warmKernels(t, ns, "alice"); len(ks) != n {
			return fmt.Errorf("%d warm kernels", len(ks))
		}
		return nil
	})
	return ks
}

// A user's start of a spec with a warm pool fills their pool: a warm kernel with their
// home, a pod like any kernel's, counted in the spec's status, not in the user's limits.
// Claiming it (removing the label) makes another; a spec that drops its pool, or is gone,
// takes its warm kernels with it.
func TestWarmPool_FilledPerUserReplacedOnClaimAndEmptiedWithTheSpec(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	ks := kernelSpec(ns, "py")
	// The suite's fake clock runs ahead of the real one by the culling tests' steps.
	ks.Spec.WarmPool = &nbv1.WarmPool{Size: 1, ActiveWithin: &metav1.Duration{Duration: 720 * time.Hour}}
	// Alice may have one kernel: her warm one must not take its room.
	create(t, ks, userPolicy(ns, "one", nbv1.UserPolicySpec{Users: []string{"alice"}, Limits: nbv1.UserLimits{Kernels: i32(1)}}))
	if ws := warmKernels(t, ns, "alice"); len(ws) != 0 {
		t.Fatalf("warm kernels before any start: %d", len(ws))
	}
	first := kernelOf(ns, "first", "py", "alice")
	first.Spec.Home = "alice"
	create(t, first)

	w := waitWarm(t, ns, 1)[0]
	if ws := warmKernels(t, ns, "bob"); len(ws) != 0 {
		t.Errorf("bob, who started nothing, has %d warm kernels", len(ws))
	}
	if w.Spec.Home != "alice" || w.Spec.Path != "" || w.Spec.KernelSpec != "py" {
		t.Errorf("warm kernel %+v: want alice's home, no path, spec py", w.Spec)
	}
	pod := kernelPod(t, &w)
	if m := pod.Spec.Containers[0].VolumeMounts; !hasMount(m, "contents", "alice") {
		t.Errorf("the warm kernel's pod mounts %+v, want alice's home", m)
	}
	if pod.Labels[nbv1.LabelOwner] != "alice" {
		t.Errorf("the warm kernel's pod is labelled for %q", pod.Labels[nbv1.LabelOwner])
	}
	userUsage(t, ns, "alice", reserved("1/1", "first"))
	runningKernel(t, &w, "10.9.0.1")
	eventually(t, "the spec counts its ready warm kernel", func() error {
		if err := get(ks); err != nil {
			return err
		}
		if p := ks.Status.WarmPool; p == nil || *p != (nbv1.WarmPoolStatus{Ready: 1, Users: 1}) {
			return fmt.Errorf("status.warmPool %+v", p)
		}
		return nil
	})

	// A claim, as the API server makes it: the label goes, the kernel is the user's.
	update(t, &w, func(k *nbv1.Kernel) {
		delete(k.Labels, nbv1.LabelWarm)
		k.Annotations[nbv1.AnnotationClaimed] = clk.Now().UTC().Format(time.RFC3339)
	})
	next := waitWarm(t, ns, 1)[0]
	if next.Name == w.Name {
		t.Fatal("the claimed kernel is still warm")
	}

	update(t, ks, func(s *nbv1.KernelSpec) { s.Spec.WarmPool = nil })
	waitWarm(t, ns, 0)
	eventually(t, "the spec no longer reports a pool", func() error {
		if err := get(ks); err != nil {
			return err
		}
		if ks.Status.WarmPool != nil {
			return fmt.Errorf("status.warmPool %+v", ks.Status.WarmPool)
		}
		return nil
	})
	if err := get(&w); err != nil || w.DeletionTimestamp != nil {
		t.Errorf("the claimed kernel went with the pool: %v", err)
	}

	update(t, ks, func(s *nbv1.KernelSpec) {
		s.Spec.WarmPool = &nbv1.WarmPool{Size: 2, ActiveWithin: &metav1.Duration{Duration: 720 * time.Hour}}
	})
	waitWarm(t, ns, 2)
	if err := k8sClient.Delete(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, ns, 0)
}

func hasMount(mounts []corev1.VolumeMount, name, subPath string) bool {
	for _, m := range mounts {
		if m.Name == name && m.SubPath == subPath && m.MountPath == builder.ContentsDir {
			return true
		}
	}
	return false
}
