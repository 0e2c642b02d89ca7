package controllers

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// startPhase is how far a kernel's start has come.
type startPhase int

const (
	phaseNone startPhase = iota
	phasePodCreated
	phasePodScheduled
	phasePodRunning
	phaseReady
)

var phaseNames = [...]string{"", "pod_created", "pod_scheduled", "pod_running", "kernel_ready"}

// startPhaseOf is the phase a reconcile observed.
func startPhaseOf(obs *kernelObservation, ready bool) startPhase {
	switch {
	case obs.pod == nil:
		return phaseNone
	case ready:
		return phaseReady
	case obs.pod.Status.Phase == corev1.PodRunning:
		return phasePodRunning
	case obs.pod.Spec.NodeName != "":
		return phasePodScheduled
	}
	return phasePodCreated
}

// maxTrackedStarts bounds the starts timed at once; more are left untimed.
const maxTrackedStarts = 10000

// kernelStarts times kernel starts by the controller's own sight of each phase: the
// resources' timestamps are whole seconds, too coarse for starts that take one. Only starts
// seen from the beginning are timed (a kernel whose start the controller first sees half
// way, after a restart or a change of leader, is not); a start that fails is not timed.
type kernelStarts struct {
	mu     sync.Mutex
	starts map[types.NamespacedName]*kernelStart
}

type kernelStart struct {
	uid  types.UID
	spec string
	// at is when each phase was first seen; zero for the phases the start went through
	// between two reconciles.
	at      [phaseReady + 1]time.Time
	reached startPhase
}

// observe takes what one reconcile of k observed and the status it computed: began is when
// the reconcile began, now when it observed.
func (s *kernelStarts) observe(k *nbv1.Kernel, obs *kernelObservation, status *nbv1.KernelStatus, began, now time.Time) {
	phase := startPhaseOf(obs, meta.IsStatusConditionTrue(status.Conditions, nbv1.ConditionReady))
	failed := meta.IsStatusConditionTrue(status.Conditions, nbv1.ConditionFailed)
	key := types.NamespacedName{Namespace: k.Namespace, Name: k.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.starts[key]
	if st != nil && st.uid != k.UID {
		delete(s.starts, key)
		st = nil
	}
	if st == nil {
		// A Kernel no reconcile has written a status for yet is starting now.
		if len(k.Status.Conditions) > 0 || failed || phase == phaseReady || len(s.starts) >= maxTrackedStarts {
			return
		}
		if s.starts == nil {
			s.starts = map[types.NamespacedName]*kernelStart{}
		}
		st = &kernelStart{uid: k.UID, spec: k.Spec.KernelSpec}
		st.at[phaseNone] = began
		s.starts[key] = st
	}
	if failed {
		delete(s.starts, key)
		return
	}
	if phase > st.reached {
		st.at[phase], st.reached = now, phase
	}
	if phase < phaseReady {
		return
	}
	prev := st.at[phaseNone]
	for p := phasePodCreated; p <= phaseReady; p++ {
		if st.at[p].IsZero() {
			continue
		}
		kernelStartPhaseSeconds.WithLabelValues(st.spec, phaseNames[p]).Observe(st.at[p].Sub(prev).Seconds())
		prev = st.at[p]
	}
	kernelStartSeconds.WithLabelValues(st.spec).Observe(now.Sub(st.at[phaseNone]).Seconds())
	delete(s.starts, key)
}

// forget drops the start of a kernel that is gone or going.
func (s *kernelStarts) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.starts, key)
}
