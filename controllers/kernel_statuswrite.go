package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// Each writer of a Kernel's status writes it by server-side apply, as a field manager of its
// own, and applies only the fields it owns: the Kernel controller everything but the Culled
// condition, the culler that condition (applyCulled). The conditions are a map keyed by type
// (+listType=map), so neither writer's apply removes or changes the other's condition. The
// API server writes no status: it asks for a restart with an annotation.

// kernelFieldOwner is the field manager of the Kernel controller's status writes.
const kernelFieldOwner = "nbkube-kernel-controller"

// kernelConditions are the condition types the Kernel controller owns.
var kernelConditions = []string{nbv1.ConditionReady, nbv1.ConditionFailed, nbv1.ConditionRestarted}

// legacyStatusManagers are the field managers of the status writes made before the
// controller applied its status: the controller's Status().Update and the culler's merge
// patch, both named by the API server after the binary's user agent. An apply removes only
// the fields its own manager owned, so fields that these Update entries own would stay when
// the controller stops setting them (a Failed condition after a kernel recovers); each
// Kernel's entries are handed over to kernelFieldOwner once, before its next apply
// (migrateStatusOwner). A Culled condition an old culler wrote goes over with them: its
// kernel was deleted right after, so no apply of the controller's follows.
var legacyStatusManagers = sets.New("nbkube")

// applyKernelStatus writes st as k's status unless k already has it: a server-side apply of
// the controller's fields as kernelFieldOwner, with k's resource version as a precondition,
// so that a status computed from an old copy of the Kernel never replaces a newer one (the
// apply would remove what the controller wrote since and the old copy lacks). A write lost to
// a newer version, or to the Kernel's deletion, is no error: applyKernelStatus says so
// (statusLost) and the caller decides. written are the versions of the Kernel that its
// writes made, in order.
func applyKernelStatus(ctx context.Context, c client.Client, k *nbv1.Kernel, st nbv1.KernelStatus) (res statusWrite, written []*nbv1.Kernel, err error) {
	if equality.Semantic.DeepEqual(k.Status, st) {
		return statusUnchanged, nil, nil
	}
	migrated, err := migrateStatusOwner(ctx, c, k)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return statusLost, nil, nil
	case err != nil:
		return statusUnchanged, nil, err
	case migrated != nil:
		written = append(written, migrated)
		k = migrated
	}
	u, err := kernelStatusApply(k, st)
	if err != nil {
		return statusUnchanged, written, err
	}
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(kernelFieldOwner), client.ForceOwnership)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return statusLost, written, nil
	case err != nil:
		return statusUnchanged, written, fmt.Errorf("apply status of kernel %s: %w", k.Name, err)
	}
	applied := &nbv1.Kernel{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return statusUnchanged, written, fmt.Errorf("read applied kernel %s: %w", k.Name, err)
	}
	return statusWritten, append(written, applied), nil
}

// kernelStatusApply is the apply of st as the controller's part of k's status: every field
// but the conditions of other writers, and k's resource version as the precondition. A field
// left empty is left out, which removes it if the controller set it before.
func kernelStatusApply(k *nbv1.Kernel, st nbv1.KernelStatus) (*unstructured.Unstructured, error) {
	st = *st.DeepCopy()
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c metav1.Condition) bool {
		return !slices.Contains(kernelConditions, c.Type)
	})
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(nbv1.GroupVersion.WithKind("Kernel"))
	u.SetNamespace(k.Namespace)
	u.SetName(k.Name)
	u.SetResourceVersion(k.ResourceVersion)
	return u, nil
}

// migrateStatusOwner hands the status fields of the legacy Update managers on k over to
// kernelFieldOwner's apply entry (csaupgrade), with k's resource version as the
// precondition. It returns the Kernel as the hand-over left it, nil when there was nothing
// to hand over.
func migrateStatusOwner(ctx context.Context, c client.Client, k *nbv1.Kernel) (*nbv1.Kernel, error) {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(k, legacyStatusManagers, kernelFieldOwner, csaupgrade.Subresource("status"))
	if err != nil || patch == nil {
		return nil, err
	}
	migrated := k.DeepCopy()
	if err := c.Patch(ctx, migrated, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return nil, fmt.Errorf("hand kernel %s's status over to %s: %w", k.Name, kernelFieldOwner, err)
	}
	return migrated, nil
}

// updateStatus writes the status when it changed and tells of a new failure with an event.
// lost says that the status changed but another write won: our own status writes do not
// bring the kernel back (see SetupWithManager), so the caller tries again.
func (r *KernelReconciler) updateStatus(ctx context.Context, k *nbv1.Kernel, st nbv1.KernelStatus) (lost bool, err error) {
	before := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed)
	res, written, err := applyKernelStatus(ctx, r.Client, k, st)
	key := client.ObjectKeyFromObject(k)
	from := k.ResourceVersion
	for _, w := range written {
		r.memory.wrote(key, from, w)
		from = w.ResourceVersion
	}
	if err != nil {
		return false, err
	}
	after := meta.FindStatusCondition(st.Conditions, nbv1.ConditionFailed)
	if res == statusWritten && after != nil && before == nil {
		countFailure(k, k.Status, nbv1.ConditionReason(after.Reason))
	}
	if res == statusWritten && after != nil && (before == nil || before.Reason != after.Reason) {
		// The failure is an event too, with the condition's reason, so that an admin
		// watching events sees it.
		recordEvent(r.Recorder, k, nil, corev1.EventTypeWarning, nbv1.EventReason(after.Reason), "Start", "%s", after.Message)
	}
	return res == statusLost, nil
}
