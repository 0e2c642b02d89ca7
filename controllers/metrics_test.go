package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// metric is the sample of the named family in controller-runtime's registry, which the
// manager's metrics endpoint serves, whose labels include labels ("name=value"); nil when
// there is none.
func metric(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				if have[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

func counterValue(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return metric(t, name, labels...).GetCounter().GetValue()
}

// TestKernel_StartIsTimedByPhase plays a kernel's start step by step with the controllers'
// clock: each phase's duration is the time from the phase before it.
func TestKernel_StartIsTimedByPhase(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "timed", "timed")
	create(t, kernelSpec(ns, "timed"), k)
	// Created (and its pod with it) at the clock's time now.
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	pod := kernelPod(t, k)

	clk.Step(2 * time.Second)
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := k8sClient.SubResource("binding").Create(context.Background(), pod, b); err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	})
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, "ContainerCreating")

	clk.Step(3 * time.Second)
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{}}}}
	})
	kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodNotReady)

	clk.Step(4 * time.Second)
	runningKernel(t, k, "10.40.0.1")

	for _, want := range []struct {
		phase   string
		seconds float64
	}{{"pod_created", 0}, {"pod_scheduled", 2}, {"pod_running", 3}, {"kernel_ready", 4}} {
		m := metric(t, "nbkube_kernel_start_phase_duration_seconds", "kernel_spec=timed", "phase="+want.phase)
		if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != want.seconds {
			t.Errorf("phase %s: %d samples of %vs in all, want one of %vs", want.phase, h.GetSampleCount(), h.GetSampleSum(), want.seconds)
		}
	}
	m := metric(t, "nbkube_kernel_start_duration_seconds", "kernel_spec=timed")
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 9 {
		t.Errorf("start: %d samples of %vs in all, want one of 9s", h.GetSampleCount(), h.GetSampleSum())
	}
}

func TestKernel_FailuresAreCountedByReasonAndStage(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "counted"))
	fail := func(name string, running bool, status func(*corev1.PodStatus), reason nbv1.ConditionReason) {
		t.Helper()
		k := kernel(ns, name, "counted")
		create(t, k)
		if running {
			runningKernel(t, k, "10.41.0."+fmt.Sprint(len(name)))
		}
		setPodStatus(t, kernelPod(t, k), status)
		kernelCondition(t, k, nbv1.ConditionFailed, metav1.ConditionTrue, reason)
	}
	fail("pull", false, func(s *corev1.PodStatus) {
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	}, "ImagePullBackOff")
	fail("oom", true, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	}, "OOMKilled")
	// A reason the kubelet may invent one day is counted, under a label that stays bounded.
	fail("new", false, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "SomethingNew"}}}}
	}, "SomethingNew")

	for _, want := range [][]string{
		{"kernel_spec=counted", "reason=ImagePullBackOff", "stage=start"},
		{"kernel_spec=counted", "reason=OOMKilled", "stage=running"},
		{"kernel_spec=counted", "reason=Other", "stage=start"},
	} {
		eventually(t, fmt.Sprint(want), func() error {
			if got := counterValue(t, "nbkube_kernel_failures_total", want...); got != 1 {
				return fmt.Errorf("%v failures", got)
			}
			return nil
		})
	}
	if m := metric(t, "nbkube_kernel_start_duration_seconds", "kernel_spec=counted"); m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("starts timed: %d, want the one kernel that got ready", m.GetHistogram().GetSampleCount())
	}
}

func TestCuller_CountsCulledKernelsByReason(t *testing.T) {
	ns := namespace(t)
	spec := kernelSpec(ns, "metered")
	spec.Spec.Culling = &nbv1.KernelCulling{IdleTimeout: &metav1.Duration{Duration: 30 * time.Minute}}
	create(t, spec)
	deleted := watchDeletions[*nbv1.Kernel](t, ns, &nbv1.KernelList{})
	for i, state := range []string{"idle", "dead"} {
		ip := fmt.Sprintf("10.42.0.%d", i+1)
		agents.report(ip, &agentapi.Status{ExecutionState: state, LastActivity: clk.Now().Add(-time.Hour), Ready: true})
		k := kernel(ns, state, "metered")
		create(t, k)
		runningKernel(t, k, ip)
	}
	cullUntil(t, "both culled", func() error {
		for _, name := range []string{"idle", "dead"} {
			if _, ok := deleted(name); !ok {
				return fmt.Errorf("kernel %s not deleted", name)
			}
		}
		return nil
	})
	for _, reason := range []nbv1.ConditionReason{nbv1.ReasonIdleTimeout, nbv1.ReasonKernelDead} {
		if got := counterValue(t, "nbkube_kernels_culled_total", "kernel_spec=metered", "reason="+string(reason)); got != 1 {
			t.Errorf("culled for %s: %v, want 1", reason, got)
		}
	}
}

// TestKernel_ReplayBytesAreSummedBySpec: the gauge is the sum, over a kernel spec's running
// kernels, of what their agents last reported holding for replay; a kernel that is deleted
// or ends takes its bytes out of the sum.
func TestKernel_ReplayBytesAreSummedBySpec(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "replaying"))
	holds := func(ip string, n int64) {
		agents.report(ip, &agentapi.Status{ExecutionState: "idle", LastActivity: clk.Now(), Ready: true, ReplayBytes: n})
	}
	wantHeld := func(want float64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%v replay bytes", want), func() error {
			if got := metric(t, "nbkube_kernel_replay_bytes", "kernel_spec=replaying").GetGauge().GetValue(); got != want {
				return fmt.Errorf("%v replay bytes", got)
			}
			return nil
		})
	}
	a, b := kernel(ns, "a", "replaying"), kernel(ns, "b", "replaying")
	holds("10.43.0.1", 1000)
	holds("10.43.0.2", 500)
	create(t, a, b)
	runningKernel(t, a, "10.43.0.1")
	runningKernel(t, b, "10.43.0.2")
	wantHeld(1500)

	holds("10.43.0.1", 3000)
	wantHeld(3500)

	if err := k8sClient.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	wantHeld(3000)

	setPodStatus(t, kernelPod(t, a), func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.Conditions = nil
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	})
	wantHeld(0)
}
