package controllers_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// restartRequest sets the kernel's restart annotation to value, as the API server does for a
// dead kernel.
func restartRequest(t *testing.T, k *nbv1.Kernel, value string) {
	t.Helper()
	eventually(t, "restart annotation", func() error {
		if err := get(k); err != nil {
			return err
		}
		before := k.DeepCopy()
		if k.Annotations == nil {
			k.Annotations = map[string]string{}
		}
		k.Annotations[nbv1.AnnotationRestart] = value
		return k8sClient.Patch(context.Background(), k, client.MergeFrom(before))
	})
}

// A dead kernel (its pod failed: OOM, a node's restart) is brought back by a restart
// request: the controller replaces the pod under the same kernel id and records the request;
// a request for a kernel whose pod is ready only gets recorded (its agent restarts it).
func TestKernel_RestartRequestReplacesAPodThatCannotRestartIt(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	runningKernel(t, k, "10.30.0.1")
	old := kernelPod(t, k)
	setPodStatus(t, old, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.Conditions = nil
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown"}}}}
	})
	kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, "ContainerStatusUnknown")

	restartRequest(t, k, "r1")
	eventually(t, "a new pod and the request recorded", func() error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.Name}}
		if err := get(pod); err != nil {
			return err
		}
		if pod.UID == old.UID {
			return fmt.Errorf("still the old pod")
		}
		if err := get(k); err != nil {
			return err
		}
		if k.Status.PodRestart != "r1" || meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed) != nil {
			return fmt.Errorf("podRestart %q, conditions %v", k.Status.PodRestart, k.Status.Conditions)
		}
		return nil
	})
	runningKernel(t, k, "10.30.0.2")

	// Ready: the request is recorded and the pod stays.
	ready := kernelPod(t, k)
	restartRequest(t, k, "r2")
	eventually(t, "the second request recorded", func() error {
		if err := get(k); err != nil {
			return err
		}
		if k.Status.PodRestart != "r2" {
			return fmt.Errorf("podRestart %q", k.Status.PodRestart)
		}
		return nil
	})
	if pod := kernelPod(t, k); pod.UID != ready.UID {
		t.Error("a ready pod was replaced")
	}
}
