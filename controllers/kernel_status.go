package controllers

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// kernelObservation is what the reconcile steps found.
type kernelObservation struct {
	spec   *nbv1.KernelSpec
	secret *corev1.Secret
	pod    *corev1.Pod
	// problem found before the pod was looked at (spec missing, pod conflict).
	problem *problem
	// running: the pod is ready and has an address, so its agent can be asked.
	running bool
	// agent is what the kernel's agent reported just now; nil when it was not asked or did
	// not answer.
	agent *agentapi.Status
	// stepErr is the error of the step that failed; the steps after it did not run.
	stepErr error
	// recheck asks for the kernel to be looked at again after it: a refusal that a change
	// elsewhere (the owner's usage, a policy) may lift.
	recheck time.Duration
	// podRestart is the restart request acted on (see restartPod).
	podRestart string
	// podDeleted names the kernel's pod that is gone without a restart request: someone
	// deleted it, and a new one replaces it.
	podDeleted string
}

// kernelStatus computes the status for what was observed. It is pure so that every pod state
// can be table-tested; the reconciler writes it only when it differs.
func kernelStatus(k *nbv1.Kernel, obs kernelObservation, now metav1.Time) nbv1.KernelStatus {
	st := *k.Status.DeepCopy()
	st.ObservedGeneration = k.Generation
	if obs.podRestart != "" {
		st.PodRestart = obs.podRestart
	}
	if obs.stepErr != nil {
		setReconcileError(&st.Conditions, obs.stepErr, k.Generation, now)
		return st
	}
	p := obs.problem
	ready := false
	if p == nil {
		p, ready = podState(obs.pod)
	}
	if obs.podDeleted != "" {
		setCondition(&st.Conditions, nbv1.ConditionRestarted, metav1.ConditionTrue, nbv1.ReasonPodDeleted,
			fmt.Sprintf("the kernel's pod %s was deleted at %s; the kernel runs again in a new pod, without its variables",
				obs.podDeleted, now.UTC().Format(time.RFC3339)), k.Generation, now)
	}
	switch {
	case obs.pod != nil:
		st.PodIP = obs.pod.Status.PodIP
	case obs.podRestart != "":
		// The pod was just replaced: its address is no one's.
		st.PodIP = ""
	}
	switch {
	case ready:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonAgentReady, "the kernel's agent accepts connections", k.Generation, now)
		meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
		switch {
		case obs.agent != nil:
			applyAgentReport(&st, *obs.agent)
			if d := obs.agent.LastDeath; d != nil {
				setCondition(&st.Conditions, nbv1.ConditionRestarted, metav1.ConditionTrue, nbv1.ReasonKernelDied,
					fmt.Sprintf("%s at %s; the agent started it again in the same pod, without its variables (restart %d)",
						d, d.At.UTC().Format(time.RFC3339), d.Restart), k.Generation, now)
			}
		case st.LastActivity == nil && (st.ExecutionState == "" || st.ExecutionState == nbv1.ExecutionStateStarting || st.ExecutionState == nbv1.ExecutionStateDead):
			// Until the agent first reports (every report has a last activity), a ready
			// agent means a kernel that has started and waits for work.
			st.ExecutionState = nbv1.ExecutionStateIdle
		}
	case p.fatal:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, p.reason, p.message, k.Generation, now)
		setCondition(&st.Conditions, nbv1.ConditionFailed, metav1.ConditionTrue, p.reason, p.message, k.Generation, now)
		st.ExecutionState = nbv1.ExecutionStateDead
	default:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, p.reason, p.message, k.Generation, now)
		meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
		if p.reason == nbv1.ReasonPodTerminating {
			st.ExecutionState = nbv1.ExecutionStateDead
		} else if st.ExecutionState != nbv1.ExecutionStateRestarting {
			st.ExecutionState = nbv1.ExecutionStateStarting
		}
	}
	return st
}

// knownStates are the execution states the Kernel's schema allows.
var knownStates = map[nbv1.ExecutionState]bool{
	nbv1.ExecutionStateStarting: true, nbv1.ExecutionStateIdle: true, nbv1.ExecutionStateBusy: true,
	nbv1.ExecutionStateRestarting: true, nbv1.ExecutionStateDead: true,
}

// applyAgentReport puts the agent's report into the status. The last activity is kept to
// the second the API stores (so that an unchanged one is not written again) and only moves
// forward: a report from a new pod on a node whose clock lags does not take it back.
func applyAgentReport(st *nbv1.KernelStatus, rep agentapi.Status) {
	if s := nbv1.ExecutionState(rep.ExecutionState); knownStates[s] {
		st.ExecutionState = s
	}
	if !rep.LastActivity.IsZero() {
		t := metav1.NewTime(rep.LastActivity.UTC().Truncate(time.Second))
		if st.LastActivity == nil || t.After(st.LastActivity.Time) {
			st.LastActivity = &t
		}
	}
	st.Connections = toInt32(rep.Connections)
	st.RestartCount = toInt32(rep.RestartCount)
	// A new pod's agent that has written nothing yet leaves the last write told.
	if w := rep.OutputsWritten; w != nil {
		st.OutputsWritten = &nbv1.OutputsWritten{Time: metav1.NewTime(w.At.UTC().Truncate(time.Second)), Notebook: w.Notebook,
			Cells: toInt32(w.Cells), Writes: max(w.Writes, 0)}
	}
}

func toInt32(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}
