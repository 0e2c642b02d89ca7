package controllers

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// The controller remembers the last status it wrote to each Kernel (kernelRecord.own). Its
// own status writes do not bring a kernel back (see SetupWithManager), but a starting
// kernel's pod changes in quick steps, and the reconcile a step brings often reads the Kernel
// from a cache that has not yet seen the write before it. It would compare its observations
// with the status before that write and apply them with the version the write replaced as
// the precondition (applyKernelStatus): an apply that loses to our own (409), then a read of
// the live Kernel and a third write, three requests where one does, for each kernel of a
// burst of starts. So a Kernel that the cache still holds at the version our last write
// replaced is taken to be what that write made of it: the same object, with the status and
// managed fields we wrote and the version the API server gave it. The API server still
// checks that version, so a write by anyone else since is never overwritten: the write loses
// as it would have. (Server-side apply alone does not make the memory needless: without the
// precondition, a status computed from the old copy would remove what our write added, a
// Restarted condition say.)

// maxOwnWrites is how many of our writes in a row the memory follows.
const maxOwnWrites = 8

// ownWrite is the last of our status writes in a row: the versions of the Kernel that they
// replaced, each written on top of the one before (only the status and the managed fields
// changed from one to the next), the version the last one made, and its status and managed
// fields.
type ownWrite struct {
	replaced      []string
	to            string
	status        nbv1.KernelStatus
	managedFields []metav1.ManagedFieldsEntry
}

// wrote records the status write that made written of the Kernel at version from.
func (m *kernelMemory) wrote(key types.NamespacedName, from string, written *nbv1.Kernel) {
	w := &ownWrite{replaced: []string{from}, to: written.ResourceVersion, status: *written.Status.DeepCopy(),
		managedFields: written.DeepCopy().ManagedFields}
	m.with(key, func(rec *kernelRecord) {
		if prev := rec.own; prev != nil && prev.to == from {
			// Written on top of our last write, which the cache may not have seen either.
			w.replaced = append(prev.replaced, from)
			// A cache further behind than that is left to the conflict and the live read.
			w.replaced = w.replaced[max(0, len(w.replaced)-maxOwnWrites):]
		}
		rec.own = w
	})
}

// catchUp brings k, read from the cache, up to the last write recorded for it if the cache
// still holds a version that our writes replaced. Once the cache holds any other version
// (the last write's own, or one someone else made) the record has served and goes.
func (m *kernelMemory) catchUp(key types.NamespacedName, k *nbv1.Kernel) {
	m.with(key, func(rec *kernelRecord) {
		w := rec.own
		if w == nil {
			return
		}
		if !slices.Contains(w.replaced, k.ResourceVersion) {
			rec.own = nil
			return
		}
		k.Status = *w.status.DeepCopy()
		k.ManagedFields = make([]metav1.ManagedFieldsEntry, len(w.managedFields))
		for i := range w.managedFields {
			w.managedFields[i].DeepCopyInto(&k.ManagedFields[i])
		}
		k.ResourceVersion = w.to
	})
}
