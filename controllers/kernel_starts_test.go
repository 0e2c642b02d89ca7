package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// histogram is the sample count and sum of an observer of a histogram vector.
func histogram(t *testing.T, o prometheus.Observer) [2]float64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return [2]float64{float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()}
}

func TestKernelStarts_TimesOnlyStartsSeenFromTheBeginning(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(node string, phase corev1.PodPhase) *kernelObservation {
		return &kernelObservation{pod: &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}}
	}
	starting := &nbv1.KernelStatus{}
	ready := &nbv1.KernelStatus{Conditions: []metav1.Condition{{Type: nbv1.ConditionReady, Status: metav1.ConditionTrue}}}
	failed := &nbv1.KernelStatus{Conditions: []metav1.Condition{{Type: nbv1.ConditionFailed, Status: metav1.ConditionTrue}}}
	type step struct {
		obs    *kernelObservation
		status *nbv1.KernelStatus
		// fresh: the Kernel has no status yet.
		fresh bool
		at    time.Duration
		uid   types.UID
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// want maps a phase (or "total") to its sample count and sum in seconds.
		want map[string][2]float64
	}{
		{
			name: "every phase seen",
			steps: []step{
				{obs: pod("", ""), status: starting, fresh: true, at: time.Second},
				{obs: pod("n1", ""), status: starting, at: 3 * time.Second},
				{obs: pod("n1", ""), status: starting, at: 4 * time.Second},
				{obs: pod("n1", corev1.PodRunning), status: starting, at: 10 * time.Second},
				{obs: pod("n1", corev1.PodRunning), status: ready, at: 10500 * time.Millisecond},
			},
			want: map[string][2]float64{"pod_created": {1, 1}, "pod_scheduled": {1, 2}, "pod_running": {1, 7},
				"kernel_ready": {1, 0.5}, "total": {1, 10.5}},
		},
		{
			name: "phases passed between two reconciles go to the next phase seen",
			steps: []step{
				{obs: &kernelObservation{}, status: starting, fresh: true},
				{obs: pod("", ""), status: starting, at: time.Second},
				{obs: pod("n1", corev1.PodRunning), status: ready, at: 5 * time.Second},
			},
			want: map[string][2]float64{"pod_created": {1, 1}, "kernel_ready": {1, 4}, "total": {1, 5}},
		},
		{
			name: "first seen half way",
			steps: []step{
				{obs: pod("n1", ""), status: starting, at: time.Second},
				{obs: pod("n1", corev1.PodRunning), status: ready, at: 2 * time.Second},
			},
		},
		{
			name: "failed",
			steps: []step{
				{obs: pod("", ""), status: starting, fresh: true},
				{obs: pod("n1", ""), status: failed, at: time.Second},
				{obs: pod("n1", corev1.PodRunning), status: ready, at: 2 * time.Second},
			},
		},
		{
			name: "deleted and made again under the same name",
			steps: []step{
				{obs: pod("", ""), status: starting, fresh: true, uid: "a"},
				{obs: pod("", ""), status: starting, fresh: true, at: 10 * time.Second, uid: "b"},
				{obs: pod("n1", corev1.PodRunning), status: ready, at: 12 * time.Second, uid: "b"},
			},
			want: map[string][2]float64{"pod_created": {1, 10}, "kernel_ready": {1, 2}, "total": {1, 12}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := "spec of " + tc.name
			var starts kernelMemory
			for _, s := range tc.steps {
				k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k", UID: s.uid}, Spec: nbv1.KernelParameters{KernelSpec: spec}}
				if !s.fresh {
					k.Status.Conditions = []metav1.Condition{{Type: nbv1.ConditionReady, Status: metav1.ConditionFalse}}
				}
				// Every reconcile began at t0: only a fresh kernel's first one counts it.
				starts.observeStart(k, s.obs, s.status, t0, t0.Add(s.at))
			}
			got := map[string][2]float64{}
			for _, phase := range phaseNames[1:] {
				if h := histogram(t, kernelStartPhaseSeconds.WithLabelValues(spec, phase)); h[0] > 0 {
					got[phase] = h
				}
			}
			if h := histogram(t, kernelStartSeconds.WithLabelValues(spec)); h[0] > 0 {
				got["total"] = h
			}
			if tc.want == nil {
				tc.want = map[string][2]float64{}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if len(starts.kernels) != 0 || starts.starts != 0 {
				t.Errorf("starts still held: %v (%d)", starts.kernels, starts.starts)
			}
		})
	}
}
