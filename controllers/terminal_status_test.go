package controllers

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/builder"
)

// terminalWas is a Terminal whose status says phase with the Ready reason, at ip.
func terminalWas(phase nbv1.TerminalPhase, reason nbv1.ConditionReason, ip string) *nbv1.Terminal {
	t := &nbv1.Terminal{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns", Generation: 1}}
	t.Status.Phase, t.Status.PodIP = phase, ip
	if reason != "" {
		t.Status.Conditions = []metav1.Condition{{Type: nbv1.ConditionReady, Status: metav1.ConditionFalse, Reason: string(reason), Message: "was " + string(reason)}}
	}
	return t
}

func terminated(code int32, reason, message string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5",
		ContainerStatuses: []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: message}}}}}}
}

func TestTerminalStatus_FromWhatWasObserved(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	ready := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	starting := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5"}}
	deleting := ready.DeepCopy()
	deleting.DeletionTimestamp = &now
	initFailed := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: builder.InstallAgentContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError"}}}}}}
	for _, tc := range []struct {
		name   string
		was    *nbv1.Terminal
		obs    terminalObservation
		phase  nbv1.TerminalPhase
		reason nbv1.ConditionReason
		msg    string
		ip     string
	}{
		{name: "ready", was: terminalWas("", "", ""), obs: terminalObservation{pod: ready},
			phase: nbv1.TerminalRunning, reason: nbv1.ReasonAgentReady, ip: "10.0.0.5"},
		{name: "not probed yet, the agent answered", was: terminalWas("", "", ""),
			obs:   terminalObservation{pod: starting, agent: &agentapi.TerminalStatus{}},
			phase: nbv1.TerminalRunning, reason: nbv1.ReasonAgentReady, ip: "10.0.0.5"},
		{name: "not probed yet, the agent silent: the address for clients that ask it", was: terminalWas("", "", ""),
			obs:   terminalObservation{pod: starting},
			phase: nbv1.TerminalPending, reason: nbv1.ReasonPodNotReady, ip: "10.0.0.5"},
		{name: "the shell exited", was: terminalWas(nbv1.TerminalRunning, "", "10.0.0.5"), obs: terminalObservation{pod: terminated(0, "Completed", "")},
			phase: nbv1.TerminalEnded, reason: nbv1.ReasonShellExited, msg: "the shell exited"},
		{name: "the kernel killed the shell for memory, the agent exited 0", was: terminalWas(nbv1.TerminalRunning, "", "10.0.0.5"),
			obs:   terminalObservation{pod: terminated(0, "OOMKilled", "")},
			phase: nbv1.TerminalFailed, reason: "OOMKilled", msg: "the terminal ran out of memory (its container's limit): the terminal's container exited with code 0"},
		{name: "the agent's own error", was: terminalWas(nbv1.TerminalRunning, "", "10.0.0.5"),
			obs:   terminalObservation{pod: terminated(2, "Error", "agent token: open /var/run/nbkube/kernel/token: permission denied\n")},
			phase: nbv1.TerminalFailed, reason: nbv1.ReasonPodFailed,
			msg: "the terminal's container exited with code 2: agent token: open /var/run/nbkube/kernel/token: permission denied"},
		{name: "the agent could not be installed", was: terminalWas("", "", ""), obs: terminalObservation{pod: initFailed},
			phase: nbv1.TerminalFailed, reason: "StartError", msg: "init container install-agent exited with code 128"},
		{name: "its pod is being deleted", was: terminalWas(nbv1.TerminalRunning, "", "10.0.0.5"), obs: terminalObservation{pod: deleting},
			phase: nbv1.TerminalFailed, reason: nbv1.ReasonPodTerminating},
		{name: "its pod was deleted while it ran", was: terminalWas(nbv1.TerminalRunning, nbv1.ReasonAgentReady, "10.0.0.5"), obs: terminalObservation{podGone: true},
			phase: nbv1.TerminalFailed, reason: nbv1.ReasonPodDeleted, msg: "the terminal's pod t was deleted; its shell is gone"},
		{name: "its pod was deleted as it was seen going", was: terminalWas(nbv1.TerminalFailed, nbv1.ReasonPodTerminating, ""), obs: terminalObservation{podGone: true},
			phase: nbv1.TerminalFailed, reason: nbv1.ReasonPodDeleted},
		{name: "its pod was deleted after the shell exited", was: terminalWas(nbv1.TerminalEnded, nbv1.ReasonShellExited, ""), obs: terminalObservation{podGone: true},
			phase: nbv1.TerminalEnded, reason: nbv1.ReasonShellExited, msg: "was ShellExited"},
		{name: "its pod was deleted after it was evicted", was: terminalWas(nbv1.TerminalFailed, "Evicted", ""), obs: terminalObservation{podGone: true},
			phase: nbv1.TerminalFailed, reason: "Evicted", msg: "was Evicted"},
		{name: "refused for its owner's limit", was: terminalWas("", "", ""),
			obs:   terminalObservation{problem: &problem{reason: nbv1.ReasonQuotaExceeded, message: "over", fatal: true}},
			phase: nbv1.TerminalFailed, reason: nbv1.ReasonQuotaExceeded, msg: "over"},
		{name: "a step failed: the phase stays", was: terminalWas(nbv1.TerminalRunning, nbv1.ReasonAgentReady, "10.0.0.5"),
			obs:   terminalObservation{stepErr: errors.New("get terminal pod: timeout")},
			phase: nbv1.TerminalRunning, reason: nbv1.ReasonReconcileError, msg: "get terminal pod: timeout", ip: "10.0.0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := terminalStatus(tc.was, tc.obs, now)
			c := meta.FindStatusCondition(st.Conditions, nbv1.ConditionReady)
			if st.Phase != tc.phase || c == nil || c.Reason != string(tc.reason) || (tc.msg != "" && c.Message != tc.msg) {
				t.Errorf("phase %s, Ready %+v; want %s, %s %q", st.Phase, c, tc.phase, tc.reason, tc.msg)
			}
			if st.PodIP != tc.ip {
				t.Errorf("pod IP %q, want %q", st.PodIP, tc.ip)
			}
		})
	}
}

// The agent's report moves the last activity forward only, to the second, and gives the
// connections while the terminal runs.
func TestTerminalStatus_AgentReport(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	was := terminalWas(nbv1.TerminalRunning, nbv1.ReasonAgentReady, "10.0.0.5")
	later := metav1.NewTime(now.Add(-time.Minute))
	was.Status.LastActivity = &later
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	st := terminalStatus(was, terminalObservation{pod: pod, agent: &agentapi.TerminalStatus{LastActivity: now.Add(-time.Hour), Connections: 3}}, now)
	if !st.LastActivity.Equal(&later) || st.Connections != 3 {
		t.Errorf("an older report: last activity %v, connections %d", st.LastActivity, st.Connections)
	}
	st = terminalStatus(was, terminalObservation{pod: pod, agent: &agentapi.TerminalStatus{LastActivity: now.Add(1500 * time.Millisecond)}}, now)
	if want := now.Add(time.Second); !st.LastActivity.Time.Equal(want) || st.Connections != 0 {
		t.Errorf("a newer report: last activity %v, connections %d; want %v, 0", st.LastActivity, st.Connections, want)
	}
	was.Status.Connections = 2
	st = terminalStatus(was, terminalObservation{pod: terminated(0, "Completed", "")}, now)
	if st.Connections != 0 || !st.LastActivity.Equal(&later) {
		t.Errorf("an ended terminal: connections %d, last activity %v", st.Connections, st.LastActivity)
	}
}

// A terminal whose pod ran is not given another: its shell is gone. One refused before it had
// a pod gets one once the refusal is lifted.
func TestHadPod(t *testing.T) {
	for _, tc := range []struct {
		was  *nbv1.Terminal
		want bool
	}{
		{terminalWas("", "", ""), false},
		{terminalWas(nbv1.TerminalPending, nbv1.ReasonPodPending, ""), false},
		{terminalWas(nbv1.TerminalPending, nbv1.ReasonPodNotReady, "10.0.0.5"), true},
		{terminalWas(nbv1.TerminalRunning, nbv1.ReasonAgentReady, "10.0.0.5"), true},
		{terminalWas(nbv1.TerminalEnded, nbv1.ReasonShellExited, ""), true},
		{terminalWas(nbv1.TerminalFailed, "OOMKilled", ""), true},
		{terminalWas(nbv1.TerminalFailed, nbv1.ReasonUnschedulable, ""), true},
		{terminalWas(nbv1.TerminalFailed, nbv1.ReasonQuotaExceeded, ""), false},
		{terminalWas(nbv1.TerminalFailed, nbv1.ReasonKernelSpecNotFound, ""), false},
		{terminalWas(nbv1.TerminalFailed, nbv1.ReasonReconcileError, ""), false},
	} {
		if got := hadPod(tc.was); got != tc.want {
			t.Errorf("phase %s, conditions %v, address %q: hadPod %v, want %v", tc.was.Status.Phase, tc.was.Status.Conditions, tc.was.Status.PodIP, got, tc.want)
		}
	}
}

// A starting terminal's agent is asked again soon, then less and less often.
func TestTerminalMemory_AsksAStartingAgentLessAndLessOften(t *testing.T) {
	var m terminalMemory
	key := types.NamespacedName{Namespace: "ns", Name: "t"}
	var got []time.Duration
	for range 9 {
		got = append(got, m.askAgain(key))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	m.answered(key)
	if d := m.askAgain(key); d != terminalAgentRetry {
		t.Errorf("after an answer, the first wait is %s", d)
	}
}
