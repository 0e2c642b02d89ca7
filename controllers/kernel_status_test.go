package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

func TestKernelStatus_FromPodStates(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	waitingFor := func(reason, message string) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	}
	waiting := func(reason string) []corev1.ContainerStatus { return waitingFor(reason, "m") }
	deleting := metav1.NewTime(now.Add(-time.Second))
	tests := []struct {
		name       string
		prior      nbv1.ExecutionState
		pod        *corev1.Pod
		wantReady  metav1.ConditionStatus
		wantReason nbv1.ConditionReason
		wantFailed bool
		wantState  nbv1.ExecutionState
	}{
		{"no pod yet", "", nil, metav1.ConditionFalse, nbv1.ReasonPodCreating, false, nbv1.ExecutionStateStarting},
		{"unbound", "", &corev1.Pod{}, metav1.ConditionFalse, nbv1.ReasonPodPending, false, nbv1.ExecutionStateStarting},
		{"container creating", "", &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: waiting("ContainerCreating")}},
			metav1.ConditionFalse, "ContainerCreating", false, nbv1.ExecutionStateStarting},
		{"transient pull error waits", "", &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: waiting("ErrImagePull")}},
			metav1.ConditionFalse, "ErrImagePull", false, nbv1.ExecutionStateStarting},
		{"pull error that a timeout caused waits", "", &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`failed to pull and unpack image "r.example/k:1": failed to copy: read tcp 10.0.0.1:4->10.0.0.2:443: i/o timeout`)}},
			metav1.ConditionFalse, "ErrImagePull", false, nbv1.ExecutionStateStarting},
		// containerd's messages, as a real cluster gave them.
		{"pull of an image whose registry does not resolve fails at once", "", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`failed to pull and unpack image "nbkube.io/does-not-exist:1": failed to resolve reference "nbkube.io/does-not-exist:1": failed to do request: Head "https://nbkube.io/v2/does-not-exist/manifests/1": dial tcp: lookup nbkube.io on 10.255.255.53:53: no such host`)}},
			metav1.ConditionFalse, "ErrImagePull", true, nbv1.ExecutionStateDead},
		{"pull of a tag that does not exist fails at once", "", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/python:0.0": failed to resolve reference "docker.io/library/python:0.0": docker.io/library/python:0.0: not found`)}},
			metav1.ConditionFalse, "ErrImagePull", true, nbv1.ExecutionStateDead},
		{"pull back-off fails", "", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waiting("ImagePullBackOff")}},
			metav1.ConditionFalse, "ImagePullBackOff", true, nbv1.ExecutionStateDead},
		{"running, not ready", "", &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			metav1.ConditionFalse, nbv1.ReasonPodNotReady, false, nbv1.ExecutionStateStarting},
		{"ready", "", &corev1.Pod{Status: corev1.PodStatus{Conditions: ready, PodIP: "1.2.3.4"}},
			metav1.ConditionTrue, nbv1.ReasonAgentReady, false, nbv1.ExecutionStateIdle},
		{"ready keeps a busy kernel busy", nbv1.ExecutionStateBusy, &corev1.Pod{Status: corev1.PodStatus{Conditions: ready}},
			metav1.ConditionTrue, nbv1.ReasonAgentReady, false, nbv1.ExecutionStateBusy},
		{"exited", nbv1.ExecutionStateIdle, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
			metav1.ConditionFalse, nbv1.ReasonKernelExited, true, nbv1.ExecutionStateDead},
		{"evicted", nbv1.ExecutionStateIdle, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			metav1.ConditionFalse, "Evicted", true, nbv1.ExecutionStateDead},
		{"terminating", nbv1.ExecutionStateIdle, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}, Status: corev1.PodStatus{Conditions: ready}},
			metav1.ConditionFalse, nbv1.ReasonPodTerminating, false, nbv1.ExecutionStateDead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: nbv1.KernelStatus{ExecutionState: tc.prior}}
			st := kernelStatus(k, kernelObservation{pod: tc.pod}, now)
			r := meta.FindStatusCondition(st.Conditions, nbv1.ConditionReady)
			if r.Status != tc.wantReady || r.Reason != string(tc.wantReason) || r.ObservedGeneration != 3 || !r.LastTransitionTime.Equal(&now) {
				t.Errorf("Ready = %+v, want %s/%s", r, tc.wantReady, tc.wantReason)
			}
			f := meta.FindStatusCondition(st.Conditions, nbv1.ConditionFailed)
			if (f != nil) != tc.wantFailed {
				t.Errorf("Failed = %+v, want present=%v", f, tc.wantFailed)
			}
			if st.ExecutionState != tc.wantState || st.ObservedGeneration != 3 {
				t.Errorf("state %q generation %d, want %q", st.ExecutionState, st.ObservedGeneration, tc.wantState)
			}
		})
	}
}

func TestKernelStatus_TransitionTimeMovesOnlyWithTheStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	k := &nbv1.Kernel{}
	k.Status = kernelStatus(k, kernelObservation{}, t0)
	k.Status = kernelStatus(k, kernelObservation{pod: &corev1.Pod{}}, t1)
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionReady); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Ready stayed False but its transition time moved to %v", c.LastTransitionTime)
	}
}

func TestKernelStatus_AgentReport(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ready := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, PodIP: "10.0.0.9"}}
	t1 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
	tests := []struct {
		name   string
		prior  nbv1.KernelStatus
		pod    *corev1.Pod
		report *agentapi.Status
		want   nbv1.KernelStatus // only the fields the agent reports are compared
	}{
		{"first report", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle}, ready,
			&agentapi.Status{ExecutionState: "busy", LastActivity: t1.Add(123 * time.Millisecond), Connections: 2, RestartCount: 1},
			nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 2, RestartCount: 1}},
		{"last activity only moves forward", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 2}, ready,
			&agentapi.Status{ExecutionState: "idle", LastActivity: t1.Add(-time.Minute)},
			nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, LastActivity: at(t1)}},
		{"a state the schema does not know is ignored", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, LastActivity: at(t1)}, ready,
			&agentapi.Status{ExecutionState: "pondering", LastActivity: t1.Add(time.Minute)},
			nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, LastActivity: at(t1.Add(time.Minute))}},
		{"an unanswered poll keeps the last report", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 1, RestartCount: 3}, ready,
			nil, nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 1, RestartCount: 3}},
		{"ready means idle until the agent first reports", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting}, ready,
			nil, nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle}},
		{"after a report, a silent agent is not assumed idle", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting, LastActivity: at(t1)}, ready,
			nil, nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting, LastActivity: at(t1)}},
		{"a failed pod is dead whatever was reported", nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1)},
			&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, nil,
			nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateDead, LastActivity: at(t1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &nbv1.Kernel{Status: tc.prior}
			st := kernelStatus(k, kernelObservation{pod: tc.pod, agent: tc.report}, now)
			got := nbv1.KernelStatus{ExecutionState: st.ExecutionState, LastActivity: st.LastActivity, Connections: st.Connections, RestartCount: st.RestartCount}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}
