package controllers

import (
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

// kernelStart times one kernel's start by the controller's own sight of each phase: the
// resources' timestamps are whole seconds, too coarse for starts that take one. Only starts
// seen from the beginning are timed (a kernel whose start the controller first sees half
// way, after a restart or a change of leader, is not); a start that fails is not timed.
type kernelStart struct {
	uid  types.UID
	spec string
	// at is when each phase was first seen; zero for the phases the start went through
	// between two reconciles.
	at      [phaseReady + 1]time.Time
	reached startPhase
}

// observeStart takes what one reconcile of k observed and the status it computed: began is
// when the reconcile began, now when it observed.
func (m *kernelMemory) observeStart(k *nbv1.Kernel, obs *kernelObservation, status *nbv1.KernelStatus, began, now time.Time) {
	phase := startPhaseOf(obs, meta.IsStatusConditionTrue(status.Conditions, nbv1.ConditionReady))
	failed := meta.IsStatusConditionTrue(status.Conditions, nbv1.ConditionFailed)
	m.with(types.NamespacedName{Namespace: k.Namespace, Name: k.Name}, func(rec *kernelRecord) {
		st := rec.start
		if st != nil && st.uid != k.UID {
			rec.start, st = nil, nil
		}
		if st == nil {
			// A Kernel no reconcile has written a status for yet is starting now.
			if len(k.Status.Conditions) > 0 || failed || phase == phaseReady || m.starts >= maxTrackedStarts {
				return
			}
			st = &kernelStart{uid: k.UID, spec: k.Spec.KernelSpec}
			st.at[phaseNone] = began
			rec.start = st
		}
		if failed {
			rec.start = nil
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
		rec.start = nil
	})
}
