package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/builder"
)

// terminalObservation is what the Terminal controller's steps found.
type terminalObservation struct {
	secret *corev1.Secret
	pod    *corev1.Pod
	// problem found before a pod was made (spec missing, quota, conflicts).
	problem *problem
	// podGone: the terminal's pod ran and is gone (deleted from outside).
	podGone bool
	// agent is what the terminal's agent reported just now; nil when it was not asked or did
	// not answer.
	agent *agentapi.TerminalStatus
	// agentSoon: the pod runs but its agent did not answer yet; it is asked again shortly
	// (terminalMemory.askAgain).
	agentSoon bool
	// recheck asks for the terminal to be looked at again after it: a refusal that a change
	// elsewhere may lift.
	recheck time.Duration
	// stepErr is the error of the step that failed; the steps after it did not run.
	stepErr error
}

// terminalState is a phase with the Ready condition's reason and message.
type terminalState struct {
	phase   nbv1.TerminalPhase
	reason  nbv1.ConditionReason
	message string
}

// terminalStatus computes the status for what was observed. It is pure so that every pod state
// can be table-tested; the reconciler writes it only when it differs.
func terminalStatus(t *nbv1.Terminal, obs terminalObservation, now metav1.Time) nbv1.TerminalStatus {
	st := *t.Status.DeepCopy()
	st.ObservedGeneration = t.Generation
	if obs.stepErr != nil {
		setReconcileError(&st.Conditions, obs.stepErr, t.Generation, now)
		return st
	}
	var s terminalState
	switch {
	case obs.problem != nil:
		s = terminalState{nbv1.TerminalPending, obs.problem.reason, obs.problem.message}
		if obs.problem.fatal {
			s.phase = nbv1.TerminalFailed
		}
	case obs.podGone && (t.Status.Phase == nbv1.TerminalEnded || t.Status.Phase == nbv1.TerminalFailed) && !terminating(t):
		// It ended before its pod went: how it ended stays.
		reason, message := lastEnd(t)
		s = terminalState{t.Status.Phase, reason, message}
	case obs.podGone:
		s = terminalState{nbv1.TerminalFailed, nbv1.ReasonPodDeleted,
			fmt.Sprintf("the terminal's pod %s was deleted; its shell is gone", t.Name)}
	default:
		s = terminalPodState(obs.pod)
		if s.phase == nbv1.TerminalPending && obs.agent != nil {
			// The agent answered before the kubelet's probe did.
			s = terminalState{nbv1.TerminalRunning, nbv1.ReasonAgentReady, "the terminal's agent accepts connections"}
		}
	}
	st.Phase = s.phase
	status := metav1.ConditionFalse
	if s.phase == nbv1.TerminalRunning {
		status = metav1.ConditionTrue
	}
	setCondition(&st.Conditions, nbv1.ConditionReady, status, s.reason, s.message, t.Generation, now)
	// An address is of use while the agent may answer there; that of a pod that ended may be
	// another pod's already.
	st.PodIP = ""
	if obs.pod != nil && (s.phase == nbv1.TerminalPending || s.phase == nbv1.TerminalRunning) {
		st.PodIP = obs.pod.Status.PodIP
	}
	if s.phase != nbv1.TerminalRunning {
		st.Connections = 0
	}
	if obs.agent != nil && s.phase == nbv1.TerminalRunning {
		applyTerminalReport(&st, *obs.agent)
	}
	return st
}

// terminating says that the terminal's pod was last seen being deleted.
func terminating(t *nbv1.Terminal) bool {
	c := meta.FindStatusCondition(t.Status.Conditions, nbv1.ConditionReady)
	return c != nil && c.Reason == string(nbv1.ReasonPodTerminating)
}

// lastEnd is the reason and message a terminal that ended was given when it did.
func lastEnd(t *nbv1.Terminal) (nbv1.ConditionReason, string) {
	if c := meta.FindStatusCondition(t.Status.Conditions, nbv1.ConditionReady); c != nil {
		return nbv1.ConditionReason(c.Reason), c.Message
	}
	return nbv1.ReasonPodFailed, "the terminal's pod failed"
}

// applyTerminalReport puts the agent's report into the status: the last activity to the
// second the API stores (so that an unchanged one is not written again), moving forward only.
func applyTerminalReport(st *nbv1.TerminalStatus, rep agentapi.TerminalStatus) {
	if !rep.LastActivity.IsZero() {
		t := metav1.NewTime(rep.LastActivity.UTC().Truncate(time.Second))
		if st.LastActivity == nil || t.After(st.LastActivity.Time) {
			st.LastActivity = &t
		}
	}
	st.Connections = toInt32(rep.Connections)
}

// terminalPodState is the phase of a terminal whose pod is p, and why. The reasons of the kubelet and the scheduler pass through:
// the shell ends the pod, so a container that ended is the terminal's end.
func terminalPodState(p *corev1.Pod) terminalState {
	if p == nil {
		return terminalState{nbv1.TerminalPending, nbv1.ReasonPodCreating, "the terminal's pod is being created"}
	}
	if p.DeletionTimestamp != nil {
		return terminalState{nbv1.TerminalFailed, nbv1.ReasonPodTerminating, "the terminal's pod is being deleted"}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != builder.TerminalContainer || cs.State.Terminated == nil {
			continue
		}
		return containerEnded(cs.State.Terminated)
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return terminalState{nbv1.TerminalEnded, nbv1.ReasonShellExited, "the shell exited"}
	case corev1.PodFailed:
		return podFailed(p)
	}
	if msg, ok := unschedulable(p); ok {
		return terminalState{nbv1.TerminalFailed, nbv1.ReasonUnschedulable, "no node can run the terminal: " + msg}
	}
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && fatalWaiting(w) {
			return terminalState{nbv1.TerminalFailed, nbv1.ConditionReason(w.Reason), fmt.Sprintf("container %s: %s", cs.Name, w.Message)}
		}
	}
	if podReady(p) {
		return terminalState{nbv1.TerminalRunning, nbv1.ReasonAgentReady, "the terminal's agent accepts connections"}
	}
	if p.Spec.NodeName == "" {
		return terminalState{nbv1.TerminalPending, nbv1.ReasonPodPending, "the terminal's pod waits for a node"}
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return terminalState{nbv1.TerminalPending, nbv1.ConditionReason(w.Reason), fmt.Sprintf("container %s: %s", cs.Name, w.Message)}
		}
	}
	return terminalState{nbv1.TerminalPending, nbv1.ReasonPodNotReady, "the terminal's agent is not ready yet"}
}

// containerEnded is the end of a terminal whose container terminated: the shell exited (the
// agent exits 0 when it does), or the container was killed. A kill for want of memory may
// take the shell rather than the agent, which then exits 0; the runtime says OOMKilled all
// the same, and that is the reason.
func containerEnded(t *corev1.ContainerStateTerminated) terminalState {
	msg := fmt.Sprintf("the terminal's container exited with code %d", t.ExitCode)
	if m := strings.TrimSpace(t.Message); m != "" {
		msg += ": " + m
	}
	switch {
	case t.Reason == "OOMKilled":
		return terminalState{nbv1.TerminalFailed, nbv1.ConditionReason(t.Reason), "the terminal ran out of memory (its container's limit): " + msg}
	case t.ExitCode == 0:
		return terminalState{nbv1.TerminalEnded, nbv1.ReasonShellExited, "the shell exited"}
	case t.Reason == "" || t.Reason == "Error":
		return terminalState{nbv1.TerminalFailed, nbv1.ReasonPodFailed, msg}
	}
	return terminalState{nbv1.TerminalFailed, nbv1.ConditionReason(t.Reason), msg}
}

// podFailed explains a failed pod whose terminal container did not say why: an eviction, a
// node that went away, an init container that failed.
func podFailed(p *corev1.Pod) terminalState {
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			s := containerEnded(t)
			s.message = fmt.Sprintf("init container %s exited with code %d", cs.Name, t.ExitCode)
			return s
		}
	}
	msg := "the terminal's pod failed"
	if p.Status.Message != "" {
		msg += ": " + p.Status.Message
	}
	reason := nbv1.ConditionReason(p.Status.Reason)
	if reason == "" {
		reason = nbv1.ReasonPodFailed
	}
	return terminalState{nbv1.TerminalFailed, reason, msg}
}

// terminalFieldOwner is the field manager of the Terminal controller's status writes.
const terminalFieldOwner = "nbkube-terminal-controller"

// updateStatus writes st as t's status unless t has it already: a server-side apply of every
// field but the culler's condition, as terminalFieldOwner, with t's resource version as the
// precondition, so that a status computed from an old copy never replaces a newer one. lost
// says that another write won: the caller tries again. A terminal that just ended or failed
// gets an event that says why.
func (r *TerminalReconciler) updateStatus(ctx context.Context, t *nbv1.Terminal, st nbv1.TerminalStatus) (lost bool, err error) {
	if equality.Semantic.DeepEqual(t.Status, st) {
		return false, nil
	}
	apply := st.DeepCopy()
	apply.Conditions = slices.DeleteFunc(apply.Conditions, func(c metav1.Condition) bool { return c.Type == nbv1.ConditionCulled })
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(apply)
	if err != nil {
		return false, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(nbv1.GroupVersion.WithKind("Terminal"))
	u.SetNamespace(t.Namespace)
	u.SetName(t.Name)
	u.SetResourceVersion(t.ResourceVersion)
	err = r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(terminalFieldOwner), client.ForceOwnership)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("apply status of terminal %s: %w", t.Name, err)
	}
	if st.Phase != t.Status.Phase {
		ready := meta.FindStatusCondition(st.Conditions, nbv1.ConditionReady)
		switch st.Phase {
		case nbv1.TerminalFailed:
			recordEvent(r.Recorder, t, nil, corev1.EventTypeWarning, nbv1.EventReason(ready.Reason), "Run", "%s", ready.Message)
		case nbv1.TerminalEnded:
			recordEvent(r.Recorder, t, nil, corev1.EventTypeNormal, nbv1.EventReason(ready.Reason), "Run", "%s", ready.Message)
		}
	}
	return false, nil
}

// terminalMemory is what the Terminal controller keeps between reconciles: the running
// terminals behind terminal_currently_running_total (every terminal is reconciled when the
// manager starts, so the leader's set is whole; the other replicas report none: aggregate
// replicas with max), and how often the agent of each terminal that is starting was asked.
type terminalMemory struct {
	mu      sync.Mutex
	running map[types.NamespacedName]bool
	asked   map[types.NamespacedName]int
}

// mark records whether the terminal at key runs.
func (m *terminalMemory) mark(key types.NamespacedName, running bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running == nil {
		m.running = map[types.NamespacedName]bool{}
	}
	if running {
		m.running[key] = true
	} else {
		delete(m.running, key)
	}
	terminalsRunning.Set(float64(len(m.running)))
}

// askAgain is how long to wait before the agent of the starting terminal at key is asked
// again: terminalAgentRetry, doubling with each ask up to maxTerminalAgentRetry, so that an
// agent that never answers (the kubelet's probe then says why) costs few requests.
func (m *terminalMemory) askAgain(key types.NamespacedName) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asked == nil {
		m.asked = map[types.NamespacedName]int{}
	}
	n := m.asked[key]
	m.asked[key] = n + 1
	return min(terminalAgentRetry<<min(n, 10), maxTerminalAgentRetry)
}

// answered forgets the asks of the terminal at key: it runs, ended, or is gone.
func (m *terminalMemory) answered(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.asked, key)
}
