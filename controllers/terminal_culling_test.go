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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/builder"
)

// eventLog records the events regarding objects of a namespace (the culler culls every
// namespace's terminals: those the suite's other tests left too).
type eventLog struct {
	namespace string
	mu        sync.Mutex
	events    []string
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	if o, ok := regarding.(metav1.Object); !ok || o.GetNamespace() != l.namespace {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, eventType+" "+reason+" "+fmt.Sprintf(note, args...))
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// Culling as Jupyter's terminal manager culls: a terminal whose last activity is older than
// the timeout is deleted, connected or not, and whatever its state; the agent of a running
// one is asked, and one whose agent does not answer is kept.
func TestTerminalCuller_DeletesInactiveTerminalsOnly(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"))
	start := time.Now()
	for _, tc := range []struct {
		name   string
		ip     string
		report *agentapi.TerminalStatus
		ended  bool
	}{
		{name: "idle", ip: "10.44.0.1", report: &agentapi.TerminalStatus{LastActivity: start.Add(-time.Minute), Connections: 1}},
		{name: "busy", ip: "10.44.0.2", report: &agentapi.TerminalStatus{LastActivity: start.Add(80 * time.Minute)}},
		{name: "unknown", ip: "10.44.0.3"},
		{name: "pending"},
		{name: "ended", ip: "10.44.0.4", ended: true},
	} {
		term := terminal(ns, tc.name, "python3")
		create(t, term)
		pod := terminalPod(t, term)
		if tc.ip == "" {
			terminalIs(t, term, nbv1.TerminalPending, nbv1.ReasonPodPending)
			continue
		}
		agents.reportTerminal(tc.ip, tc.report)
		runTerminalPod(t, pod, tc.ip)
		terminalIs(t, term, nbv1.TerminalRunning, nbv1.ReasonAgentReady)
		if tc.ended {
			setPodStatus(t, pod, func(s *corev1.PodStatus) {
				s.Phase = corev1.PodSucceeded
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.TerminalContainer, State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
			})
			terminalIs(t, term, nbv1.TerminalEnded, nbv1.ReasonShellExited)
		}
	}
	// The busy terminal's agent reports activity the controller keeps to the second; the
	// culler asks it again.
	gone := watchDeletions[*nbv1.Terminal](t, ns, &nbv1.TerminalList{})
	clock := clocktesting.NewFakeClock(start.Add(90 * time.Minute))
	recorder := &eventLog{namespace: ns}
	culler := &controllers.TerminalCuller{Client: k8sClient, Recorder: recorder, Clock: clock, Agents: agents,
		Options: controllers.TerminalCullingOptions{InactiveTimeout: time.Hour, Interval: time.Minute}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- culler.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waiting := func() error {
		if !clock.HasWaiters() {
			return errors.New("the culler is not waiting for its next pass")
		}
		return nil
	}
	eventually(t, "culler waiting", waiting)
	clock.Step(time.Minute)
	eventually(t, "cull pass over", waiting)

	for _, name := range []string{"idle", "pending", "ended"} {
		term, ok := gone(name)
		if !ok {
			eventually(t, name+" deleted", func() error {
				if term, ok = gone(name); !ok {
					return fmt.Errorf("%s not deleted", name)
				}
				return nil
			})
		}
		c := meta.FindStatusCondition(term.Status.Conditions, nbv1.ConditionCulled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(nbv1.ReasonIdleTimeout) || !strings.Contains(c.Message, "longer than the inactive timeout of 1h0m0s") {
			t.Errorf("%s culled with conditions %+v", name, term.Status.Conditions)
		}
		// Its pod and secret go with it: the garbage collector follows their references.
		for _, o := range []client.Object{&corev1.Pod{}, &corev1.Secret{}} {
			if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
				t.Fatal(err)
			}
			if ref := metav1.GetControllerOf(o); ref == nil || ref.UID != term.UID {
				t.Errorf("%s's %T is not the culled terminal's: %+v", name, o, ref)
			}
		}
	}
	for _, name := range []string{"busy", "unknown"} {
		if err := get(&nbv1.Terminal{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Errorf("%s: %v, want it kept", name, err)
		}
	}
	culled := 0
	for _, e := range recorder.all() {
		if strings.HasPrefix(e, "Normal Culled Culled terminal: the terminal was inactive") {
			culled++
		}
	}
	if culled != 3 {
		t.Errorf("%d Culled events, want 3: %q", culled, recorder.all())
	}
	if err := get(&nbv1.Terminal{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"}}); !apierrors.IsNotFound(err) {
		t.Errorf("idle terminal: %v", err)
	}
}
