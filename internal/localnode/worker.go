package localnode

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// objectRef names a Secret or ConfigMap.
type objectRef struct{ kind, namespace, name string }

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
	// stage is where the pod is in its life here; see stage for the transitions.
	stage stage
	// ipReleased: the address went back to the pool; w.ip stays in the status.
	ipReleased bool
	startTime  *metav1.Time
	volumeDirs map[string]string
	// sandboxReady: the pod's address and volumes were set up once; a failed refresh keeps it.
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
		w.inherited, w.stage = true, w.stage.next(phaseFinal)
		return w
	}
	if f := admit(pod); f != nil {
		w.failure, w.stage = f, w.stage.next(phaseFinal)
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
	if w.stage == stageDeleted {
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
	if w.stage == stageActive {
		w.prepareSandbox(ctx, now)
		w.startContainers(ctx, now)
	}
	w.writeStatus(ctx, now)
	if w.stage == stageActive && terminalPhase(w.phase()) {
		w.stage = w.stage.next(phaseFinal)
		w.releaseIP()
	}
	return w.nextWake(now)
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
	if w.stage != stageActive {
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
