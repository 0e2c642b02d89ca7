package repository

// The state of a kernel whose start is answered but not yet recorded.
//
// A start answers once the kernel's agent says the kernel answered kernel_info. The kernel
// controller records that in the Kernel's status (Ready, the agent's state and last activity)
// only once the pod is Ready, which comes later: under nbkube local the node probes readiness
// first a second after the agent starts, while a forked kernel answers within a fifth of
// one; on a cluster the pod's status, the controller's question to the agent and its write
// follow the answer by some milliseconds. Until then the status says "starting" since the
// kernel's creation. Jupyter's answer to a start and its lists agree, so a start answers,
// and a list shows meanwhile, what the controller will record: the agent's report.

import (
	"context"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// reportTimeout bounds asking an agent for a kernel's state while listing: an agent answers
// in milliseconds, and one that does not leaves the model as the resource has it.
const reportTimeout = time.Second

// startUnrecorded tells a kernel whose pod has an address but whose status does not record
// it ready (nor failed) yet: its agent may have answered a start already.
func startUnrecorded(kn *nbv1.Kernel) bool {
	return kn.DeletionTimestamp == nil && kn.Status.PodIP != "" &&
		!meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionReady) &&
		!meta.IsStatusConditionTrue(kn.Status.Conditions, nbv1.ConditionFailed)
}

// withReport is kn with its agent's report st as the kernel controller records it
// (controllers.applyAgentReport): the state the agent tells, the last activity to the
// second the API keeps and never earlier than recorded, the connections.
func withReport(kn *nbv1.Kernel, st agentapi.Status) *nbv1.Kernel {
	kn = kn.DeepCopy()
	switch s := nbv1.ExecutionState(st.ExecutionState); s {
	case nbv1.ExecutionStateStarting, nbv1.ExecutionStateIdle, nbv1.ExecutionStateBusy,
		nbv1.ExecutionStateRestarting, nbv1.ExecutionStateDead:
		kn.Status.ExecutionState = s
	}
	if !st.LastActivity.IsZero() {
		t := metav1.NewTime(st.LastActivity.UTC().Truncate(time.Second))
		if kn.Status.LastActivity == nil || t.After(kn.Status.LastActivity.Time) {
			kn.Status.LastActivity = &t
		}
	}
	kn.Status.Connections = int32(min(max(st.Connections, 0), math.MaxInt32))
	return kn
}

// asRecorded is the kernels as their models are to show: each whose agent says it is ready
// while its status does not record it yet carries the agent's report as the controller will
// record it (withReport). The agents are asked side by side; the others keep their resource.
func (k *Kernels) asRecorded(ctx context.Context, kernels []*nbv1.Kernel) []*nbv1.Kernel {
	out := make([]*nbv1.Kernel, len(kernels))
	var wg sync.WaitGroup
	for i, kn := range kernels {
		out[i] = kn
		if kn == nil || k.Agents == nil || !startUnrecorded(kn) {
			continue
		}
		ep, err := k.endpoint(ctx, kn)
		if err != nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, reportTimeout)
			defer cancel()
			if st, err := k.Agents.Status(ctx, ep); err == nil && st.Ready {
				out[i] = withReport(kn, st)
			}
		})
	}
	wg.Wait()
	return out
}
