package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// cullPass steps the culler's clock by one interval and waits until the pass it starts is
// over: the culler sets its next timer only then.
func cullPass(t *testing.T) {
	t.Helper()
	waiting := func() error {
		if !clk.HasWaiters() {
			return errors.New("the culler is not waiting for its next pass")
		}
		return nil
	}
	eventually(t, "culler waiting", waiting)
	clk.Step(cullInterval)
	eventually(t, "cull pass over", waiting)
}

// cullUntil runs cull passes until cond holds: the culler reads kernels and specs from the
// manager's cache, which may not have the test's last write at the first pass.
func cullUntil(t *testing.T, what string, cond func() error) {
	t.Helper()
	eventually(t, what, func() error {
		if err := cond(); err == nil {
			return nil
		}
		cullPass(t)
		return cond()
	})
}

// watchDeletions records the last state of each object of ns that list (a KernelList, a
// TerminalList) holds as it is deleted, which is where a culled object's Culled condition can
// still be read.
func watchDeletions[T client.Object](t *testing.T, ns string, list client.ObjectList) func(name string) (T, bool) {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: kinds})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	gone := map[string]T{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if obj, ok := ev.Object.(T); ok && ev.Type == watch.Deleted {
				mu.Lock()
				gone[obj.GetName()] = obj
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func(name string) (T, bool) {
		mu.Lock()
		defer mu.Unlock()
		obj, ok := gone[name]
		return obj, ok
	}
}

func cullEvent(ns, kernel string) (*eventsv1.Event, error) {
	var evs eventsv1.EventList
	if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i, e := range evs.Items {
		if e.Regarding.Kind == "Kernel" && e.Regarding.Name == kernel && e.Reason == string(nbv1.EventCulled) {
			return &evs.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Culled event on kernel %s", kernel)
}

func TestCuller_CullsIdleAndDeadKernelsAsTheirSpecSays(t *testing.T) {
	ns := namespace(t)
	culled := kernelSpec(ns, "culled")
	culled.Spec.Culling = &nbv1.KernelCulling{IdleTimeout: &metav1.Duration{Duration: 30 * time.Minute}}
	// The suite's operator settings leave culling off: kernels of "kept" are never culled.
	create(t, culled, kernelSpec(ns, "kept"))
	deleted := watchDeletions[*nbv1.Kernel](t, ns, &nbv1.KernelList{})

	now := clk.Now()
	report := func(state string, idle time.Duration, conns int) *agentapi.Status {
		return &agentapi.Status{ExecutionState: state, LastActivity: now.Add(-idle), Connections: conns, Ready: true}
	}
	type kernelCase struct {
		name, spec, ip string
		report         *agentapi.Status
	}
	running := []kernelCase{
		{name: "idle", spec: "culled", ip: "10.30.0.1", report: report("idle", time.Hour, 0)},
		{name: "busy", spec: "culled", ip: "10.30.0.2", report: report("busy", time.Hour, 0)},
		{name: "connected", spec: "culled", ip: "10.30.0.3", report: report("idle", time.Hour, 1)},
		{name: "recent", spec: "culled", ip: "10.30.0.4", report: report("idle", 10*time.Minute, 0)},
		{name: "dead", spec: "culled", ip: "10.30.0.5", report: report("dead", 0, 0)},
		{name: "unreachable", spec: "culled", ip: "10.30.0.6", report: nil},
		{name: "culling-off", spec: "kept", ip: "10.30.0.7", report: report("idle", time.Hour, 0)},
	}
	// The idle kernel is a notebook's: its session goes with it.
	nb := session(ns, "idle", nbv1.SessionKernel{KernelSpec: "culled"})
	create(t, nb)
	for _, c := range running {
		agents.report(c.ip, c.report)
		k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name}}
		if c.name != nb.Name {
			k = kernel(ns, c.name, c.spec)
			create(t, k)
		}
		runningKernel(t, k, c.ip)
	}
	kernelUIDRecorded(t, nb, &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nb.Name}})
	failed := kernel(ns, "failed", "culled")
	create(t, failed)
	setPodStatus(t, kernelPod(t, failed), func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "kernel", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	})
	kernelCondition(t, failed, nbv1.ConditionFailed, metav1.ConditionTrue, "OOMKilled")

	for _, want := range []struct {
		name              string
		reason            nbv1.ConditionReason
		eventType, inNote string
	}{
		{name: "idle", reason: nbv1.ReasonIdleTimeout, eventType: corev1.EventTypeNormal,
			inNote: "longer than its idle timeout of 30m0s (last activity " + now.Add(-time.Hour).UTC().Format(time.RFC3339) + "; idle, 0 connections)"},
		{name: "dead", reason: nbv1.ReasonKernelDead, eventType: corev1.EventTypeWarning, inNote: "reports it dead"},
		{name: "failed", reason: nbv1.ReasonKernelDead, eventType: corev1.EventTypeWarning, inNote: "OOMKilled"},
	} {
		cullUntil(t, want.name+" culled", func() error {
			k, ok := deleted(want.name)
			if !ok {
				return fmt.Errorf("kernel %s not deleted", want.name)
			}
			c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionCulled)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(want.reason) || !strings.Contains(c.Message, want.inNote) {
				return fmt.Errorf("Culled condition %+v, want %s saying %q", c, want.reason, want.inNote)
			}
			return nil
		})
		ev, err := cullEvent(ns, want.name)
		if err != nil {
			t.Error(err)
		} else if ev.Type != want.eventType || !strings.Contains(ev.Note, want.inNote) {
			t.Errorf("event on %s: %s %q", want.name, ev.Type, ev.Note)
		}
	}
	eventually(t, "the idle kernel's session dropped", func() error { return goneOrGoing(nb) })
	for _, name := range []string{"busy", "connected", "recent", "unreachable", "culling-off"} {
		if err := get(&nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Errorf("kernel %s: %v", name, err)
		}
	}

	// The spec's settings change the next pass: busy and connected kernels go too.
	update(t, culled, func(s *nbv1.KernelSpec) {
		s.Spec.Culling.CullBusy, s.Spec.Culling.CullConnected = ptr.To(true), ptr.To(true)
	})
	for _, name := range []string{"busy", "connected"} {
		cullUntil(t, name+" culled", func() error {
			if _, ok := deleted(name); !ok {
				return fmt.Errorf("kernel %s not deleted", name)
			}
			return nil
		})
	}
	for _, name := range []string{"recent", "unreachable", "culling-off"} {
		if err := get(&nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); apierrors.IsNotFound(err) {
			t.Errorf("kernel %s was culled", name)
		}
	}
}

func TestKernelSpec_SchemaRefusesANegativeIdleTimeout(t *testing.T) {
	ns := namespace(t)
	spec := kernelSpec(ns, "negative")
	spec.Spec.Culling = &nbv1.KernelCulling{IdleTimeout: &metav1.Duration{Duration: -time.Minute}}
	if err := k8sClient.Create(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "idleTimeout must be a duration of 0s or more") {
		t.Errorf("negative idle timeout: %v", err)
	}
	spec.Spec.Culling.IdleTimeout.Duration = 0
	if err := k8sClient.Create(context.Background(), spec); err != nil {
		t.Errorf("0s (culling off for the spec) refused: %v", err)
	}
}

// The culler sets its Culled condition by a server-side apply of that condition alone: the
// conditions the Kernel controller wrote after the culler read the kernel stay.
func TestCuller_CulledConditionLeavesTheOtherConditions(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	runningKernel(t, k, "10.20.0.60")
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	read := k.DeepCopy() // the kernel as the culler read it
	live := k.DeepCopy()
	meta.SetStatusCondition(&live.Status.Conditions, metav1.Condition{Type: nbv1.ConditionRestarted, Status: metav1.ConditionTrue,
		Reason: string(nbv1.ReasonKernelDied), Message: "the kernel died meanwhile"})
	if err := k8sClient.Status().Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	c := &controllers.Culler{Client: k8sClient}
	if err := c.ApplyCulledForTest(context.Background(), read, nbv1.ReasonIdleTimeout, "idle for a while", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{nbv1.ConditionReady, nbv1.ConditionRestarted, nbv1.ConditionCulled} {
		if meta.FindStatusCondition(k.Status.Conditions, typ) == nil {
			t.Errorf("no %s condition after the cull: %+v", typ, k.Status.Conditions)
		}
	}
	if c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionCulled); c != nil && (c.Reason != string(nbv1.ReasonIdleTimeout) || c.Message != "idle for a while") {
		t.Errorf("Culled condition %+v", c)
	}
}
