package localnode

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// defaultTerminationGrace is the API's default terminationGracePeriodSeconds.
	defaultTerminationGrace = 30 * time.Second
	// minGracePeriod is the kubelet's floor for stopping a container
	// (minimumGracePeriodInSeconds): even a grace of 0 gets SIGTERM and a moment to act on it.
	minGracePeriod = 2 * time.Second
)

// terminate carries out a deletion as the kubelet does: stop the containers within the grace
// period, write the final status, remove the pod's directory (never the data of PVCs or host
// paths, which live elsewhere), and delete the object for good with a UID precondition, so that
// a new pod of the same name is never touched.
func (w *podWorker) terminate(ctx context.Context) time.Time {
	now := w.node.cfg.Clock.Now()
	if w.stage < stageTerminated {
		grace := terminationGrace(w.pod)
		if w.pod.DeletionGracePeriodSeconds != nil {
			grace = max(time.Duration(*w.pod.DeletionGracePeriodSeconds)*time.Second, minGracePeriod)
		}
		w.stopContainers(grace, true)
		w.stage = w.stage.next(stoppedForDeletion)
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
	w.stage = w.stage.next(objectDeleted)
	return time.Time{}
}

// stopContainers stops every running container with SIGTERM, SIGKILL after grace, and waits for
// all of them. None restarts afterwards: it records their exits itself, so their exit events find
// no run to restart, and its callers leave the active stage (terminate) or end the worker.
func (w *podWorker) stopContainers(grace time.Duration, events bool) {
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

// terminationGrace is the pod's terminationGracePeriodSeconds, with the kubelet's floor.
func terminationGrace(pod *corev1.Pod) time.Duration {
	grace := defaultTerminationGrace
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return max(grace, minGracePeriod)
}
