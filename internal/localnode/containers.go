package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/podns"
)

// Container state reasons, as the kubelet and container runtimes report them.
const (
	waitingContainerCreating = "ContainerCreating"
	waitingPodInitializing   = "PodInitializing"
	waitingCrashLoopBackOff  = "CrashLoopBackOff"
	waitingCreateConfigError = "CreateContainerConfigError"
	terminatedCompleted      = "Completed"
	terminatedError          = "Error"
	terminatedStartError     = "StartError"
	terminatedStatusUnknown  = "ContainerStatusUnknown"
)

const (
	// startErrorExitCode is what container runtimes report for a command that could not start.
	startErrorExitCode = 128
	// containerIDScheme prefixes the PID in a containerID, where a runtime puts "containerd://".
	containerIDScheme = "nbkube-local://"
)

// container is what a pod worker knows of one container.
type container struct {
	spec *corev1.Container
	init bool
	// status holds the fields of the API status that do not depend on the current run:
	// ready and started are derived in apiStatus.
	status corev1.ContainerStatus
	// hasRun is true once the container started at least once, here or, before a node restart,
	// in an earlier run of the node; the next start is then a restart.
	hasRun bool
	run    *containerRun
	// startPending asks for a (re)start at startAt.
	startPending bool
	startAt      time.Time
	finishedAt   time.Time
	backOff      crashBackOff
}

// containerRun is one run of a container's process and its probes.
type containerRun struct {
	proc   *process
	mounts mountTable
	// link is a sandboxed container's place in the pod network; nil otherwise.
	link         *sandboxLink
	env          []string
	probeCtx     context.Context
	cancelProbes context.CancelFunc
	// started: the startup probe passed, or there is none. ready: the readiness probe passed.
	started, ready bool
	// killing is set once the node stopped the run for a failed probe.
	killing bool
}

func (w *podWorker) newContainer(spec *corev1.Container, init bool, waiting string) *container {
	base := w.node.cfg.CrashLoopBackOff
	return &container{
		spec: spec,
		init: init,
		status: corev1.ContainerStatus{
			Name:  spec.Name,
			Image: spec.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
		},
		startPending: true,
		backOff:      crashBackOff{base: base, max: maxBackOffFactor * base},
	}
}

// startContainers starts what is due: init containers one at a time in order, then, once all of
// them succeeded, every main container.
func (w *podWorker) startContainers(ctx context.Context, now time.Time) {
	if !w.sandboxReady {
		return
	}
	due := func(c *container) bool { return c.run == nil && c.startPending && !now.Before(c.startAt) }
	for _, c := range w.initContainers {
		if c.succeeded() {
			continue
		}
		if due(c) {
			w.startContainer(ctx, c, now)
		}
		return
	}
	for _, c := range w.containers {
		if due(c) {
			w.startContainer(ctx, c, now)
		}
	}
}

func (c *container) succeeded() bool {
	t := c.status.State.Terminated
	return !c.startPending && t != nil && t.ExitCode == 0
}

// startContainer resolves a container's environment, mounts and command line and starts its
// process. A configuration that cannot be resolved yet (a missing Secret) leaves it waiting and
// retried; a command that cannot be started counts as a failed run, as with a container runtime.
func (w *podWorker) startContainer(ctx context.Context, c *container, now time.Time) {
	secrets, configMaps := envReferences(c.spec)
	objs, err := w.node.fetchObjects(ctx, w.pod.Namespace, secrets, configMaps)
	var declared []corev1.EnvVar
	if err == nil {
		declared, err = containerEnv(c.spec, w.envContext(objs))
	}
	var mounts mountTable
	if err == nil {
		mounts, err = newMountTable(c.spec, w.volumeDirs, envLookup(declared))
	}
	if err == nil {
		err = createSubPaths(mounts)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.setWaiting(waitingCreateConfigError, err.Error())
		c.startAt = now.Add(w.node.cfg.CrashLoopBackOff)
		w.event(w.containerRef(c), corev1.EventTypeWarning, eventFailed, "Error: "+err.Error())
		return
	}

	if c.hasRun {
		c.status.RestartCount++
		c.backOff.restarted(c.finishedAt, now)
	}
	c.hasRun, c.startPending = true, false
	logDir := filepath.Join(w.podDir, "logs", c.spec.Name)
	// Like the kubelet, keep the logs of the current and the previous run only.
	_ = os.Remove(filepath.Join(logDir, fmt.Sprintf("%d.log", c.status.RestartCount-2)))

	if c.spec.WorkingDir != "" {
		if dir, underMount := mounts.translate(c.spec.WorkingDir); underMount {
			// A container runtime creates a missing working directory; inside a volume so do we.
			err = os.MkdirAll(dir, 0o755)
		}
	}
	run := &containerRun{mounts: mounts}
	logPath := filepath.Join(logDir, fmt.Sprintf("%d.log", c.status.RestartCount))
	onExit := func(*process) { w.send(workerEvent{c: c, run: run, exited: true}) }
	var argv []string
	switch {
	case err != nil:
	case w.sandboxed():
		var spec podns.Spec
		if spec, err = w.sandboxSpec(c, mounts, declared); err == nil {
			argv, run.env = spec.Argv, spec.Env
			run.proc, err = startProcess(processSpec{sandbox: &spec, spawner: w.node.spawner, logPath: logPath}, w.node.cfg.Clock, onExit)
		}
		if err == nil {
			run.link, err = w.node.network.attach(ctx, w.pod, w.ip, c.spec, run.proc.control, w.log)
			if err != nil {
				run.proc.stop(0, w.node.cfg.Clock)
			}
		}
	default:
		var cmd hostCommand
		if cmd, err = resolveCommand(c.spec, mounts, envLookup(declared), w.podDir, w.node.resolver); err == nil {
			for i := range declared {
				declared[i].Value = mounts.rewrite(declared[i].Value)
			}
			argv, run.env = cmd.argv, processEnv(declared, w.node.hostEnv, w.pod.Name)
			run.proc, err = startProcess(processSpec{cmd: cmd, env: run.env, logPath: logPath}, w.node.cfg.Clock, onExit)
		}
	}
	if err != nil {
		if c.status.State.Terminated != nil {
			c.status.LastTerminationState = c.status.State
		}
		c.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode:   startErrorExitCode,
			Reason:     terminatedStartError,
			Message:    err.Error(),
			StartedAt:  metaTime(now),
			FinishedAt: metaTime(now),
		}}
		c.finishedAt = now
		w.event(w.containerRef(c), corev1.EventTypeWarning, eventFailed, "Error: "+err.Error())
		w.afterExit(c)
		return
	}

	w.log.V(1).Info("Started container", "container", c.spec.Name, "pid", run.proc.pid, "command", argv)
	if c.status.State.Terminated != nil {
		c.status.LastTerminationState = c.status.State
	}
	c.status.ContainerID = fmt.Sprintf("%s%d", containerIDScheme, run.proc.pid)
	c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metaTime(run.proc.startedAt)}}
	c.run = run
	w.event(w.containerRef(c), corev1.EventTypeNormal, eventStarted, "Started container "+c.spec.Name)

	run.probeCtx, run.cancelProbes = context.WithCancel(ctx)
	if c.spec.StartupProbe != nil {
		w.startProber(c, run, probeStartup, c.spec.StartupProbe)
	} else {
		w.containerStarted(c, run)
	}
}

// createSubPaths creates the subPath directories that do not exist yet, as the kubelet does.
func createSubPaths(t mountTable) error {
	for _, m := range t {
		if !m.subPath {
			continue
		}
		if _, err := os.Stat(m.hostPath); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(m.hostPath, 0o755); err != nil {
				return fmt.Errorf("creating subPath %s: %w", m.hostPath, err)
			}
		}
	}
	return nil
}

// handle applies news from a process or a prober.
func (w *podWorker) handle(ev workerEvent) {
	c, run := ev.c, ev.run
	if c.run != run {
		return // from an earlier run, already accounted for
	}
	if ev.exited {
		w.recordExit(c, w.node.cfg.Clock.Now())
		w.afterExit(c)
		return
	}
	switch ev.probe {
	case probeStartup:
		if ev.success {
			w.containerStarted(c, run)
			return
		}
		w.killForProbe(c, run, probeStartup)
	case probeReadiness:
		run.ready = ev.success
	case probeLiveness:
		if !ev.success {
			w.killForProbe(c, run, probeLiveness)
		}
	}
}

// recordExit turns a finished run into the container's terminated state.
func (w *podWorker) recordExit(c *container, now time.Time) {
	run := c.run
	run.cancelProbes()
	if run.link != nil {
		w.node.network.detach(run.link)
	}
	c.run = nil
	p := run.proc
	t := &corev1.ContainerStateTerminated{
		ExitCode:    p.exitCode,
		Reason:      terminatedCompleted,
		StartedAt:   metaTime(p.startedAt),
		FinishedAt:  metaTime(now),
		ContainerID: c.status.ContainerID,
	}
	if p.exitCode != 0 {
		t.Reason = terminatedError
	}
	if path, ok := run.mounts.translate(c.spec.TerminationMessagePath); ok {
		t.Message = readTerminationMessage(path)
	}
	if t.Message == "" && p.exitCode != 0 && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		t.Message = logTail(p.logPath)
	}
	if p.exitErr != nil && t.Message == "" {
		t.Message = p.exitErr.Error()
	}
	c.status.State = corev1.ContainerState{Terminated: t}
	c.finishedAt = now
	w.log.V(1).Info("Container exited", "container", c.spec.Name, "exitCode", p.exitCode)
}

// afterExit applies the restart policy and the crash-loop back-off to a container that ended;
// only an active pod restarts its containers.
func (w *podWorker) afterExit(c *container) {
	t := c.status.State.Terminated
	if w.stage != stageActive || !shouldRestart(w.pod, c, t.ExitCode) {
		c.startPending = false
		return
	}
	at, wait := c.backOff.restartAt(c.finishedAt)
	c.startPending, c.startAt = true, at
	if wait > 0 {
		podName := fmt.Sprintf("%s_%s(%s)", w.pod.Name, w.pod.Namespace, w.pod.UID)
		c.setWaiting(waitingCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", wait, c.spec.Name, podName))
		w.event(w.containerRef(c), corev1.EventTypeWarning, eventBackOff,
			fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.spec.Name, podName))
	}
}

// shouldRestart applies the pod's restart policy: init containers restart only after a failure,
// and never under Never.
func shouldRestart(pod *corev1.Pod, c *container, exitCode int32) bool {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return !c.init || exitCode != 0
	}
}

// setWaiting puts a container in a waiting state, keeping a termination as its last state.
func (c *container) setWaiting(reason, message string) {
	if c.status.State.Terminated != nil {
		c.status.LastTerminationState = c.status.State
	}
	c.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

// apiStatus is the container's status as the API shows it.
func (c *container) apiStatus() corev1.ContainerStatus {
	s := *c.status.DeepCopy()
	s.Ready, s.Started = false, ptr.To(false)
	switch t := s.State.Terminated; {
	case c.run != nil:
		s.Started = ptr.To(c.run.started)
		s.Ready = !c.init && c.run.started && (c.spec.ReadinessProbe == nil || c.run.ready)
	case c.init && t != nil && t.ExitCode == 0:
		// The kubelet marks a completed init container ready; Initialized is computed from it.
		s.Ready = true
	}
	return s
}
