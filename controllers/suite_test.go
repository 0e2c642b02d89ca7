package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The suite runs the controllers in a manager against a real kube-apiserver and etcd
// (envtest, with the binaries hack/build-k8s.sh builds). There is no kubelet or controller
// manager: tests play the kubelet by writing pod status through the real API, and garbage
// collection is tested in the local end-to-end tests. With no kubelet there are no kernel
// agents either: agents stands in for them (the agent itself is tested against a real
// ipykernel in package agent), and the culler's time is clk, which tests step.
var (
	k8sClient  client.Client
	restConfig *rest.Config
	kinds      = scheme.New()
	opts       = builder.DefaultOptions()
	clk        = clocktesting.NewFakeClock(time.Now())
	agents     = &agentDouble{}
	hub        = &hubDouble{}
	dask       = &daskDouble{}
	// agentTokenKey is the installation's agent token key.
	agentTokenKey = []byte("suite agent token key, 32 bytes.")
)

const (
	// statusInterval is short so that tests see an agent's new report quickly.
	statusInterval = 200 * time.Millisecond
	// cullInterval is how far the fake clock steps to start a cull pass. Culling is off
	// unless a KernelSpec turns it on, so that it touches only the culling tests' kernels.
	cullInterval = time.Minute
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	flag.Parse()
	if testing.Verbose() {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: testenv.KubeBinDir(),
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest (run `make k8s-bins` first?): %v\n", err)
		return 1
	}
	defer env.Stop()
	restConfig = cfg

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  kinds,
		Cache:   controllers.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.ContentsClaim = "contents"
	// Homes on, as the chart installs the manager.
	if opts.UserHome, err = homes.Parse("{username}"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Claims per user on, as an admin who has made some sets the chart.
	if opts.HomeClaims, err = homes.ParseClaims("home-{username}"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := controllers.SetupWithManager(ctx, mgr, controllers.Options{Builder: opts, Clock: clk, Agents: agents, AgentTokenKey: agentTokenKey,
		Hub: hub, Dask: dask, ClusterPollInterval: 200 * time.Millisecond, ClusterNetworkPolicies: true,
		StatusInterval: statusInterval, Culling: controllers.CullingOptions{Interval: cullInterval}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	// Tests read through a direct client: what they assert is what the API server holds.
	k8sClient, err = client.New(cfg, client.Options{Scheme: kinds})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// namespace makes a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{}
	ns.GenerateName = "test-"
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually waits for cond as long as a controller may reasonably take.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, what, 20*time.Second, cond)
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func get(o client.Object) error {
	return k8sClient.Get(context.Background(), client.ObjectKeyFromObject(o), o)
}

// update re-reads the object and applies mutate until the write wins against the
// controllers' own status writes.
func update[T client.Object](t *testing.T, o T, mutate func(T)) {
	t.Helper()
	eventually(t, "update "+o.GetName(), func() error {
		if err := get(o); err != nil {
			return err
		}
		mutate(o)
		return k8sClient.Update(context.Background(), o)
	})
}

// agentDouble answers for the agents of kernel pods by pod IP; an IP it has no report for
// is unreachable. It remembers the token and port each IP was asked with.
type agentDouble struct {
	mu      sync.Mutex
	reports map[string]agentapi.Status
	// terminals are the reports of terminal agents, by pod IP.
	terminals map[string]agentapi.TerminalStatus
	asked     map[string]agentclient.Endpoint
	calls     map[string]int
}

// TerminalStatus answers for the agent of a terminal pod by pod IP, as Status does for
// kernels'.
func (a *agentDouble) TerminalStatus(_ context.Context, e agentclient.Endpoint) (agentapi.TerminalStatus, error) {
	return answer(a, e, &a.terminals)
}

// reportTerminal sets what the terminal agent at ip answers; nil makes it unreachable.
func (a *agentDouble) reportTerminal(ip string, st *agentapi.TerminalStatus) {
	setAnswer(a, &a.terminals, ip, st)
}

func (a *agentDouble) Status(_ context.Context, e agentclient.Endpoint) (agentapi.Status, error) {
	return answer(a, e, &a.reports)
}

// report sets what the agent at ip answers; nil makes it unreachable.
func (a *agentDouble) report(ip string, st *agentapi.Status) {
	setAnswer(a, &a.reports, ip, st)
}

// answer records that the agent at e was asked and gives what answers holds for it, or
// ErrUnreachable.
func answer[T any](a *agentDouble, e agentclient.Endpoint, answers *map[string]T) (T, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.asked == nil {
		a.asked, a.calls = map[string]agentclient.Endpoint{}, map[string]int{}
	}
	a.asked[e.Host] = e
	a.calls[e.Host]++
	st, ok := (*answers)[e.Host]
	if !ok {
		return st, agentclient.ErrUnreachable
	}
	return st, nil
}

// setAnswer sets what answers holds for ip; nil removes it.
func setAnswer[T any](a *agentDouble, answers *map[string]T, ip string, st *T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if *answers == nil {
		*answers = map[string]T{}
	}
	if st == nil {
		delete(*answers, ip)
		return
	}
	(*answers)[ip] = *st
}

// lastAsked is the endpoint ip was last asked at and how often it was asked.
func (a *agentDouble) lastAsked(ip string) (agentclient.Endpoint, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked[ip], a.calls[ip]
}

// exhaustQuota gives ns a quota of one of resource, all used, so that admission refuses the
// next one. envtest runs no quota controller: the quota's status is what admission counts
// against, and the test writes it.
func exhaustQuota(t *testing.T, ns string, resource corev1.ResourceName) {
	t.Helper()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exhausted"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{resource: apiresource.MustParse("1")}},
	}
	create(t, q)
	eventually(t, "quota status", func() error {
		if err := get(q); err != nil {
			return err
		}
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = q.Spec.Hard
		return k8sClient.Status().Update(context.Background(), q)
	})
	// The API server's quota admission reads quotas from a cache of its own: wait until it
	// refuses what the quota counts, or an object made right after would still be admitted.
	var probe client.Object
	switch resource {
	case corev1.ResourcePods:
		probe = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "quota-probe-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	case "count/kernels.nbkube.io":
		probe = &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "quota-probe-"},
			Spec: nbv1.KernelParameters{Owner: "probe", KernelSpec: "python3"}}
	default:
		return
	}
	eventually(t, "quota enforced", func() error {
		err := k8sClient.Create(context.Background(), probe.DeepCopyObject().(client.Object), client.DryRunAll)
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("a %s was admitted past the quota: %w", resource, err)
	})
}
