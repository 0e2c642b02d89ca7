package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// The controllers' metrics live in controller-runtime's registry, which the manager's
// metrics endpoint serves (and, under `nbkube local`, the API's /metrics). Kernel specs label
// them: admins make those, so they stay few.
var (
	kernelStartPhaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "nbkube_kernel_start_phase_duration_seconds",
		Help: "Time a kernel start spent reaching each phase from the one before, as the kernel controller saw it: " +
			"pod_created (from the controller's first sight of the Kernel), pod_scheduled, pod_running (image pulled, " +
			"agent started) and kernel_ready (the kernel answered kernel_info).",
		Buckets: startBuckets,
	}, []string{"kernel_spec", "phase"})
	kernelStartSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nbkube_kernel_start_duration_seconds",
		Help:    "Time from the kernel controller's first sight of a Kernel until it was ready.",
		Buckets: startBuckets,
	}, []string{"kernel_spec"})
	kernelFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nbkube_kernel_failures_total",
		Help: "Kernels that failed, by the reason of their Failed condition (Other for a reason nbkube does not know) " +
			"and whether they had started (stage start or running).",
	}, []string{"kernel_spec", "reason", "stage"})
	kernelsCulled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nbkube_kernels_culled_total",
		Help: "Kernels the culler shut down, by the reason of their Culled condition.",
	}, []string{"kernel_spec", "reason"})
	// terminalsRunning is Jupyter Server's gauge, under its name and help.
	terminalsRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terminal_currently_running_total",
		Help: "counter for how many terminals are running",
	})
	kernelReplayBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nbkube_kernel_replay_bytes",
		Help: "Bytes the agents of running kernels hold for client sessions that are away, to replay when they come " +
			"back, as the kernel controller last heard from each agent.",
	}, []string{"kernel_spec"})
)

// startBuckets span a kernel start from a local process (a fraction of a second) to an image
// pull that takes minutes.
var startBuckets = []float64{.1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120, 300}

func init() {
	ctrlmetrics.Registry.MustRegister(kernelStartPhaseSeconds, kernelStartSeconds, kernelFailures, kernelsCulled, kernelReplayBytes, terminalsRunning)
}

// failureReasons are the Failed reasons counted under their own name: nbkube's and those of
// the kubelet it knows. Any other reason the kubelet passes through counts as Other, so that
// the counter's labels stay bounded.
var failureReasons = func() map[nbv1.ConditionReason]bool {
	known := map[nbv1.ConditionReason]bool{}
	for _, r := range []nbv1.ConditionReason{
		nbv1.ReasonKernelSpecNotFound, nbv1.ReasonKernelSpecInvalid, nbv1.ReasonParametersInvalid, nbv1.ReasonPodConflict, nbv1.ReasonSecretConflict, nbv1.ReasonPodFailed,
		nbv1.ReasonKernelExited, nbv1.ReasonUnschedulable, nbv1.ReasonReconcileError,
		"ErrImagePull", "OOMKilled", "Evicted", "DeadlineExceeded", "ContainerCannotRun", "StartError",
	} {
		known[r] = true
	}
	for r := range fatalWaitingReasons {
		known[nbv1.ConditionReason(r)] = true
	}
	return known
}()

// countFailure counts a kernel that has just failed; before is its status until then.
func countFailure(k *nbv1.Kernel, before nbv1.KernelStatus, reason nbv1.ConditionReason) {
	if !failureReasons[reason] {
		reason = "Other"
	}
	stage := "running"
	if s := before.ExecutionState; s == "" || s == nbv1.ExecutionStateStarting {
		stage = "start"
	}
	kernelFailures.WithLabelValues(k.Spec.KernelSpec, string(reason), stage).Inc()
}

// replayShare is a running kernel's last reported replay bytes, kept so that the gauge of
// its spec, the sum over the spec's kernels, loses the kernel's share when the kernel ends.
// The gauge is per spec rather than per kernel: a label per kernel would grow without bound
// as kernels come and go, and an admin sizes memory by kernel spec.
type replayShare struct {
	spec  string
	bytes int64
}

// setReplay records what a kernel's agent reported. The gauge moves by the difference, which
// is exact: the bytes are integers far below 2^53.
func (m *kernelMemory) setReplay(key types.NamespacedName, spec string, bytes int64) {
	m.with(key, func(rec *kernelRecord) {
		// The spec is immutable, but a Kernel deleted and made again under its name between
		// two reconciles may run another.
		if rec.replay != nil && rec.replay.spec != spec {
			rec.dropReplay()
		}
		var old int64
		if rec.replay != nil {
			old = rec.replay.bytes
		}
		kernelReplayBytes.WithLabelValues(spec).Add(float64(bytes - old))
		rec.replay = &replayShare{spec: spec, bytes: bytes}
	})
}

// forgetReplay takes a kernel that no longer runs out of the sum.
func (m *kernelMemory) forgetReplay(key types.NamespacedName) {
	m.with(key, func(rec *kernelRecord) { rec.dropReplay() })
}

// dropReplay takes the kernel's share out of the sum.
func (r *kernelRecord) dropReplay() {
	if r.replay != nil {
		kernelReplayBytes.WithLabelValues(r.replay.spec).Sub(float64(r.replay.bytes))
		r.replay = nil
	}
}
