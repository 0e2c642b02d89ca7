package localnode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of pod failures particular to this node; they name the pod's status.reason and the
// event that announces it.
const (
	reasonNoCommand          = "NoCommand"
	reasonUnsupportedVolume  = "UnsupportedVolume"
	reasonUnsupportedProbe   = "UnsupportedProbe"
	reasonUnsupportedSidecar = "UnsupportedSidecar"
	reasonNodeRestarted      = "NodeRestarted"
)

// lostContainerExitCode is what the kubelet reports for a container that vanished.
const lostContainerExitCode = 137

// admit rejects, as the kubelet's admission does, a pod this node cannot run at all.
func admit(pod *corev1.Pod) *podFailure {
	if err := checkVolumes(pod); err != nil {
		return &podFailure{reason: reasonUnsupportedVolume, message: err.Error()}
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if len(c.Command) == 0 {
				return &podFailure{reason: reasonNoCommand, message: fmt.Sprintf(
					"container %s has no command: the local node runs no images, so there is no entrypoint to fall back on", c.Name)}
			}
			for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
				if p != nil && p.GRPC != nil {
					return &podFailure{reason: reasonUnsupportedProbe, message: fmt.Sprintf("container %s: gRPC probes are %v", c.Name, errUnsupported)}
				}
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil {
			return &podFailure{reason: reasonUnsupportedSidecar, message: fmt.Sprintf("init container %s: sidecar containers (restartPolicy on an init container) are %v", c.Name, errUnsupported)}
		}
	}
	return nil
}

// adoptLeftover takes over a pod that an earlier run of the node started: its processes died
// with that run. Like a kubelet after a reboot, the node starts the containers again (counting
// a restart) unless restartPolicy is Never, which fails a pod whose containers had run.
func (w *podWorker) adoptLeftover() {
	old := w.pod.Status
	w.startTime = old.StartTime
	lost := func(s corev1.ContainerStatus) *corev1.ContainerStateTerminated {
		t := &corev1.ContainerStateTerminated{
			ExitCode:    lostContainerExitCode,
			Reason:      terminatedStatusUnknown,
			Message:     "The container was running when the local node stopped",
			ContainerID: s.ContainerID,
			FinishedAt:  metaTime(w.node.cfg.Clock.Now()),
		}
		if s.State.Running != nil {
			t.StartedAt = s.State.Running.StartedAt
		}
		return t
	}
	never := w.pod.Spec.RestartPolicy == corev1.RestartPolicyNever
	ran := false
	for _, c := range w.allContainers() {
		list := old.ContainerStatuses
		if c.init {
			list = old.InitContainerStatuses
		}
		s, ok := containerStatusOf(list, c.spec.Name)
		if !ok {
			continue
		}
		c.status.RestartCount, c.status.ContainerID = s.RestartCount, s.ContainerID
		var last *corev1.ContainerStateTerminated
		switch {
		case s.State.Running != nil:
			last = lost(s)
		case s.State.Terminated != nil:
			last = s.State.Terminated
		default:
			last = s.LastTerminationState.Terminated
		}
		if last == nil {
			continue
		}
		c.hasRun, ran = true, true
		switch {
		case never:
			c.status.State = corev1.ContainerState{Terminated: last}
			c.startPending = false
		case !c.init && s.State.Terminated != nil && !shouldRestart(w.pod, c, last.ExitCode):
			// Finished for good before the restart (a success under OnFailure).
			c.status.State, c.startPending = s.State, false
		default:
			c.status.LastTerminationState = corev1.ContainerState{Terminated: last}
		}
	}
	switch {
	case !ran:
		// Nothing had started (volumes were still failing, say): carry on as with a new pod.
	case never:
		w.failure = &podFailure{reason: reasonNodeRestarted, message: "The local node restarted while the pod was running; its processes ended with the node and restartPolicy Never forbids starting them again"}
		w.stage = w.stage.next(phaseFinal)
	case w.pod.DeletionTimestamp == nil:
		w.event(w.podRef(), corev1.EventTypeNormal, eventSandboxChanged, "The local node restarted; the pod's containers start again")
	}
}
