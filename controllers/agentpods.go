package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

// createAgentPod creates pod, the pod of obj (a kernel or a terminal: what says which in the
// log) in which an agent runs, controlled by obj and mounting claim in place of the home's
// subPath when there is one. It returns the pod in effect: the one it made, or obj's own that
// already had the name (ours, not in the cache yet; its own event brings the reconcile back);
// errPodConflict when the name is another's.
func createAgentPod(ctx context.Context, c client.Client, reader client.Reader, rec events.EventRecorder, obj client.Object, pod *corev1.Pod, claim, what string) (*corev1.Pod, error) {
	if claim != "" {
		builder.UseClaim(pod, claim)
	}
	if existing, err := createOwnedPod(ctx, c, reader, obj, pod); existing != nil || err != nil {
		return existing, err
	}
	log.FromContext(ctx).Info("Created "+what+" pod", "pod", klog.KObj(pod))
	// A pod made as usual is no event of its own (the status says as much, and the event was
	// one more API write in every start); one mounting the owner's claim is, since nothing
	// else tells which home it got.
	if claim != "" {
		recordEvent(rec, obj, pod, corev1.EventTypeNormal, nbv1.EventCreatedPod, "Create", "Created pod %s with the owner's claim %s", pod.Name, claim)
	}
	// The creation brings obj back; a reconcile that ran before the cache held the pod would
	// create it again, to be refused and read around the cache.
	return pod, waitCache(ctx, c, client.ObjectKeyFromObject(pod), func(_ *corev1.Pod, err error) bool { return err == nil })
}

// errPodConflict: a pod of the name exists and is not the resource's.
var errPodConflict = errors.New("the pod exists and belongs to another")

// createOwnedPod creates pod for owner. When one of its name exists it returns that one, if it is
// owner's, or errPodConflict; nil and nil when it made pod.
func createOwnedPod(ctx context.Context, c client.Client, reader client.Reader, owner client.Object, pod *corev1.Pod) (*corev1.Pod, error) {
	err := c.Create(ctx, pod)
	switch {
	case err == nil:
		return nil, nil
	case !apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	existing := &corev1.Pod{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
		return nil, fmt.Errorf("get pod %s: %w", pod.Name, err)
	}
	if !metav1.IsControlledBy(existing, owner) {
		return nil, errPodConflict
	}
	return existing, nil
}

// ownClaim is the claim that the pod of obj, owner's with home, mounts in place of the home's
// subPath (see KernelReconciler.ownClaim); obj's events say why it has none.
func ownClaim(ctx context.Context, reader client.Reader, rec events.EventRecorder, obj client.Object, owner nbv1.Owner, home string, o builder.Options) (string, error) {
	name, err := builder.OwnClaimOf(owner, home, o)
	if err != nil {
		recordEvent(rec, obj, nil, corev1.EventTypeNormal, nbv1.EventHomeOnSharedVolume, "Create", "Mounting the home from the contents volume: %v", err)
		return "", nil
	}
	if name == "" {
		return "", nil
	}
	ns := obj.GetNamespace()
	pvc := &corev1.PersistentVolumeClaim{}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); {
	case apierrors.IsNotFound(err):
		recordEvent(rec, obj, nil, corev1.EventTypeNormal, nbv1.EventHomeOnSharedVolume, "Create", "Mounting the home from the contents volume: the owner has no claim %s", name)
		return "", nil
	case err != nil:
		return "", fmt.Errorf("get the owner's claim %s: %w", name, err)
	case pvc.DeletionTimestamp != nil:
		return "", fmt.Errorf("the owner's claim %s is being deleted", name)
	}
	return name, nil
}
