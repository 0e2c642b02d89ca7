package localnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Condition reasons, as the kubelet writes them.
const (
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// statusRetryInterval is how soon a failed status write is tried again.
const statusRetryInterval = time.Second

// podFailure is a failure of the whole pod rather than of a container: the pod cannot run here
// (no command, an unsupported volume) or was lost with a node restart.
type podFailure struct {
	reason, message string
}

// podState is what the pod worker knows; podStatus turns it into the API status.
type podState struct {
	podIP     string
	startTime *metav1.Time
	// sandboxReady is true once the pod has its address and volumes, the local counterpart of a
	// running pod sandbox.
	sandboxReady bool
	// terminal is set once the pod's containers were stopped for deletion: then the phase is
	// final whatever the restart policy, as the kubelet does for deleted pods.
	terminal bool
	failure  *podFailure
	// initStatuses and statuses are in spec order.
	initStatuses, statuses []corev1.ContainerStatus
}

// podStatus computes a pod's status from the worker's state. Fields that others own
// (qosClass, set by the API server; nominatedNodeName; conditions other than the kubelet's, such
// as PodScheduled and readiness gates) are kept from the current status, and a condition that
// keeps its status keeps its lastTransitionTime, so that an unchanged state yields an unchanged
// status and no write.
func podStatus(pod *corev1.Pod, s podState, now metav1.Time) corev1.PodStatus {
	old := &pod.Status
	st := *old.DeepCopy()
	st.ObservedGeneration = pod.Generation
	st.HostIP, st.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	st.PodIP, st.PodIPs = "", nil
	if s.podIP != "" {
		st.PodIP, st.PodIPs = s.podIP, []corev1.PodIP{{IP: s.podIP}}
	}
	st.StartTime = s.startTime
	st.InitContainerStatuses, st.ContainerStatuses = s.initStatuses, s.statuses
	st.Reason, st.Message = "", ""
	if s.failure != nil {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, s.failure.reason, s.failure.message
	} else {
		st.Phase = podPhase(&pod.Spec, s.initStatuses, s.statuses, s.terminal)
	}

	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	sandbox := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: boolCondition(s.sandboxReady && !terminal)}
	initialized := initializedCondition(&pod.Spec, s.initStatuses, s.statuses, st.Phase)
	containersReady := containersReadyCondition(&pod.Spec, s.statuses, st.Phase)
	ready := readyCondition(&pod.Spec, old.Conditions, containersReady)

	var conds []corev1.PodCondition
	for _, c := range old.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled:
		default:
			conds = append(conds, c)
		}
	}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	if i := slices.IndexFunc(old.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled }); i >= 0 {
		scheduled = old.Conditions[i]
	} else {
		scheduled = withTransition(old.Conditions, scheduled, pod.Generation, now)
	}
	for _, c := range []corev1.PodCondition{sandbox, initialized, ready, containersReady} {
		conds = append(conds, withTransition(old.Conditions, c, pod.Generation, now))
	}
	st.Conditions = append(conds, scheduled)
	return st
}

// withTransition stamps a condition the kubelet owns: it keeps the previous transition time when
// its status did not change.
func withTransition(old []corev1.PodCondition, c corev1.PodCondition, generation int64, now metav1.Time) corev1.PodCondition {
	c.ObservedGeneration = generation
	c.LastTransitionTime = now
	if i := slices.IndexFunc(old, func(o corev1.PodCondition) bool { return o.Type == c.Type }); i >= 0 && old[i].Status == c.Status {
		c.LastTransitionTime = old[i].LastTransitionTime
	}
	return c
}

func boolCondition(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

func containerStatusOf(list []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
	i := slices.IndexFunc(list, func(s corev1.ContainerStatus) bool { return s.Name == name })
	if i < 0 {
		return corev1.ContainerStatus{}, false
	}
	return list[i], true
}

// podPhase is the kubelet's getPhase (pkg/kubelet/kubelet_pods.go) for pods without sidecar
// containers, which this node does not run.
func podPhase(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, podIsTerminal bool) corev1.PodPhase {
	pendingInit, failedInit := 0, 0
	for _, c := range spec.InitContainers {
		st, ok := containerStatusOf(initStatuses, c.Name)
		switch {
		case !ok, st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
			if st.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}

	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for _, c := range spec.Containers {
		st, ok := containerStatusOf(statuses, c.Name)
		switch {
		case !ok:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
			stopped++
		case st.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}

	if failedInit > 0 && spec.RestartPolicy == corev1.RestartPolicyNever {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0, waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		switch {
		case podIsTerminal && stopped == succeeded:
			return corev1.PodSucceeded
		case podIsTerminal:
			return corev1.PodFailed
		case spec.RestartPolicy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case spec.RestartPolicy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		default:
			return corev1.PodRunning
		}
	default:
		return corev1.PodPending
	}
}

func initializedCondition(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	if phase == corev1.PodSucceeded {
		c.Reason = reasonPodCompleted
		return c
	}
	for _, s := range statuses {
		if s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil {
			return c
		}
	}
	if incomplete := notReady(spec.InitContainers, initStatuses); len(incomplete) > 0 {
		c.Status, c.Reason = corev1.ConditionFalse, reasonContainersNotInitialized
		c.Message = fmt.Sprintf("containers with incomplete status: %s", incomplete)
	}
	return c
}

func containersReadyCondition(spec *corev1.PodSpec, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse}
	switch phase {
	case corev1.PodSucceeded:
		c.Reason = reasonPodCompleted
		return c
	case corev1.PodFailed:
		c.Reason = reasonPodFailed
		return c
	}
	if unready := notReady(spec.Containers, statuses); len(unready) > 0 {
		c.Reason = reasonContainersNotReady
		c.Message = fmt.Sprintf("containers with unready status: %s", unready)
		return c
	}
	c.Status = corev1.ConditionTrue
	return c
}

// notReady names, in spec order, the containers whose status is missing or not ready.
func notReady(containers []corev1.Container, statuses []corev1.ContainerStatus) []string {
	var names []string
	for _, c := range containers {
		if s, ok := containerStatusOf(statuses, c.Name); !ok || !s.Ready {
			names = append(names, c.Name)
		}
	}
	return names
}

// readyCondition follows ContainersReady, and then the pod's readiness gates: conditions that
// others set on the pod.
func readyCondition(spec *corev1.PodSpec, conds []corev1.PodCondition, containersReady corev1.PodCondition) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodReady, Status: containersReady.Status, Reason: containersReady.Reason, Message: containersReady.Message}
	if c.Status != corev1.ConditionTrue {
		return c
	}
	var msgs []string
	for _, g := range spec.ReadinessGates {
		i := slices.IndexFunc(conds, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		switch {
		case i < 0:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case conds[i].Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, conds[i].Status))
		}
	}
	if len(msgs) > 0 {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, reasonReadinessGatesNotReady, strings.Join(msgs, ", ")
	}
	return c
}

func terminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

func (w *podWorker) phase() corev1.PodPhase {
	if w.failure != nil {
		return corev1.PodFailed
	}
	s := w.state()
	return podPhase(&w.pod.Spec, s.initStatuses, s.statuses, s.terminal)
}

// state gathers what podStatus needs from the worker.
func (w *podWorker) state() podState {
	s := podState{podIP: w.ip, startTime: w.startTime, sandboxReady: w.sandboxReady, terminal: w.stage >= stageTerminated, failure: w.failure}
	for _, c := range w.initContainers {
		s.initStatuses = append(s.initStatuses, c.apiStatus())
	}
	for _, c := range w.containers {
		s.statuses = append(s.statuses, c.apiStatus())
	}
	return s
}

// writeStatus writes the pod's status through the status subresource when it differs from what
// the API has, retrying on conflicts with the newest object.
func (w *podWorker) writeStatus(ctx context.Context, now time.Time) {
	if w.inherited {
		return
	}
	state, ts := w.state(), metaTime(now)
	if equality.Semantic.DeepEqual(w.pod.Status, podStatus(w.pod, state, ts)) {
		w.statusRetryAt = time.Time{}
		return
	}
	pods := w.node.client.CoreV1().Pods(w.pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := w.pod.DeepCopy()
		pod.Status = podStatus(w.pod, state, ts)
		updated, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			w.pod = updated
			return nil
		}
		if apierrors.IsConflict(err) {
			fresh, getErr := pods.Get(ctx, w.pod.Name, metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			if fresh.UID != w.uid {
				return apierrors.NewNotFound(corev1.Resource("pods"), w.pod.Name)
			}
			w.pod = fresh
		}
		return err
	})
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			w.log.Error(err, "Writing the pod status")
		}
		w.statusRetryAt = now.Add(statusRetryInterval)
		return
	}
	w.statusRetryAt = time.Time{}
}
