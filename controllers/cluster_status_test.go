package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

// conditionIs checks one condition of conds: absent when reason is "".
func conditionIs(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason nbv1.ConditionReason, inMsg string) {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if reason == "" {
		if c != nil {
			t.Errorf("%s = %+v, want none", typ, c)
		}
		return
	}
	if c == nil || c.Status != status || c.Reason != string(reason) || !strings.Contains(c.Message, inMsg) {
		t.Errorf("%s = %+v, want %s/%s saying %q", typ, c, status, reason, inMsg)
	}
}

func TestClusterStatus_FromPodsAndHub(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pod := func(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	controller := pod("c1-ipcontroller-a")
	e1, e2 := pod("c1-ipengine-a"), pod("c1-ipengine-b")
	hub := func(engines ...ipcluster.Engine) *ipcluster.HubStatus { return &ipcluster.HubStatus{Engines: engines} }
	unschedulable := pod("c1-ipengine-c")
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes have enough cpu"}}
	oom := pod("c1-ipcontroller-b")
	oom.Status.Phase = corev1.PodFailed
	oom.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ipcontroller", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}

	type cond struct {
		status metav1.ConditionStatus
		reason nbv1.ConditionReason
		inMsg  string
	}
	tests := []struct {
		name                string
		stopped             bool
		obs                 clusterObservation
		wantControllerReady cond
		wantReady           cond
		wantFailed          cond // reason "" when absent
		wantReadyEngines    int32
		wantBusy            int32
	}{
		{name: "stopped", stopped: true, obs: clusterObservation{refused: errors.New("quota")},
			wantControllerReady: cond{status: metav1.ConditionFalse, reason: nbv1.ReasonClusterStopped, inMsg: "stopped"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonClusterStopped, inMsg: "stopped"}},
		{name: "controller pod starting", obs: clusterObservation{controller: controller},
			wantControllerReady: cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"}},
		{name: "hub unreachable", obs: clusterObservation{controller: controller, hubErr: errors.New("connection refused")},
			wantControllerReady: cond{status: metav1.ConditionFalse, reason: nbv1.ReasonHubUnreachable, inMsg: "connection refused"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"}},
		{name: "engines registering", obs: clusterObservation{controller: controller, engines: []*corev1.Pod{e1, e2}, hub: hub(ipcluster.Engine{UUID: e1.Name})},
			wantControllerReady: cond{status: metav1.ConditionTrue, reason: nbv1.ReasonControllerReady, inMsg: "answers"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonEnginesStarting, inMsg: "1 of 2 engines registered"},
			wantReadyEngines:    1},
		{name: "running, one engine busy", obs: clusterObservation{controller: controller, engines: []*corev1.Pod{e1, e2},
			hub: hub(ipcluster.Engine{UUID: e1.Name, Tasks: 1}, ipcluster.Engine{UUID: e2.Name})},
			wantControllerReady: cond{status: metav1.ConditionTrue, reason: nbv1.ReasonControllerReady, inMsg: "answers"},
			wantReady:           cond{status: metav1.ConditionTrue, reason: nbv1.ReasonClusterRunning, inMsg: "2 engines ready"},
			wantReadyEngines:    2, wantBusy: 1},
		{name: "pod refused", obs: clusterObservation{refused: errors.New(`pods "x" is forbidden: exceeded quota`)},
			wantControllerReady: cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"},
			wantFailed:          cond{status: metav1.ConditionTrue, reason: nbv1.ReasonFailedCreate, inMsg: "exceeded quota"}},
		{name: "controller failed, awaiting its replacement", obs: clusterObservation{failed: oom},
			wantControllerReady: cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonControllerStarting, inMsg: "starting"},
			wantFailed:          cond{status: metav1.ConditionTrue, reason: nbv1.ReasonControllerPodFailed, inMsg: "OOMKilled: container ipcontroller exited with code 137"}},
		{name: "engine cannot be scheduled", obs: clusterObservation{controller: controller, engines: []*corev1.Pod{unschedulable}, hub: hub()},
			wantControllerReady: cond{status: metav1.ConditionTrue, reason: nbv1.ReasonControllerReady, inMsg: "answers"},
			wantReady:           cond{status: metav1.ConditionFalse, reason: nbv1.ReasonEnginesStarting, inMsg: "0 of 2"},
			wantFailed:          cond{status: metav1.ConditionTrue, reason: nbv1.ReasonUnschedulable, inMsg: "enough cpu"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Generation: 4}, Spec: nbv1.ClusterParameters{Engines: 2, State: nbv1.ClusterRunning}}
			if tc.stopped {
				c.Spec.State = nbv1.ClusterStopped
			}
			st := clusterStatus(c, tc.obs, now)
			conditionIs(t, st.Conditions, nbv1.ConditionControllerReady, tc.wantControllerReady.status, tc.wantControllerReady.reason, tc.wantControllerReady.inMsg)
			conditionIs(t, st.Conditions, nbv1.ConditionReady, tc.wantReady.status, tc.wantReady.reason, tc.wantReady.inMsg)
			conditionIs(t, st.Conditions, nbv1.ConditionFailed, tc.wantFailed.status, tc.wantFailed.reason, tc.wantFailed.inMsg)
			if st.ReadyEngines != tc.wantReadyEngines || st.BusyEngines != tc.wantBusy || st.ObservedGeneration != 4 {
				t.Errorf("ready %d busy %d generation %d, want %d %d 4", st.ReadyEngines, st.BusyEngines, st.ObservedGeneration, tc.wantReadyEngines, tc.wantBusy)
			}
		})
	}
}

func TestClusterStatus_LastActivityMovesWithTasks(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	t2 := metav1.NewTime(t1.Add(time.Minute))
	engine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c1-ipengine-a"}}
	obs := func(e ipcluster.Engine) clusterObservation {
		e.UUID = engine.Name
		return clusterObservation{controller: &corev1.Pod{}, engines: []*corev1.Pod{engine}, hub: &ipcluster.HubStatus{Engines: []ipcluster.Engine{e}}}
	}
	c := &nbv1.Cluster{Spec: nbv1.ClusterParameters{Engines: 1}}
	c.Status = clusterStatus(c, obs(ipcluster.Engine{}), t0)
	if c.Status.LastActivity == nil || !c.Status.LastActivity.Equal(&t0) {
		t.Fatalf("lastActivity %v once the controller answers, want %v", c.Status.LastActivity, t0)
	}
	c.Status = clusterStatus(c, obs(ipcluster.Engine{}), t1)
	if !c.Status.LastActivity.Equal(&t0) {
		t.Errorf("an idle cluster's lastActivity moved to %v", c.Status.LastActivity)
	}
	c.Status = clusterStatus(c, obs(ipcluster.Engine{Completed: 3}), t2)
	if !c.Status.LastActivity.Equal(&t2) || c.Status.CompletedTasks != 3 {
		t.Errorf("lastActivity %v completed %d after three tasks completed, want %v 3", c.Status.LastActivity, c.Status.CompletedTasks, t2)
	}
}

// A dask scheduler counts no completed tasks: its cluster is active while a task runs and
// whenever the number of tasks it holds changes, so that idleTimeout stops it only once
// nothing has happened for that long.
func TestClusterStatus_ADaskClustersActivityIsItsTasks(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	at := func(m int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(m) * time.Minute)) }
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d1-dask-worker-a"}, Status: corev1.PodStatus{PodIP: "10.0.0.3"}}
	scheduler := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.2"}}
	obs := func(tasks, processing, executing int) clusterObservation {
		st := daskcluster.Status{Tasks: tasks, Processing: processing,
			Workers: []daskcluster.Worker{{Name: worker.Name, Address: "tls://10.0.0.3:8788", Executing: executing}}}
		return clusterObservation{controller: scheduler, engines: []*corev1.Pod{worker}, dask: &st,
			hub: &ipcluster.HubStatus{Engines: []ipcluster.Engine{{UUID: worker.Name, Tasks: executing}}}}
	}
	c := &nbv1.Cluster{Spec: nbv1.ClusterParameters{Framework: nbv1.FrameworkDask, Engines: 1}}
	for i, step := range []struct {
		obs          clusterObservation
		wantActivity int
	}{
		{obs(0, 0, 0), 0}, // the scheduler answers: a start is activity
		{obs(0, 0, 0), 0}, // nothing
		{obs(5, 2, 1), 2}, // tasks running
		{obs(5, 0, 0), 2}, // their results held, nothing else
		{obs(0, 0, 0), 4}, // the results released
		{obs(0, 0, 0), 4},
	} {
		c.Status = clusterStatus(c, step.obs, at(i))
		if want := at(step.wantActivity); !c.Status.LastActivity.Equal(&want) {
			t.Errorf("step %d: lastActivity %v, want %v", i, c.Status.LastActivity, want)
		}
	}
	if c.Status.Tasks != 0 || c.Status.ReadyEngines != 1 || c.Status.DashboardAddress != "10.0.0.2:8787" {
		t.Errorf("status %+v", c.Status)
	}
	conditionIs(t, c.Status.Conditions, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonClusterRunning, "dask-scheduler and 1 workers ready")
}

// A failed step is told in Ready, and nothing else changes: the steps after it did not run,
// so the hub's answer and the engines are unknown rather than gone.
func TestClusterStatus_AFailedStepSaysSoAndKeepsTheRest(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	engine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c1-ipengine-a"}}
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: nbv1.ClusterParameters{Engines: 1}}
	c.Status = clusterStatus(c, clusterObservation{controller: &corev1.Pod{}, engines: []*corev1.Pod{engine},
		hub: &ipcluster.HubStatus{Engines: []ipcluster.Engine{{UUID: engine.Name}}}}, t0)
	before := c.Status.DeepCopy()

	c.Generation = 3
	st := clusterStatus(c, clusterObservation{stepErr: errors.New(`create service c1-ipcontroller: services "c1-ipcontroller" already exists`)}, t1)
	conditionIs(t, st.Conditions, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonReconcileError, "already exists")
	if r := meta.FindStatusCondition(st.Conditions, nbv1.ConditionReady); r.ObservedGeneration != 3 || !r.LastTransitionTime.Equal(&t1) {
		t.Errorf("Ready %+v, want generation 3 since %v", r, t1)
	}
	conditionIs(t, st.Conditions, nbv1.ConditionControllerReady, metav1.ConditionTrue, nbv1.ReasonControllerReady, "answers")
	if st.ReadyEngines != before.ReadyEngines || !st.LastActivity.Equal(before.LastActivity) || st.ObservedGeneration != 3 {
		t.Errorf("status %+v, want the engines and activity of %+v at generation 3", st, before)
	}
}
