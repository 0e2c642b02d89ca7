package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Event reasons, as the kubelet uses them.
const (
	eventStarted        = "Started"
	eventKilling        = "Killing"
	eventBackOff        = "BackOff"
	eventUnhealthy      = "Unhealthy"
	eventFailed         = "Failed"
	eventFailedMount    = "FailedMount"
	eventSandboxChanged = "SandboxChanged"
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
	// lostContainerExitCode is what the kubelet reports for a container that vanished.
	lostContainerExitCode = 137
	// containerIDScheme prefixes the PID in a containerID, where a runtime puts "containerd://".
	containerIDScheme = "nbkube-local://"
	// defaultTerminationGrace is the API's default terminationGracePeriodSeconds.
	defaultTerminationGrace = 30 * time.Second
	// minGracePeriod is the kubelet's floor for stopping a container
	// (minimumGracePeriodInSeconds): even a grace of 0 gets SIGTERM and a moment to act on it.
	minGracePeriod = 2 * time.Second
	// statusRetryInterval is how soon a failed status write is tried again.
	statusRetryInterval = time.Second
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
	proc         *process
	mounts       mountTable
	env          []string
	probeCtx     context.Context
	cancelProbes context.CancelFunc
	// started: the startup probe passed, or there is none. ready: the readiness probe passed.
	started, ready bool
	// killing is set once the node stopped the run for a failed probe.
	killing bool
}

// objectRef names a Secret or ConfigMap.
type objectRef struct{ kind, namespace, name string }

// issuedToken is a service account token and when to ask for a new one.
type issuedToken struct {
	token     string
	refreshAt time.Time
}

// workerEvent is news for a pod worker from a process or a prober.
type workerEvent struct {
	c       *container
	run     *containerRun
	exited  bool
	probe   probeKind
	success bool
}

// podWorker runs one pod, like a kubelet pod worker: one goroutine owns the pod's state and reacts
// to pod updates, process exits, probe results and timers, then writes the status if it changed.
type podWorker struct {
	node   *Node
	uid    types.UID
	podDir string
	log    logr.Logger

	// refs are the Secrets and ConfigMaps the pod's volumes project; fixed with the pod's spec.
	refs map[objectRef]bool

	mu     sync.Mutex
	latest *corev1.Pod
	gone   bool
	// refChanged: one of refs was created, changed or deleted since the worker last looked.
	refChanged bool
	notify     chan struct{}

	events     chan workerEvent
	quit       chan struct{}
	background sync.WaitGroup

	// Everything below belongs to the run goroutine.
	pod                        *corev1.Pod
	initContainers, containers []*container
	ip                         string
	// ipReleased: the address went back to the pool; w.ip stays in the status.
	ipReleased       bool
	startTime        *metav1.Time
	volumeDirs       map[string]string
	sandboxReady     bool
	volumesRefreshAt time.Time
	// volumesStale: a Secret or ConfigMap the volumes project changed after they were written.
	volumesStale bool
	// tokens are the service account tokens issued for the pod's projections, reused until due.
	tokens         map[string]issuedToken
	sandboxRetryAt time.Time
	statusRetryAt  time.Time
	failure        *podFailure
	// inherited: the pod had ended before this worker saw it; its status is left alone.
	inherited bool
	// final: the pod reached Succeeded or Failed; nothing runs or restarts any more.
	final bool
	// stopping: containers are being stopped for good; exits do not restart them.
	stopping bool
	// terminated: the containers were stopped for deletion, so the phase is final.
	terminated bool
	// deleted: the API object was deleted; the worker waits for the informer to drop it.
	deleted bool
}

func newPodWorker(n *Node, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		node:   n,
		uid:    pod.UID,
		podDir: filepath.Join(n.cfg.DataDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)),
		notify: make(chan struct{}, 1),
		events: make(chan workerEvent, 16),
		quit:   make(chan struct{}),
		pod:    pod,
		refs:   map[objectRef]bool{},
		tokens: map[string]issuedToken{},
	}
	secrets, configMaps := volumeReferences(pod)
	for _, name := range secrets {
		w.refs[objectRef{"Secret", pod.Namespace, name}] = true
	}
	for _, name := range configMaps {
		w.refs[objectRef{"ConfigMap", pod.Namespace, name}] = true
	}
	if terminalPhase(pod.Status.Phase) {
		w.inherited, w.final = true, true
		return w
	}
	if f := admit(pod); f != nil {
		w.failure, w.final = f, true
		return w
	}
	waitingMain := waitingContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		waitingMain = waitingPodInitializing
	}
	for i := range pod.Spec.InitContainers {
		w.initContainers = append(w.initContainers, w.newContainer(&pod.Spec.InitContainers[i], true, waitingPodInitializing))
	}
	for i := range pod.Spec.Containers {
		w.containers = append(w.containers, w.newContainer(&pod.Spec.Containers[i], false, waitingMain))
	}
	if pod.Status.StartTime != nil {
		w.adoptLeftover()
	}
	return w
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
		w.final = true
	case w.pod.DeletionTimestamp == nil:
		w.event(w.podRef(), corev1.EventTypeNormal, eventSandboxChanged, "The local node restarted; the pod's containers start again")
	}
}

// deliver hands the worker the newest version of its pod; only the latest one matters.
func (w *podWorker) deliver(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod
	w.mu.Unlock()
	w.poke()
}

// deliverGone tells the worker that its pod left the API.
func (w *podWorker) deliverGone() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.poke()
}

// objectChanged tells the worker that a Secret or ConfigMap was created, changed or deleted;
// the worker refreshes its volumes if they project it.
func (w *podWorker) objectChanged(ref objectRef) {
	if !w.refs[ref] {
		return
	}
	w.mu.Lock()
	w.refChanged = true
	w.mu.Unlock()
	w.poke()
}

func (w *podWorker) poke() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *podWorker) take() (gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.latest != nil {
		w.pod, w.latest = w.latest, nil
	}
	if w.refChanged {
		w.refChanged, w.volumesStale = false, true
	}
	return w.gone
}

// send delivers news from a process or prober; it gives up once the worker has ended.
func (w *podWorker) send(ev workerEvent) bool {
	select {
	case w.events <- ev:
		return true
	case <-w.quit:
		return false
	}
}

// run is the worker's loop. It returns when the pod has left the API (its processes killed and
// its directory removed) or when ctx ends (processes stopped, directory kept for the next run).
func (w *podWorker) run(ctx context.Context) {
	w.log = log.FromContext(ctx).WithValues("pod", w.pod.Namespace+"/"+w.pod.Name, "podUID", w.uid)
	ctx = log.IntoContext(ctx, w.log)
	defer func() {
		close(w.quit)
		w.background.Wait()
	}()
	clk := w.node.cfg.Clock
	for {
		gone := w.take()
		switch {
		case ctx.Err() != nil:
			w.stopContainers(terminationGrace(w.pod), false)
			w.releaseIP()
			return
		case gone:
			w.stopContainers(minGracePeriod, false)
			w.releaseIP()
			w.removePodDir()
			return
		}
		wake := w.sync(ctx)
		var (
			timer clock.Timer
			fired <-chan time.Time
		)
		if !wake.IsZero() {
			timer = clk.NewTimer(max(wake.Sub(clk.Now()), 0))
			fired = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-w.notify:
		case ev := <-w.events:
			w.handle(ev)
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// sync moves the pod one step towards what its spec asks for and writes the status if it
// changed. It returns when it wants to run again for a timer (zero: no timer).
func (w *podWorker) sync(ctx context.Context) time.Time {
	if w.deleted {
		return time.Time{}
	}
	now := w.node.cfg.Clock.Now()
	if w.pod.DeletionTimestamp != nil {
		return w.terminate(ctx)
	}
	if w.startTime == nil && !w.inherited {
		w.startTime = ptr.To(metaTime(now))
	}
	if w.failure != nil && !w.inherited && w.pod.Status.Phase != corev1.PodFailed {
		w.event(w.podRef(), corev1.EventTypeWarning, w.failure.reason, w.failure.message)
	}
	if !w.final {
		w.prepareSandbox(ctx, now)
		w.startContainers(ctx, now)
	}
	w.writeStatus(ctx, now)
	if !w.final && terminalPhase(w.phase()) {
		w.final = true
		w.releaseIP()
	}
	return w.nextWake(now)
}

// releaseIP gives the pod's address back, once: a second release could drop the lock of
// another pod that took the address in between, and two agents would then share it.
func (w *podWorker) releaseIP() {
	if !w.ipReleased {
		w.ipReleased = true
		w.node.addresses.release(w.ip)
	}
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

func (w *podWorker) allContainers() []*container {
	return append(append([]*container{}, w.initContainers...), w.containers...)
}

func (w *podWorker) nextWake(now time.Time) time.Time {
	var wake time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	earlier(w.statusRetryAt)
	if w.final {
		return wake
	}
	earlier(w.sandboxRetryAt)
	earlier(w.volumesRefreshAt)
	for _, c := range w.allContainers() {
		if c.startPending && c.run == nil {
			earlier(c.startAt)
		}
	}
	return wake
}

// prepareSandbox gives the pod its address and volumes, and refreshes volumes whose service
// account tokens are due or whose Secrets and ConfigMaps are to be read again.
func (w *podWorker) prepareSandbox(ctx context.Context, now time.Time) {
	if now.Before(w.sandboxRetryAt) {
		return
	}
	if w.ip == "" {
		if w.pod.Spec.HostNetwork {
			w.ip = hostIP
		} else {
			ip, err := w.node.addresses.allocate()
			if err != nil {
				w.log.Error(err, "Allocating a pod IP")
				w.sandboxRetryAt = now.Add(w.node.cfg.CrashLoopBackOff)
				return
			}
			w.ip = ip
		}
	}
	if w.sandboxReady && !w.volumesStale && (w.volumesRefreshAt.IsZero() || now.Before(w.volumesRefreshAt)) {
		return
	}
	dirs, refreshAt, err := w.setUpVolumes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.event(w.podRef(), corev1.EventTypeWarning, eventFailedMount, err.Error())
		}
		w.sandboxRetryAt = now.Add(w.node.cfg.CrashLoopBackOff)
		return
	}
	w.volumeDirs, w.volumesRefreshAt, w.sandboxReady, w.volumesStale = dirs, refreshAt, true, false
}

// setUpVolumes materialises every volume of the pod as a host directory.
func (w *podWorker) setUpVolumes(ctx context.Context) (map[string]string, time.Time, error) {
	pod := w.pod
	secrets, configMaps := volumeReferences(pod)
	objs, err := w.node.fetchObjects(ctx, pod.Namespace, secrets, configMaps)
	if err != nil {
		return nil, time.Time{}, err
	}
	ec := w.envContext(objs)
	tokens := func(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
		key := fmt.Sprintf("%s/%d", src.Audience, ptr.Deref(src.ExpirationSeconds, 0))
		if t, ok := w.tokens[key]; ok && w.node.cfg.Clock.Now().Before(t.refreshAt) {
			return t.token, t.refreshAt, nil
		}
		token, refreshAt, err := w.node.requestToken(ctx, pod, src)
		if err == nil {
			w.tokens[key] = issuedToken{token, refreshAt}
		}
		return token, refreshAt, err
	}
	dirs := make(map[string]string, len(pod.Spec.Volumes))
	var refreshAt time.Time
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		dir := filepath.Join(w.podDir, "volumes", v.Name)
		var err error
		switch {
		case v.HostPath != nil:
			dir, err = v.HostPath.Path, prepareHostPath(v.HostPath)
		case v.PersistentVolumeClaim != nil:
			dir = claimDir(&w.node.cfg, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			err = os.MkdirAll(dir, 0o755)
		case v.EmptyDir != nil:
			err = os.MkdirAll(dir, 0o755)
		default:
			var p payload
			var at time.Time
			p, at, err = volumePayload(ctx, v, ec, tokens)
			if err == nil {
				err = writePayload(dir, p)
			}
			if !at.IsZero() && (refreshAt.IsZero() || at.Before(refreshAt)) {
				refreshAt = at
			}
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)
		}
		dirs[v.Name] = dir
	}
	if len(secrets)+len(configMaps) > 0 {
		if at := w.node.cfg.Clock.Now().Add(w.node.cfg.VolumeResync); refreshAt.IsZero() || at.Before(refreshAt) {
			refreshAt = at
		}
	}
	return dirs, refreshAt, nil
}

func (w *podWorker) envContext(objs podObjects) envContext {
	return envContext{pod: w.pod, podIP: w.ip, allocatable: w.node.capacity, objects: objs, host: w.node.hostEnv}
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

	cmd, err := resolveCommand(c.spec, mounts, envLookup(declared), w.podDir, w.node.resolver)
	if err == nil && c.spec.WorkingDir != "" {
		if _, underMount := mounts.translate(c.spec.WorkingDir); underMount {
			// A container runtime creates a missing working directory; inside a volume so do we.
			err = os.MkdirAll(cmd.dir, 0o755)
		}
	}
	run := &containerRun{mounts: mounts}
	if err == nil {
		for i := range declared {
			declared[i].Value = mounts.rewrite(declared[i].Value)
		}
		run.env = processEnv(declared, w.node.hostEnv, w.pod.Name)
		run.proc, err = startProcess(processSpec{
			cmd:     cmd,
			env:     run.env,
			logPath: filepath.Join(logDir, fmt.Sprintf("%d.log", c.status.RestartCount)),
		}, w.node.cfg.Clock, func(*process) { w.send(workerEvent{c: c, run: run, exited: true}) })
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

	w.log.V(1).Info("Started container", "container", c.spec.Name, "pid", run.proc.pid, "command", cmd.argv)
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

// containerStarted marks a run as started (its startup probe passed, or it has none) and starts
// its readiness and liveness probes, which the kubelet holds back until then.
func (w *podWorker) containerStarted(c *container, run *containerRun) {
	run.started = true
	w.startProber(c, run, probeReadiness, c.spec.ReadinessProbe)
	w.startProber(c, run, probeLiveness, c.spec.LivenessProbe)
}

func (w *podWorker) startProber(c *container, run *containerRun, kind probeKind, probe *corev1.Probe) {
	if probe == nil {
		return
	}
	// The prober runs on its own goroutine: it gets the event reference, not the worker's pod.
	ref := w.containerRef(c)
	p := &prober{
		kind:      kind,
		probe:     probe,
		container: c.spec,
		podIP:     w.ip,
		clock:     w.node.cfg.Clock,
		unhealthy: func(msg string) { w.event(ref, corev1.EventTypeWarning, eventUnhealthy, msg) },
		report: func(success bool) bool {
			select {
			case <-run.probeCtx.Done():
				return false
			default:
				return w.send(workerEvent{c: c, run: run, probe: kind, success: success})
			}
		},
	}
	if probe.Exec != nil {
		// The kubelet runs exec probes as they are: no $(VAR) expansion.
		noVars := func(string) (string, bool) { return "", false }
		probeContainer := &corev1.Container{Name: c.spec.Name, Command: probe.Exec.Command, WorkingDir: c.spec.WorkingDir}
		cmd, err := resolveCommand(probeContainer, run.mounts, noVars, w.podDir, w.node.resolver)
		p.exec = &execProbe{cmd: cmd, env: run.env, err: err}
	}
	w.background.Go(func() { p.run(run.probeCtx) })
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

// killForProbe stops a run whose liveness or startup probe failed; its exit then restarts it
// as the restart policy says.
func (w *podWorker) killForProbe(c *container, run *containerRun, kind probeKind) {
	if run.killing {
		return
	}
	run.killing = true
	w.event(w.containerRef(c), corev1.EventTypeNormal, eventKilling,
		fmt.Sprintf("Container %s failed %s probe, will be restarted", c.spec.Name, strings.ToLower(string(kind))))
	probe := c.spec.LivenessProbe
	if kind == probeStartup {
		probe = c.spec.StartupProbe
	}
	grace := terminationGrace(w.pod)
	if probe.TerminationGracePeriodSeconds != nil {
		grace = max(time.Duration(*probe.TerminationGracePeriodSeconds)*time.Second, minGracePeriod)
	}
	proc := run.proc
	w.background.Go(func() { proc.stop(grace, w.node.cfg.Clock) })
}

// recordExit turns a finished run into the container's terminated state.
func (w *podWorker) recordExit(c *container, now time.Time) {
	run := c.run
	run.cancelProbes()
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

// afterExit applies the restart policy and the crash-loop back-off to a container that ended.
func (w *podWorker) afterExit(c *container) {
	t := c.status.State.Terminated
	if w.stopping || !shouldRestart(w.pod, c, t.ExitCode) {
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

func (w *podWorker) state() podState {
	s := podState{podIP: w.ip, startTime: w.startTime, sandboxReady: w.sandboxReady, terminal: w.terminated, failure: w.failure}
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

// terminate carries out a deletion as the kubelet does: stop the containers within the grace
// period, write the final status, remove the pod's directory (never the data of PVCs or host
// paths, which live elsewhere), and delete the object for good with a UID precondition, so that
// a new pod of the same name is never touched.
func (w *podWorker) terminate(ctx context.Context) time.Time {
	now := w.node.cfg.Clock.Now()
	if !w.terminated {
		grace := terminationGrace(w.pod)
		if w.pod.DeletionGracePeriodSeconds != nil {
			grace = max(time.Duration(*w.pod.DeletionGracePeriodSeconds)*time.Second, minGracePeriod)
		}
		w.stopContainers(grace, true)
		w.terminated = true
		w.releaseIP()
		w.removePodDir()
		now = w.node.cfg.Clock.Now()
	}
	w.writeStatus(ctx, now)
	err := w.node.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &w.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		if ctx.Err() == nil {
			w.log.Error(err, "Deleting the terminated pod")
		}
		return now.Add(statusRetryInterval)
	}
	w.deleted = true
	return time.Time{}
}

// stopContainers stops every running container with SIGTERM, SIGKILL after grace, and waits for
// all of them; none restarts afterwards.
func (w *podWorker) stopContainers(grace time.Duration, events bool) {
	w.stopping = true
	var wg sync.WaitGroup
	var stopped []*container
	for _, c := range w.allContainers() {
		c.startPending = false
		if c.run == nil {
			continue
		}
		stopped = append(stopped, c)
		if events {
			w.event(w.containerRef(c), corev1.EventTypeNormal, eventKilling, "Stopping container "+c.spec.Name)
		}
		p := c.run.proc
		wg.Go(func() { p.stop(grace, w.node.cfg.Clock) })
	}
	wg.Wait()
	now := w.node.cfg.Clock.Now()
	for _, c := range stopped {
		w.recordExit(c, now)
	}
}

func (w *podWorker) removePodDir() {
	if err := os.RemoveAll(w.podDir); err != nil {
		w.log.Error(err, "Removing the pod directory", "dir", w.podDir)
	}
}

// terminationGrace is the pod's terminationGracePeriodSeconds, with the kubelet's floor.
func terminationGrace(pod *corev1.Pod) time.Duration {
	grace := defaultTerminationGrace
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return max(grace, minGracePeriod)
}

func (w *podWorker) podRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind:       "Pod",
		APIVersion: "v1",
		Namespace:  w.pod.Namespace,
		Name:       w.pod.Name,
		UID:        w.uid,
	}
}

// containerRef points an event at a container, as the kubelet's do (kubectl describe shows the
// field path).
func (w *podWorker) containerRef(c *container) *corev1.ObjectReference {
	ref := w.podRef()
	field := "spec.containers"
	if c.init {
		field = "spec.initContainers"
	}
	ref.FieldPath = field + "{" + c.spec.Name + "}"
	return ref
}

func (w *podWorker) event(ref *corev1.ObjectReference, eventType, reason, message string) {
	w.node.recorder.Event(ref, eventType, reason, message)
}

// metaTime is a timestamp as the API stores it: whole seconds, so that a status read back
// compares equal to the one written.
func metaTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second))
}
