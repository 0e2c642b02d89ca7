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
		{name: "no pod yet", prior: "", pod: nil, wantReady: metav1.ConditionFalse, wantReason: nbv1.ReasonPodCreating, wantFailed: false, wantState: nbv1.ExecutionStateStarting},
		{name: "unbound", prior: "", pod: &corev1.Pod{}, wantReady: metav1.ConditionFalse, wantReason: nbv1.ReasonPodPending, wantFailed: false, wantState: nbv1.ExecutionStateStarting},
		{name: "container creating", prior: "", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: waiting("ContainerCreating")}},
			wantReady: metav1.ConditionFalse, wantReason: "ContainerCreating", wantFailed: false, wantState: nbv1.ExecutionStateStarting},
		{name: "transient pull error waits", prior: "", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: waiting("ErrImagePull")}},
			wantReady: metav1.ConditionFalse, wantReason: "ErrImagePull", wantFailed: false, wantState: nbv1.ExecutionStateStarting},
		{name: "pull error that a timeout caused waits", prior: "", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`failed to pull and unpack image "r.example/k:1": failed to copy: read tcp 10.0.0.1:4->10.0.0.2:443: i/o timeout`)}},
			wantReady: metav1.ConditionFalse, wantReason: "ErrImagePull", wantFailed: false, wantState: nbv1.ExecutionStateStarting},
		// containerd's messages, as a real cluster gave them.
		{name: "pull of an image whose registry does not resolve fails at once", prior: "", pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`failed to pull and unpack image "nbkube.io/does-not-exist:1": failed to resolve reference "nbkube.io/does-not-exist:1": failed to do request: Head "https://nbkube.io/v2/does-not-exist/manifests/1": dial tcp: lookup nbkube.io on 10.255.255.53:53: no such host`)}},
			wantReady: metav1.ConditionFalse, wantReason: "ErrImagePull", wantFailed: true, wantState: nbv1.ExecutionStateDead},
		{name: "pull from a registry address that refuses fails at once", prior: "", pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`failed to pull and unpack image "127.0.0.1:1/nbkube/does-not-exist:1": failed to resolve reference "127.0.0.1:1/nbkube/does-not-exist:1": failed to do request: Head "https://127.0.0.1:1/v2/nbkube/does-not-exist/manifests/1": dial tcp 127.0.0.1:1: connect: connection refused`)}},
			wantReady: metav1.ConditionFalse, wantReason: "ErrImagePull", wantFailed: true, wantState: nbv1.ExecutionStateDead},
		{name: "pull of a tag that does not exist fails at once", prior: "", pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waitingFor("ErrImagePull",
			`rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/python:0.0": failed to resolve reference "docker.io/library/python:0.0": docker.io/library/python:0.0: not found`)}},
			wantReady: metav1.ConditionFalse, wantReason: "ErrImagePull", wantFailed: true, wantState: nbv1.ExecutionStateDead},
		{name: "pull back-off fails", prior: "", pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: waiting("ImagePullBackOff")}},
			wantReady: metav1.ConditionFalse, wantReason: "ImagePullBackOff", wantFailed: true, wantState: nbv1.ExecutionStateDead},
		{name: "running, not ready", prior: "", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			wantReady: metav1.ConditionFalse, wantReason: nbv1.ReasonPodNotReady, wantFailed: false, wantState: nbv1.ExecutionStateStarting},
		{name: "ready", prior: "", pod: &corev1.Pod{Status: corev1.PodStatus{Conditions: ready, PodIP: "1.2.3.4"}},
			wantReady: metav1.ConditionTrue, wantReason: nbv1.ReasonAgentReady, wantFailed: false, wantState: nbv1.ExecutionStateIdle},
		{name: "ready keeps a busy kernel busy", prior: nbv1.ExecutionStateBusy, pod: &corev1.Pod{Status: corev1.PodStatus{Conditions: ready}},
			wantReady: metav1.ConditionTrue, wantReason: nbv1.ReasonAgentReady, wantFailed: false, wantState: nbv1.ExecutionStateBusy},
		{name: "exited", prior: nbv1.ExecutionStateIdle, pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
			wantReady: metav1.ConditionFalse, wantReason: nbv1.ReasonKernelExited, wantFailed: true, wantState: nbv1.ExecutionStateDead},
		{name: "evicted", prior: nbv1.ExecutionStateIdle, pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			wantReady: metav1.ConditionFalse, wantReason: "Evicted", wantFailed: true, wantState: nbv1.ExecutionStateDead},
		{name: "terminating", prior: nbv1.ExecutionStateIdle, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}, Status: corev1.PodStatus{Conditions: ready}},
			wantReady: metav1.ConditionFalse, wantReason: nbv1.ReasonPodTerminating, wantFailed: false, wantState: nbv1.ExecutionStateDead},
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
		{name: "first report", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle}, pod: ready,
			report: &agentapi.Status{ExecutionState: "busy", LastActivity: t1.Add(123 * time.Millisecond), Connections: 2, RestartCount: 1},
			want:   nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 2, RestartCount: 1}},
		{name: "last activity only moves forward", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 2}, pod: ready,
			report: &agentapi.Status{ExecutionState: "idle", LastActivity: t1.Add(-time.Minute)},
			want:   nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, LastActivity: at(t1)}},
		{name: "a state the schema does not know is ignored", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, LastActivity: at(t1)}, pod: ready,
			report: &agentapi.Status{ExecutionState: "pondering", LastActivity: t1.Add(time.Minute)},
			want:   nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, LastActivity: at(t1.Add(time.Minute))}},
		{name: "an unanswered poll keeps the last report", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 1, RestartCount: 3}, pod: ready,
			report: nil, want: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1), Connections: 1, RestartCount: 3}},
		{name: "ready means idle until the agent first reports", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting}, pod: ready,
			report: nil, want: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle}},
		{name: "after a report, a silent agent is not assumed idle", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting, LastActivity: at(t1)}, pod: ready,
			report: nil, want: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting, LastActivity: at(t1)}},
		{name: "a failed pod is dead whatever was reported", prior: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateBusy, LastActivity: at(t1)},
			pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, report: nil,
			want: nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateDead, LastActivity: at(t1)}},
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

func TestKernelStatus_RestartedSaysWhyTheKernelRestartedUnasked(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	died := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	ready := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, PodIP: "10.0.0.9"}}
	killed := metav1.Condition{Type: nbv1.ConditionRestarted, Status: metav1.ConditionTrue, Reason: string(nbv1.ReasonKernelDied),
		Message: "the kernel process was killed by SIGKILL (exit code 137) at 2026-01-02T03:04:00Z; the agent started it again in the same pod, without its variables (restart 2)"}
	tests := []struct {
		name  string
		prior []metav1.Condition
		obs   kernelObservation
		want  *metav1.Condition
	}{
		{name: "never restarted unasked", obs: kernelObservation{pod: ready, agent: &agentapi.Status{ExecutionState: "idle", RestartCount: 1}}, want: nil},
		{name: "killed kernel process", obs: kernelObservation{pod: ready, agent: &agentapi.Status{ExecutionState: "idle", RestartCount: 2,
			LastDeath: &agentapi.Death{At: died, ExitCode: 137, Signal: "SIGKILL", Restart: 2}}}, want: &killed},
		{name: "exited kernel process", obs: kernelObservation{pod: ready, agent: &agentapi.Status{ExecutionState: "restarting",
			LastDeath: &agentapi.Death{At: died, ExitCode: 1, Restart: 1}}},
			want: &metav1.Condition{Type: nbv1.ConditionRestarted, Status: metav1.ConditionTrue, Reason: string(nbv1.ReasonKernelDied),
				Message: "the kernel process exited with code 1 at 2026-01-02T03:04:00Z; the agent started it again in the same pod, without its variables (restart 1)"}},
		{name: "deleted pod", prior: []metav1.Condition{killed}, obs: kernelObservation{pod: &corev1.Pod{}, podDeleted: "k1"},
			want: &metav1.Condition{Type: nbv1.ConditionRestarted, Status: metav1.ConditionTrue, Reason: string(nbv1.ReasonPodDeleted),
				Message: "the kernel's pod k1 was deleted at 2026-01-02T03:04:05Z; the kernel runs again in a new pod, without its variables"}},
		{name: "the new pod's agent, which saw no death, keeps the reason", prior: []metav1.Condition{{Type: nbv1.ConditionRestarted, Status: metav1.ConditionTrue, Reason: string(nbv1.ReasonPodDeleted), Message: "m"}},
			obs:  kernelObservation{pod: ready, agent: &agentapi.Status{ExecutionState: "idle"}},
			want: &metav1.Condition{Type: nbv1.ConditionRestarted, Status: metav1.ConditionTrue, Reason: string(nbv1.ReasonPodDeleted), Message: "m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &nbv1.Kernel{Status: nbv1.KernelStatus{Conditions: tc.prior}}
			st := kernelStatus(k, tc.obs, now)
			got := meta.FindStatusCondition(st.Conditions, nbv1.ConditionRestarted)
			if got != nil {
				c := *got
				c.LastTransitionTime, c.ObservedGeneration = metav1.Time{}, 0
				got = &c
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestKernelStatus_TellsTheAgentsLastWriteOfOutputs(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	wrote := time.Date(2026, 1, 2, 3, 4, 1, 500_000_000, time.UTC)
	ready := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, PodIP: "10.0.0.9"}}
	told := &nbv1.OutputsWritten{Time: metav1.NewTime(wrote.Truncate(time.Second)), Notebook: "sub/nb.ipynb", Cells: 2, Writes: 3}
	tests := []struct {
		name   string
		prior  *nbv1.OutputsWritten
		report *agentapi.OutputsWrite
		want   *nbv1.OutputsWritten
	}{
		{name: "nothing written", report: nil, want: nil},
		{name: "a write, to the second the API keeps", report: &agentapi.OutputsWrite{At: wrote, Notebook: "sub/nb.ipynb", Cells: 2, Writes: 3}, want: told},
		{name: "a new pod's agent that wrote nothing leaves the last write told", prior: told, report: nil, want: told},
		{name: "the new pod's first write replaces it", prior: told, report: &agentapi.OutputsWrite{At: wrote.Add(time.Minute), Notebook: "b.ipynb", Cells: 1, Writes: 1},
			want: &nbv1.OutputsWritten{Time: metav1.NewTime(wrote.Add(time.Minute).Truncate(time.Second)), Notebook: "b.ipynb", Cells: 1, Writes: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &nbv1.Kernel{Status: nbv1.KernelStatus{OutputsWritten: tc.prior}}
			st := kernelStatus(k, kernelObservation{pod: ready, agent: &agentapi.Status{ExecutionState: "idle", OutputsWritten: tc.report}}, now)
			if d := cmp.Diff(tc.want, st.OutputsWritten); d != "" {
				t.Error(d)
			}
		})
	}
}
