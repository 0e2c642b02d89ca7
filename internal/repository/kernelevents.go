package repository

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// KernelEvents tells what happened to kernels that only the cluster knows (a kernel that
// died, and why; one culled), as nbkube's kernel_status events, from the Kernels as this
// replica's cache sees them: every replica tells its own subscribers, whichever replica (or
// controller) caused it.
type KernelEvents struct {
	Informers cache.Informers
}

// Watch calls emit with the owner and data of each kernel_status event until ctx ends.
// Kernels that exist when it starts tell nothing of their past.
func (k *KernelEvents) Watch(ctx context.Context, emit func(owner string, data map[string]any)) error {
	inf, err := k.Informers.GetInformer(ctx, &nbv1.Kernel{})
	if err != nil {
		return fmt.Errorf("watch kernels for events: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			before, ok1 := o.(*nbv1.Kernel)
			after, ok2 := n.(*nbv1.Kernel)
			if ok1 && ok2 {
				for _, data := range KernelChanged(before, after) {
					emit(string(after.Spec.Owner), data)
				}
			}
		},
		DeleteFunc: func(o any) {
			if gone, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = gone.Obj
			}
			if k, ok := o.(*nbv1.Kernel); ok {
				if data, ok := KernelDeleted(k); ok {
					emit(string(k.Spec.Owner), data)
				}
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch kernels for events: %w", err)
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

// KernelChanged is the kernel_status events of a change of a Kernel: a new unasked restart
// (its process died, or its pod was deleted) or a failure (OOMKilled, evicted, an image that
// cannot be pulled) is "died", with the condition's reason and message; a new write of the
// outputs of runs whose client was away is "outputs_written", with the notebook's path as
// the kernel's owner sees it and the cells it changed.
func KernelChanged(before, after *nbv1.Kernel) []map[string]any {
	var told []map[string]any
	if c := meta.FindStatusCondition(after.Status.Conditions, nbv1.ConditionRestarted); c != nil && c.Status == metav1.ConditionTrue {
		if o := meta.FindStatusCondition(before.Status.Conditions, nbv1.ConditionRestarted); o == nil || o.Message != c.Message {
			told = append(told, kernelStatusEvent(after, "died", c))
		}
	}
	if c := meta.FindStatusCondition(after.Status.Conditions, nbv1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		if o := meta.FindStatusCondition(before.Status.Conditions, nbv1.ConditionFailed); o == nil || o.Status != c.Status || o.Reason != c.Reason {
			told = append(told, kernelStatusEvent(after, "died", c))
		}
	}
	if w := after.Status.OutputsWritten; w != nil {
		if o := before.Status.OutputsWritten; o == nil || !o.Time.Equal(&w.Time) || o.Writes != w.Writes || o.Notebook != w.Notebook {
			data := kernelEvent(after, "outputs_written")
			data["path"], data["cells"] = w.Notebook, int(w.Cells)
			told = append(told, data)
		}
	}
	return told
}

// KernelDeleted is the kernel_status event of a deleted Kernel, if it tells one: "culled"
// when the culler deleted it.
func KernelDeleted(k *nbv1.Kernel) (map[string]any, bool) {
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionCulled); c != nil && c.Status == metav1.ConditionTrue {
		return kernelStatusEvent(k, "culled", c), true
	}
	return nil, false
}

// kernelStatusEvent is the event of action told by condition c of k.
func kernelStatusEvent(k *nbv1.Kernel, action string, c *metav1.Condition) map[string]any {
	data := kernelEvent(k, action)
	data["reason"], data["msg"] = c.Reason, c.Message
	return data
}

// kernelEvent is the fields of a kernel_status event of k that every action has.
func kernelEvent(k *nbv1.Kernel, action string) map[string]any {
	data := map[string]any{"action": action, "kernel_id": k.Name}
	if k.Spec.KernelSpec != "" {
		data["kernel_name"] = k.Spec.KernelSpec
	}
	return data
}
