package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

// hubDouble answers for the ipcontrollers of cluster pods by address; an address it has no
// answer for is unreachable. (ipcluster.QueryHub is tested against a real ipcontroller, and
// the whole cluster runs for real in the local end-to-end tests.)
type hubDouble struct {
	mu      sync.Mutex
	answers map[string]ipcluster.HubStatus
	keys    map[string]string
}

func (h *hubDouble) Query(_ context.Context, addr string, key []byte) (ipcluster.HubStatus, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	host, _, _ := net.SplitHostPort(addr)
	if h.keys == nil {
		h.keys = map[string]string{}
	}
	h.keys[host] = string(key)
	st, ok := h.answers[host]
	if !ok {
		return st, errors.New("connection refused")
	}
	return st, nil
}

// answer sets what the hub at ip says: engines registered under the given pod names, each
// with its outstanding tasks.
func (h *hubDouble) answer(ip string, engines map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.answers == nil {
		h.answers = map[string]ipcluster.HubStatus{}
	}
	st := ipcluster.HubStatus{Engines: []ipcluster.Engine{}}
	for name, tasks := range engines {
		st.Engines = append(st.Engines, ipcluster.Engine{ID: len(st.Engines), UUID: name, Queue: tasks, Completed: 1})
	}
	h.answers[ip] = st
}

func (h *hubDouble) keyAsked(ip string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[ip]
}

func clusterCondition(t *testing.T, c *nbv1.Cluster, typ string, status metav1.ConditionStatus, reason nbv1.ConditionReason) {
	t.Helper()
	eventually(t, fmt.Sprintf("cluster %s condition %s=%s/%s", c.Name, typ, status, reason), func() error {
		if err := get(c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, typ)
		if cond == nil || cond.Status != status || cond.Reason != string(reason) {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
}

// clusterPods waits until the cluster has exactly n live pods of a component and returns them.
func clusterPods(t *testing.T, c *nbv1.Cluster, component string, n int) []corev1.Pod {
	t.Helper()
	var live []corev1.Pod
	eventually(t, fmt.Sprintf("%d %s pods", n, component), func() error {
		var list corev1.PodList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(c.Namespace),
			client.MatchingLabels{nbv1.LabelCluster: c.Name, nbv1.LabelComponent: component}); err != nil {
			return err
		}
		live = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		if len(live) != n {
			return fmt.Errorf("%d pods", len(live))
		}
		return nil
	})
	return live
}

// runPod plays the kubelet: the pod runs at ip.
func runPod(t *testing.T, p *corev1.Pod, ip string) {
	t.Helper()
	eventually(t, "run pod "+p.Name, func() error {
		if err := get(p); err != nil {
			return err
		}
		p.Status.Phase, p.Status.PodIP = corev1.PodRunning, ip
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return k8sClient.Status().Update(context.Background(), p)
	})
}

func names(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	slices.Sort(out)
	return out
}

// startCluster creates a running cluster of n engines and plays its pods and hub until
// every engine is registered. It returns the controller pod and the engines.
func startCluster(t *testing.T, ns, name string, n int32, ip string, mutate ...func(*nbv1.Cluster)) (*nbv1.Cluster, *corev1.Pod, []corev1.Pod) {
	t.Helper()
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: n}}
	for _, m := range mutate {
		m(c)
	}
	create(t, c)
	controller := &clusterPods(t, c, builder.ComponentClusterController, 1)[0]
	runPod(t, controller, ip)
	hub.answer(ip, nil)
	engines := clusterPods(t, c, builder.ComponentClusterEngine, int(n))
	registered := map[string]int{}
	for _, p := range engines {
		registered[p.Name] = 0
	}
	hub.answer(ip, registered)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonClusterRunning)
	return c, controller, engines
}

func TestCluster_StartScaleStop(t *testing.T) {
	ns := namespace(t)
	c := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec:       nbv1.ClusterParameters{Owner: "alice", Engines: 3},
	}
	create(t, c)
	if err := get(c); err != nil || c.Spec.State != nbv1.ClusterRunning {
		t.Fatalf("default state %q (%v), want Running", c.Spec.State, err)
	}

	controller := &clusterPods(t, c, builder.ComponentClusterController, 1)[0]
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ipcontroller"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ipcluster"}}
	eventually(t, "service and secret", func() error {
		if err := get(svc); err != nil {
			return err
		}
		return get(secret)
	})
	if len(svc.Spec.Ports) != len(ipcluster.ServicePorts()) || svc.Spec.ClusterIP == "" {
		t.Errorf("service %+v", svc.Spec)
	}
	key := string(secret.Data[builder.ClusterSecretKey])
	if len(key) != 64 {
		t.Errorf("cluster key %q", key)
	}
	// Engines and kernels reach the ipcontroller through its Service, with the cluster's key.
	var clientFile struct{ Interface, Key string }
	if err := json.Unmarshal(secret.Data[builder.ClusterClientFile], &clientFile); err != nil ||
		clientFile.Interface != "tcp://c1-ipcontroller."+ns+".svc" || clientFile.Key != key {
		t.Errorf("client file %s (%v)", secret.Data[builder.ClusterClientFile], err)
	}
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonControllerStarting)
	// No engine starts before the ipcontroller answers.
	clusterPods(t, c, builder.ComponentClusterEngine, 0)

	runPod(t, controller, "10.1.0.1")
	clusterCondition(t, c, nbv1.ConditionControllerReady, metav1.ConditionFalse, nbv1.ReasonHubUnreachable)
	hub.answer("10.1.0.1", nil)
	clusterCondition(t, c, nbv1.ConditionControllerReady, metav1.ConditionTrue, nbv1.ReasonControllerReady)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonEnginesStarting)
	if got := hub.keyAsked("10.1.0.1"); got != key {
		t.Errorf("hub asked with key %q, want the cluster's", got)
	}
	engines := clusterPods(t, c, builder.ComponentClusterEngine, 3)
	for _, p := range engines {
		if p.Annotations[builder.AnnotationControllerPod] != string(controller.UID) {
			t.Errorf("engine %s made for controller %q", p.Name, p.Annotations[builder.AnnotationControllerPod])
		}
	}
	hub.answer("10.1.0.1", map[string]int{engines[0].Name: 0, engines[1].Name: 0})
	eventually(t, "2 ready engines", func() error {
		if err := get(c); err != nil || c.Status.ReadyEngines != 2 {
			return fmt.Errorf("ready engines %d (%w)", c.Status.ReadyEngines, err)
		}
		return nil
	})
	// The middle engine is busy: scaling to 1 keeps it and retires the other two.
	busy := engines[1].Name
	hub.answer("10.1.0.1", map[string]int{engines[0].Name: 0, busy: 1, engines[2].Name: 0})
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonClusterRunning)
	eventually(t, "busy engine counted", func() error {
		if err := get(c); err != nil || c.Status.BusyEngines != 1 || c.Status.ReadyEngines != 3 {
			return fmt.Errorf("busy %d ready %d (%w)", c.Status.BusyEngines, c.Status.ReadyEngines, err)
		}
		return nil
	})

	update(t, c, func(c *nbv1.Cluster) { c.Spec.Engines = 1 })
	if left := names(clusterPods(t, c, builder.ComponentClusterEngine, 1)); left[0] != busy {
		t.Errorf("engine left %v, want the busy %s", left, busy)
	}
	eventually(t, "scale event", func() error { return findEvent(ns, "c1", "Cluster", nbv1.EventScaledEngines) })
	// The service keeps its cluster IP through updates of the cluster.
	ip := svc.Spec.ClusterIP
	if err := get(svc); err != nil || svc.Spec.ClusterIP != ip {
		t.Errorf("service changed: %v %v", svc.Spec.ClusterIP, err)
	}

	update(t, c, func(c *nbv1.Cluster) { c.Spec.State = nbv1.ClusterStopped })
	clusterPods(t, c, builder.ComponentClusterController, 0)
	clusterPods(t, c, builder.ComponentClusterEngine, 0)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonClusterStopped)
	eventually(t, "stop event", func() error { return findEvent(ns, "c1", "Cluster", nbv1.EventClusterStopped) })

	// Started again, it gets a new ipcontroller and new engines, with the same key.
	update(t, c, func(c *nbv1.Cluster) { c.Spec.State = nbv1.ClusterRunning; c.Spec.Engines = 2 })
	again := &clusterPods(t, c, builder.ComponentClusterController, 1)[0]
	runPod(t, again, "10.1.0.2")
	hub.answer("10.1.0.2", nil)
	clusterPods(t, c, builder.ComponentClusterEngine, 2)
	if got := hub.keyAsked("10.1.0.2"); got != key {
		t.Errorf("restarted cluster asked with key %q, want the same key", got)
	}
}

func TestCluster_FailedControllerIsReplacedWithItsEngines(t *testing.T) {
	ns := namespace(t)
	c, controller, engines := startCluster(t, ns, "c1", 2, "10.2.0.1")

	eventually(t, "fail the ipcontroller pod", func() error {
		if err := get(controller); err != nil {
			return err
		}
		controller.Status.Phase = corev1.PodFailed
		controller.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: builder.ComponentClusterController, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(clk.Now().Add(-time.Minute))}}}}
		return k8sClient.Status().Update(context.Background(), controller)
	})
	var replacement *corev1.Pod
	eventually(t, "a new ipcontroller pod", func() error {
		replacement = &clusterPods(t, c, builder.ComponentClusterController, 1)[0]
		if replacement.UID == controller.UID {
			return errors.New("the failed ipcontroller pod is still the only one")
		}
		return nil
	})
	// Its engines registered with a hub that is gone: they are replaced too.
	eventually(t, "old engines deleted", func() error {
		for _, p := range engines {
			if err := get(&p); err == nil && p.DeletionTimestamp == nil {
				return fmt.Errorf("engine %s still there", p.Name)
			}
		}
		return nil
	})
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonControllerStarting)
	eventually(t, "replacement event", func() error { return findEvent(ns, "c1", "Cluster", nbv1.EventControllerReplaced) })

	runPod(t, replacement, "10.2.0.2")
	hub.answer("10.2.0.2", nil)
	fresh := clusterPods(t, c, builder.ComponentClusterEngine, 2)
	registered := map[string]int{}
	for _, p := range fresh {
		if p.Annotations[builder.AnnotationControllerPod] != string(replacement.UID) {
			t.Errorf("engine %s made for controller %q", p.Name, p.Annotations[builder.AnnotationControllerPod])
		}
		registered[p.Name] = 0
	}
	hub.answer("10.2.0.2", registered)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonClusterRunning)
}

func TestCluster_RefusedPodsAreReported(t *testing.T) {
	ns := namespace(t)
	exhaustQuota(t, ns, corev1.ResourcePods)
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: 2}}
	create(t, c)
	clusterCondition(t, c, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonFailedCreate)
}

// A step that fails (here: the cluster's Service name is taken by a Service nbkube did not
// make) is told in the status, and the cluster goes on once the cause is gone. A Service of
// nbkube's that another owner controls (a deleted cluster's of the same name, not yet
// collected) is not taken either: users name their clusters.
func TestCluster_AFailedStepIsReportedInItsStatus(t *testing.T) {
	ns := namespace(t)
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ipcontroller"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	create(t, foreign)
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: 1}}
	create(t, c)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonReconcileError)
	if r := meta.FindStatusCondition(c.Status.Conditions, nbv1.ConditionReady); !strings.Contains(r.Message, "c1-ipcontroller") || !strings.Contains(r.Message, "already exists") {
		t.Errorf("Ready message %q does not say which step failed and why", r.Message)
	}
	if c.Status.ObservedGeneration != c.Generation {
		t.Errorf("observedGeneration %d, generation %d", c.Status.ObservedGeneration, c.Generation)
	}
	// Now labelled as nbkube's, so that the manager's cache shows it: still not taken.
	foreign.Labels = map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue}
	if err := k8sClient.Update(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the taken name reported", func() error {
		if err := get(c); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(c.Status.Conditions, nbv1.ConditionReady); r == nil || !strings.Contains(r.Message, "service c1-ipcontroller exists and is not this Cluster's") {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	if err := get(foreign); err != nil || len(foreign.OwnerReferences) != 0 || len(foreign.Spec.Ports) != 1 || foreign.Spec.Ports[0].Port != 80 {
		t.Errorf("the foreign Service was changed: %v %+v %+v", err, foreign.OwnerReferences, foreign.Spec.Ports)
	}

	if err := k8sClient.Delete(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonControllerStarting)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ipcontroller"}}
	if err := get(svc); err != nil || !metav1.IsControlledBy(svc, c) {
		t.Errorf("the cluster's own Service: %v, owners %v", err, svc.OwnerReferences)
	}
}

func TestCluster_StopsAfterIdleTimeout(t *testing.T) {
	ns := namespace(t)
	c, _, _ := startCluster(t, ns, "c1", 1, "10.3.0.1", func(c *nbv1.Cluster) {
		c.Spec.IdleTimeout = &metav1.Duration{Duration: 30 * time.Minute}
	})
	if c.Status.LastActivity == nil {
		t.Fatal("no lastActivity once running")
	}
	clk.Step(31 * time.Minute)
	eventually(t, "idle cluster stopped", func() error {
		if err := get(c); err != nil || c.Spec.State != nbv1.ClusterStopped {
			return fmt.Errorf("state %q (%w)", c.Spec.State, err)
		}
		return nil
	})
	eventually(t, "idle event", func() error { return findEvent(ns, "c1", "Cluster", nbv1.EventIdleStopped) })
	clusterPods(t, c, builder.ComponentClusterController, 0)
}

// Each cluster's ipcontroller gets its NetworkPolicy (letting in only its engines and its
// owner's kernels) before the ipcontroller runs, owned by the Cluster, and gets it back when
// someone deletes it.
func TestCluster_IPControllerHasItsNetworkPolicy(t *testing.T) {
	ns := namespace(t)
	c := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec:       nbv1.ClusterParameters{Owner: "ann@example.com", Engines: 1},
	}
	create(t, c)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: builder.ClusterNetworkPolicyName(c)}}
	eventually(t, "the network policy", func() error { return get(np) })
	controller := &clusterPods(t, c, builder.ComponentClusterController, 1)[0]
	// Made in the reconcile that makes the pod, before it (timestamps have whole seconds).
	if np.CreationTimestamp.After(controller.CreationTimestamp.Time) {
		t.Errorf("the policy (%v) came after the ipcontroller (%v)", np.CreationTimestamp, controller.CreationTimestamp)
	}
	if err := get(c); err != nil {
		t.Fatal(err)
	}
	if refs := np.OwnerReferences; len(refs) != 1 || refs[0].UID != c.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("owner references %v", refs)
	}
	want := builder.ClusterNetworkPolicy(c).Spec
	if got := np.Spec; got.Ingress[0].From[1].PodSelector.MatchLabels[nbv1.LabelOwner] != nbv1.OwnerLabelValue("ann@example.com") ||
		got.PodSelector.MatchLabels[nbv1.LabelCluster] != "c1" || len(got.Ingress) != len(want.Ingress) {
		t.Errorf("policy spec %+v, want %+v", got, want)
	}
	if err := k8sClient.Delete(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the network policy back", func() error {
		fresh := &networkingv1.NetworkPolicy{ObjectMeta: np.ObjectMeta}
		if err := get(fresh); err != nil {
			return err
		}
		if fresh.UID == np.UID {
			return errors.New("still the deleted one")
		}
		return nil
	})
}
