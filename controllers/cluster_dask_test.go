package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/daskcluster"
)

// daskDouble answers for the schedulers of dask clusters by host; a host it has no answer for
// is unreachable. (daskcluster.Client is tested against a real scheduler, and whole dask
// clusters run for real in the local end-to-end tests.)
type daskDouble struct {
	mu      sync.Mutex
	answers map[string]daskcluster.Status
	paths   map[string]string
	// retired are the addresses each Retire was asked, with the worker pods that still
	// existed at the time.
	retired [][]string
	alive   [][]string
}

func (d *daskDouble) host(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paths == nil {
		d.paths = map[string]string{}
	}
	d.paths[u.Hostname()] = u.Path
	return u.Hostname(), nil
}

func (d *daskDouble) Query(_ context.Context, base string) (daskcluster.Status, error) {
	h, err := d.host(base)
	if err != nil {
		return daskcluster.Status{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.answers[h]
	if !ok {
		return st, errors.New("connection refused")
	}
	return st, nil
}

func (d *daskDouble) Retire(ctx context.Context, base string, addresses []string) error {
	h, err := d.host(base)
	if err != nil {
		return err
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods); err != nil {
		return err
	}
	var alive []string
	for _, p := range pods.Items {
		if p.Labels[nbv1.LabelComponent] == builder.ComponentDaskWorker && p.DeletionTimestamp == nil {
			alive = append(alive, p.Name)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retired = append(d.retired, addresses)
	d.alive = append(d.alive, alive)
	// The scheduler forgets them.
	st := d.answers[h]
	st.Workers = slices.DeleteFunc(slices.Clone(st.Workers), func(w daskcluster.Worker) bool { return slices.Contains(addresses, w.Address) })
	d.answers[h] = st
	return nil
}

func (d *daskDouble) AdaptiveTarget(context.Context, string) (int, error) {
	return 0, errors.New("not asked in these tests")
}

// answer sets what the scheduler at ip says: workers registered under the given pod names
// at tls://<name>:8788, each with its executing tasks, and the tasks it holds.
func (d *daskDouble) answer(ip string, workers map[string]int, tasks int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.answers == nil {
		d.answers = map[string]daskcluster.Status{}
	}
	st := daskcluster.Status{Tasks: tasks}
	for name, n := range workers {
		st.Workers = append(st.Workers, daskcluster.Worker{Name: name, Address: "tls://" + name + ":8788", Executing: n})
		st.Processing += n
	}
	d.answers[ip] = st
}

func (d *daskDouble) retirements() (retired, alive [][]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.retired), slices.Clone(d.alive)
}

func (d *daskDouble) pathAsked(ip string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.paths[ip]
}

// TestCluster_DaskRunsASchedulerAndRetiresWorkersBeforeTheyGo: a dask Cluster gets its
// scheduler, Service, TLS Secret and NetworkPolicy, workers once the scheduler's pod runs, a
// status from what the scheduler says, and, scaled down, the idle workers retired through the
// scheduler while their pods still run, then deleted; the busy one stays.
func TestCluster_DaskRunsASchedulerAndRetiresWorkersBeforeTheyGo(t *testing.T) {
	ns := namespace(t)
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1"},
		Spec: nbv1.ClusterParameters{Owner: "alice", Framework: nbv1.FrameworkDask, Engines: 3}}
	create(t, c)
	scheduler := &clusterPods(t, c, builder.ComponentDaskScheduler, 1)[0]
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1-dask-scheduler"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1-ipcluster"}}
	policy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1-dask"}}
	eventually(t, "service, secret and policy", func() error {
		return errors.Join(get(svc), get(secret), get(policy))
	})
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Port != 8786 || svc.Spec.Ports[1].Port != 8787 {
		t.Errorf("service ports %+v", svc.Spec.Ports)
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("the scheduler's Service waits for the readiness probe before workers can reach it")
	}
	if _, ok := builder.DaskCredentialsOf(secret); !ok || secret.Data[builder.ClusterSecretKey] != nil {
		t.Errorf("secret keys %v: want the TLS files and no ipyparallel key", keys(secret.Data))
	}
	if got := string(secret.Data[builder.EnvDaskSchedulerAddress]); got != "tls://d1-dask-scheduler."+ns+".svc:8786" {
		t.Errorf("scheduler address %q", got)
	}
	clusterPods(t, c, builder.ComponentDaskWorker, 0)

	// Workers reach the scheduler through its Service: they start once its pod runs, before
	// it answers, and retry until it listens.
	runPod(t, scheduler, "10.2.0.1")
	workers := clusterPods(t, c, builder.ComponentDaskWorker, 3)
	dask.answer("10.2.0.1", nil, 0)
	for _, p := range workers {
		if p.Annotations[builder.AnnotationControllerPod] != string(scheduler.UID) {
			t.Errorf("worker %s made for scheduler %q", p.Name, p.Annotations[builder.AnnotationControllerPod])
		}
	}
	if got := dask.pathAsked("10.2.0.1"); got != "/dask/d1" {
		t.Errorf("the scheduler's routes were asked under %q, want its dashboard prefix", got)
	}
	busy := workers[1].Name
	dask.answer("10.2.0.1", map[string]int{workers[0].Name: 0, busy: 1, workers[2].Name: 0}, 7)
	clusterCondition(t, c, nbv1.ConditionReady, metav1.ConditionTrue, nbv1.ReasonClusterRunning)
	eventually(t, "the scheduler's status", func() error {
		if err := get(c); err != nil {
			return err
		}
		if s := c.Status; s.ReadyEngines != 3 || s.BusyEngines != 1 || s.Tasks != 7 || s.DashboardAddress != "10.2.0.1:8787" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	before := len(first(dask.retirements()))

	update(t, c, func(c *nbv1.Cluster) { c.Spec.Engines = 1 })
	if left := names(clusterPods(t, c, builder.ComponentDaskWorker, 1)); left[0] != busy {
		t.Errorf("worker left %v, want the busy %s", left, busy)
	}
	retired, alive := dask.retirements()
	if len(retired) != before+1 {
		t.Fatalf("%d retirements, want 1", len(retired)-before)
	}
	gone := []string{"tls://" + workers[0].Name + ":8788", "tls://" + workers[2].Name + ":8788"}
	got := slices.Sorted(slices.Values(retired[before]))
	if !slices.Equal(got, gone) {
		t.Errorf("retired %v, want the idle %v", got, gone)
	}
	for _, w := range []string{workers[0].Name, workers[2].Name} {
		if !slices.Contains(alive[before], w) {
			t.Errorf("worker pod %s was gone before the scheduler retired it (alive then: %v)", w, alive[before])
		}
	}

	update(t, c, func(c *nbv1.Cluster) { c.Spec.State = nbv1.ClusterStopped })
	clusterPods(t, c, builder.ComponentDaskScheduler, 0)
	clusterPods(t, c, builder.ComponentDaskWorker, 0)
	eventually(t, "no dashboard once stopped", func() error {
		if err := get(c); err != nil || c.Status.DashboardAddress != "" {
			return fmt.Errorf("dashboard address %q (%w)", c.Status.DashboardAddress, err)
		}
		return nil
	})
}

func keys(m map[string][]byte) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func first[A, B any](a A, _ B) A { return a }

// TestCluster_AdaptiveBoundsAreForDaskAndOrdered: the schema takes minEngines and maxEngines
// on dask clusters only, minEngines only with maxEngines, and not above it.
func TestCluster_AdaptiveBoundsAreForDaskAndOrdered(t *testing.T) {
	ns := namespace(t)
	for name, tc := range map[string]struct {
		framework nbv1.ClusterFramework
		lo, hi    *int32
		ok        bool
	}{
		"dask 1 to 3":         {nbv1.FrameworkDask, ptr.To[int32](1), ptr.To[int32](3), true},
		"dask up to 3":        {nbv1.FrameworkDask, nil, ptr.To[int32](3), true},
		"ipyparallel 1 to 3":  {nbv1.FrameworkIPyParallel, ptr.To[int32](1), ptr.To[int32](3), false},
		"no framework, max 3": {"", nil, ptr.To[int32](3), false},
		"dask min alone":      {nbv1.FrameworkDask, ptr.To[int32](1), nil, false},
		"dask 3 to 1":         {nbv1.FrameworkDask, ptr.To[int32](3), ptr.To[int32](1), false},
	} {
		c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "a-"},
			Spec: nbv1.ClusterParameters{Owner: "alice", Framework: tc.framework, State: nbv1.ClusterStopped, MinEngines: tc.lo, MaxEngines: tc.hi}}
		err := k8sClient.Create(context.Background(), c)
		if tc.ok != (err == nil) || (err != nil && !apierrors.IsInvalid(err)) {
			t.Errorf("%s: create answered %v, want accepted %v", name, err, tc.ok)
		}
	}
}
