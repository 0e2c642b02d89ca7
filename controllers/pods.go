package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// Pods as both kinds that run them, Kernels and Clusters, read and change them.

// fatalWaitingReasons are container waiting reasons after which a pod will not start without
// a change; its kernel or cluster fails fast instead of leaving its client waiting.
// ErrImagePull is not among them: it comes once before the back-off and may be transient,
// unless its message says that retrying cannot help (definitivePullErrors).
var fatalWaitingReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// definitivePullErrors are what the runtime's ErrImagePull message says when the image does
// not exist, its registry's name does not resolve, nothing listens at the registry's address,
// or access is refused: the back-off that follows (measured 40 s in a real cluster) would
// only delay the same answer. A timeout is not among them: a slow network may answer next.
var definitivePullErrors = []string{"not found", "no such host", "connection refused", "unauthorized", "denied"}

// fatalWaiting says whether a container waiting so will not start without a change.
func fatalWaiting(w *corev1.ContainerStateWaiting) bool {
	if fatalWaitingReasons[w.Reason] {
		return true
	}
	if w.Reason != "ErrImagePull" {
		return false
	}
	msg := strings.ToLower(w.Message)
	return slices.ContainsFunc(definitivePullErrors, func(s string) bool { return strings.Contains(msg, s) })
}

// unboundClaims is what kube-scheduler's volume binding says of a pod whose claims wait for
// a volume.
const unboundClaims = "unbound immediate PersistentVolumeClaims"

// unschedulable returns the scheduler's message when it found no node for the pod. A pod whose
// claims are not bound yet does not count: the scheduler says so while a provisioner still makes
// the volume (right after an install, or for a new user's home) and tries again once it is
// bound. A claim that is never bound ends in the start timeout.
func unschedulable(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, !strings.Contains(c.Message, unboundClaims)
		}
	}
	return "", false
}

// podState says whether the pod is ready and, if not, why. The reasons of the kubelet and the
// scheduler are passed through.
func podState(pod *corev1.Pod) (*problem, bool) {
	if pod == nil {
		return &problem{reason: nbv1.ReasonPodCreating, message: "the kernel pod is being created"}, false
	}
	if pod.DeletionTimestamp != nil {
		return &problem{reason: nbv1.ReasonPodTerminating, message: "the kernel pod is being deleted"}, false
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		reason, msg := terminatedReason(pod)
		return &problem{reason: reason, message: msg, fatal: true}, false
	case corev1.PodSucceeded:
		return &problem{reason: nbv1.ReasonKernelExited, message: "the kernel exited", fatal: true}, false
	}
	if msg, ok := unschedulable(pod); ok {
		return &problem{reason: nbv1.ReasonUnschedulable, message: "no node can run the kernel: " + msg, fatal: true}, false
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && fatalWaiting(w) {
			return &problem{reason: nbv1.ConditionReason(w.Reason), message: fmt.Sprintf("container %s: %s", cs.Name, w.Message), fatal: true}, false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil, true
		}
	}
	if pod.Spec.NodeName == "" {
		if msg, _ := unschedulable(pod); msg != "" {
			return &problem{reason: nbv1.ReasonPodPending, message: "the kernel pod waits for its volumes to be bound: " + msg}, false
		}
		return &problem{reason: nbv1.ReasonPodPending, message: "the kernel pod waits for a node"}, false
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return &problem{reason: nbv1.ConditionReason(w.Reason), message: fmt.Sprintf("container %s: %s", cs.Name, w.Message)}, false
		}
	}
	return &problem{reason: nbv1.ReasonPodNotReady, message: "the kernel's agent is not ready yet"}, false
}

// terminatedReason explains a failed pod from its containers' last states.
func terminatedReason(pod *corev1.Pod) (nbv1.ConditionReason, string) {
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		reason := nbv1.ConditionReason(t.Reason)
		if reason == "" || reason == "Error" {
			reason = nbv1.ReasonPodFailed
		}
		msg := fmt.Sprintf("container %s exited with code %d", cs.Name, t.ExitCode)
		if m := strings.TrimSpace(t.Message); m != "" {
			msg += ": " + m
		}
		return reason, msg
	}
	msg := "the kernel pod failed"
	if pod.Status.Message != "" {
		msg += ": " + pod.Status.Message
	}
	reason := nbv1.ConditionReason(pod.Status.Reason)
	if reason == "" {
		reason = nbv1.ReasonPodFailed
	}
	return reason, msg
}

// finishedAt is when a finished pod's container stopped, or its creation if that is unknown.
func finishedAt(p *corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			return t.FinishedAt.Time
		}
	}
	return p.CreationTimestamp.Time
}

// createPod creates a pod and waits until the cache shows it, so that the next reconcile,
// which the creation itself triggers, does not count one too few and create another. A
// creation the API server refuses (quota, admission) comes back as refused rather than err:
// it does not get better by retrying at once, and the owner's status says why.
func createPod(ctx context.Context, c client.Client, p *corev1.Pod) (refused, err error) {
	if err := c.Create(ctx, p); apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return err, nil
	} else if err != nil {
		return nil, fmt.Errorf("create pod: %w", err)
	}
	return nil, waitCache(ctx, c, client.ObjectKeyFromObject(p), func(_ *corev1.Pod, err error) bool { return err == nil })
}

// deletePod deletes a pod and waits until the cache shows it deleted or being deleted.
func deletePod(ctx context.Context, c client.Client, p *corev1.Pod) error {
	if err := c.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	return waitCache(ctx, c, client.ObjectKeyFromObject(p), func(seen *corev1.Pod, err error) bool {
		return apierrors.IsNotFound(err) || (err == nil && (seen.DeletionTimestamp != nil || seen.UID != p.UID))
	})
}

// waitCache polls the cache until done says the pod at key reads as expected, for at most 5 s:
// a cache that lags longer only costs a reconcile that acts on what it shows.
func waitCache(ctx context.Context, c client.Reader, key client.ObjectKey, done func(*corev1.Pod, error) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		seen := &corev1.Pod{}
		return done(seen, c.Get(ctx, key, seen)), nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return nil
	}
	return err
}
