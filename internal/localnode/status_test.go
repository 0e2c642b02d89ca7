package localnode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	tEarlier = metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	tNow     = metav1.NewTime(time.Date(2026, 1, 1, 10, 5, 0, 0, time.UTC))
)

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func running(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: tEarlier}}}
}

func terminated(name string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: false, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
}

func initDone(name string) corev1.ContainerStatus {
	s := terminated(name, 0)
	s.Ready = true
	return s
}

func backingOff(name string, lastCode int32) corev1.ContainerStatus {
	s := waiting(name, waitingCrashLoopBackOff)
	s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: lastCode}
	return s
}

// condSummary is a condition without its times, for comparing tables.
type condSummary struct {
	Type    corev1.PodConditionType
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

func summarize(conds []corev1.PodCondition) []condSummary {
	var out []condSummary
	for _, c := range conds {
		out = append(out, condSummary{c.Type, c.Status, c.Reason, c.Message})
	}
	return out
}

func TestPodStatus_DerivesPhaseAndConditionsFromContainerStates(t *testing.T) {
	const T, F = corev1.ConditionTrue, corev1.ConditionFalse
	type conds = []condSummary
	scheduled := condSummary{corev1.PodScheduled, T, "", ""}
	// kubeletConds lists the conditions in the order podStatus writes them. Without readiness
	// gates Ready says what ContainersReady says; PodScheduled stays as it was.
	kubeletConds := func(sandbox corev1.ConditionStatus, initialized, ready condSummary) conds {
		initialized.Type = corev1.PodInitialized
		podReady, containersReady := ready, ready
		podReady.Type, containersReady.Type = corev1.PodReady, corev1.ContainersReady
		return conds{{corev1.PodReadyToStartContainers, sandbox, "", ""}, initialized, podReady, containersReady, scheduled}
	}
	cond := func(status corev1.ConditionStatus, reason, message string) condSummary {
		return condSummary{Status: status, Reason: reason, Message: message}
	}
	met, mainUnready := cond(T, "", ""), cond(F, reasonContainersNotReady, "containers with unready status: [main]")
	tests := []struct {
		name       string
		policy     corev1.RestartPolicy
		inits      []string
		state      podState
		wantPhase  corev1.PodPhase
		wantConds  conds
		wantReason string
	}{{
		name:      "init container running",
		inits:     []string{"setup"},
		state:     podState{sandboxReady: true, initStatuses: []corev1.ContainerStatus{running("setup", false)}, statuses: []corev1.ContainerStatus{waiting("main", waitingPodInitializing)}},
		wantPhase: corev1.PodPending,
		wantConds: kubeletConds(T, cond(F, reasonContainersNotInitialized, "containers with incomplete status: [setup]"), mainUnready),
	}, {
		name:      "running but not ready yet",
		inits:     []string{"setup"},
		state:     podState{sandboxReady: true, initStatuses: []corev1.ContainerStatus{initDone("setup")}, statuses: []corev1.ContainerStatus{running("main", false)}},
		wantPhase: corev1.PodRunning,
		wantConds: kubeletConds(T, met, mainUnready),
	}, {
		name:      "running and ready",
		state:     podState{sandboxReady: true, statuses: []corev1.ContainerStatus{running("main", true)}},
		wantPhase: corev1.PodRunning,
		wantConds: kubeletConds(T, met, met),
	}, {
		name:      "volumes not set up yet",
		state:     podState{statuses: []corev1.ContainerStatus{waiting("main", waitingContainerCreating)}},
		wantPhase: corev1.PodPending,
		wantConds: kubeletConds(F, met, mainUnready),
	}, {
		name:      "all succeeded under OnFailure",
		policy:    corev1.RestartPolicyOnFailure,
		state:     podState{sandboxReady: true, statuses: []corev1.ContainerStatus{terminated("main", 0)}},
		wantPhase: corev1.PodSucceeded,
		wantConds: kubeletConds(F, cond(T, reasonPodCompleted, ""), cond(F, reasonPodCompleted, "")),
	}, {
		name:      "a failure under Never",
		policy:    corev1.RestartPolicyNever,
		state:     podState{sandboxReady: true, statuses: []corev1.ContainerStatus{terminated("main", 2)}},
		wantPhase: corev1.PodFailed,
		wantConds: kubeletConds(F, met, cond(F, reasonPodFailed, "")),
	}, {
		name:      "a crash loop under OnFailure keeps the pod running",
		policy:    corev1.RestartPolicyOnFailure,
		state:     podState{sandboxReady: true, statuses: []corev1.ContainerStatus{backingOff("main", 1)}},
		wantPhase: corev1.PodRunning,
	}, {
		name:      "an exit under Always keeps the pod running",
		state:     podState{sandboxReady: true, statuses: []corev1.ContainerStatus{terminated("main", 0)}},
		wantPhase: corev1.PodRunning,
	}, {
		name:      "a failed init container under Never fails the pod",
		policy:    corev1.RestartPolicyNever,
		inits:     []string{"setup"},
		state:     podState{sandboxReady: true, initStatuses: []corev1.ContainerStatus{terminated("setup", 1)}, statuses: []corev1.ContainerStatus{waiting("main", waitingPodInitializing)}},
		wantPhase: corev1.PodFailed,
	}, {
		name:      "a failed init container under Always is retried while the pod waits",
		inits:     []string{"setup"},
		state:     podState{sandboxReady: true, initStatuses: []corev1.ContainerStatus{backingOff("setup", 1)}, statuses: []corev1.ContainerStatus{waiting("main", waitingPodInitializing)}},
		wantPhase: corev1.PodPending,
	}, {
		name:      "stopped for deletion under Always: the phase is final",
		state:     podState{sandboxReady: true, terminal: true, statuses: []corev1.ContainerStatus{terminated("main", 143)}},
		wantPhase: corev1.PodFailed,
	}, {
		name:      "stopped for deletion after a clean exit",
		state:     podState{sandboxReady: true, terminal: true, statuses: []corev1.ContainerStatus{terminated("main", 0)}},
		wantPhase: corev1.PodSucceeded,
	}, {
		name:       "a pod-level failure",
		state:      podState{failure: &podFailure{reason: reasonNoCommand, message: "container main has no command"}},
		wantPhase:  corev1.PodFailed,
		wantReason: reasonNoCommand,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tt.policy, Containers: []corev1.Container{{Name: "main"}}}}
			if pod.Spec.RestartPolicy == "" {
				pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
			}
			for _, n := range tt.inits {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n})
			}
			st := podStatus(pod, tt.state, tNow)
			if st.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", st.Phase, tt.wantPhase)
			}
			if st.Reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", st.Reason, tt.wantReason)
			}
			if tt.wantConds != nil {
				if diff := cmp.Diff(tt.wantConds, summarize(st.Conditions)); diff != "" {
					t.Errorf("conditions (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestPodStatus_KeepsTransitionTimesAndOthersConditions(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyAlways,
			Containers:     []corev1.Container{{Name: "main"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}},
		},
		Status: corev1.PodStatus{
			QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: tEarlier},
				{Type: "example.com/gate", Status: corev1.ConditionFalse, LastTransitionTime: tEarlier},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: tEarlier},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: tEarlier},
			},
		},
	}
	start := tEarlier
	st := podStatus(pod, podState{podIP: "127.0.0.3", startTime: &start, sandboxReady: true,
		statuses: []corev1.ContainerStatus{running("main", true)}}, tNow)

	want := []corev1.PodCondition{
		{Type: "example.com/gate", Status: corev1.ConditionFalse, LastTransitionTime: tEarlier},
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: tNow, ObservedGeneration: 3},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: tNow, ObservedGeneration: 3},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reasonReadinessGatesNotReady,
			Message: `the status of pod readiness gate "example.com/gate" is not "True", but False`, LastTransitionTime: tEarlier, ObservedGeneration: 3},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: tEarlier, ObservedGeneration: 3},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: tEarlier},
	}
	if diff := cmp.Diff(want, st.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if st.QOSClass != corev1.PodQOSBurstable || st.PodIP != "127.0.0.3" || st.HostIP != hostIP || st.ObservedGeneration != 3 {
		t.Errorf("status = %+v", st)
	}
}
