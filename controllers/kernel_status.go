package controllers

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// Reasons of the Kernel conditions (besides the container waiting and termination reasons of
// the pod, which are passed through: ImagePullBackOff, CrashLoopBackOff, OOMKilled, ...).
const (
	ReasonKernelSpecNotFound = "KernelSpecNotFound"
	ReasonKernelSpecInvalid  = "KernelSpecInvalid"
	ReasonPodConflict        = "PodConflict"
	ReasonPodCreating        = "PodCreating"
	ReasonPodPending         = "PodPending"
	ReasonPodNotReady        = "PodNotReady"
	ReasonPodTerminating     = "PodTerminating"
	ReasonPodFailed          = "PodFailed"
	ReasonKernelExited       = "KernelExited"
	ReasonUnschedulable      = corev1.PodReasonUnschedulable
	ReasonAgentReady         = "AgentReady"
)

// fatalWaitingReasons are container waiting reasons after which a kernel will not start
// without a change; the kernel fails fast instead of leaving its client waiting.
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
// not exist, its registry's name does not resolve, or access is refused: the back-off that
// follows (measured 40 s in a real cluster) would only delay the same answer.
var definitivePullErrors = []string{"not found", "no such host", "unauthorized", "denied"}

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

// problem is why a kernel cannot be ready.
type problem struct {
	reason, message string
	// fatal problems need a change before the kernel can run: the Failed condition says so.
	fatal bool
}

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
}

// kernelStatus computes the status for what was observed. It is pure so that every pod state
// can be table-tested; the reconciler writes it only when it differs.
func kernelStatus(k *nbv1.Kernel, obs kernelObservation, now metav1.Time) nbv1.KernelStatus {
	st := *k.Status.DeepCopy()
	st.ObservedGeneration = k.Generation
	p := obs.problem
	ready := false
	if p == nil {
		p, ready = podState(obs.pod)
	}
	if obs.pod != nil {
		st.PodIP = obs.pod.Status.PodIP
	}
	switch {
	case ready:
		setCondition(&st.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, ReasonAgentReady, "the kernel's agent accepts connections", k.Generation, now)
		meta.RemoveStatusCondition(&st.Conditions, nbv1.ConditionFailed)
		switch {
		case obs.agent != nil:
			applyAgentReport(&st, *obs.agent)
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
		if p.reason == ReasonPodTerminating {
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
}

func toInt32(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// podState says whether the kernel pod is ready and, if not, why.
func podState(pod *corev1.Pod) (*problem, bool) {
	if pod == nil {
		return &problem{reason: ReasonPodCreating, message: "the kernel pod is being created"}, false
	}
	if pod.DeletionTimestamp != nil {
		return &problem{reason: ReasonPodTerminating, message: "the kernel pod is being deleted"}, false
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		reason, msg := terminatedReason(pod)
		return &problem{reason: reason, message: msg, fatal: true}, false
	case corev1.PodSucceeded:
		return &problem{reason: ReasonKernelExited, message: "the kernel exited", fatal: true}, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &problem{reason: ReasonUnschedulable, message: "no node can run the kernel: " + c.Message, fatal: true}, false
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && fatalWaiting(w) {
			return &problem{reason: w.Reason, message: fmt.Sprintf("container %s: %s", cs.Name, w.Message), fatal: true}, false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil, true
		}
	}
	if pod.Spec.NodeName == "" {
		return &problem{reason: ReasonPodPending, message: "the kernel pod waits for a node"}, false
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return &problem{reason: w.Reason, message: fmt.Sprintf("container %s: %s", cs.Name, w.Message)}, false
		}
	}
	return &problem{reason: ReasonPodNotReady, message: "the kernel's agent is not ready yet"}, false
}

// terminatedReason explains a failed pod from its containers' last states.
func terminatedReason(pod *corev1.Pod) (string, string) {
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		reason := t.Reason
		if reason == "" || reason == "Error" {
			reason = ReasonPodFailed
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
	reason := pod.Status.Reason
	if reason == "" {
		reason = ReasonPodFailed
	}
	return reason, msg
}
