package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// daskModel is what /api/clusters answers of a dask cluster.
type daskModel struct {
	clusterModel
	Framework    string `json:"framework"`
	DashboardURL string `json:"dashboard_url"`
	EnginesBusy  int    `json:"engines_busy"`
}

// createDask makes the user's dask cluster par with n workers through the API and waits for
// them.
func createDask(t *testing.T, api *jupyterAPI, n int) {
	t.Helper()
	var m daskModel
	api.call(t, http.MethodPost, "api/clusters", map[string]any{"profile": "par", "n": n, "framework": "dask"}).
		want(t, http.StatusCreated).decode(t, &m)
	if m.Framework != "dask" || m.DashboardURL != "/dask/par/" {
		t.Errorf("a new dask cluster: %+v", m)
	}
	waitEngines(t, api, "api/clusters/par", n)
}

// daskSession is a notebook of the user's attached to cluster par, with its kernel's channels.
func daskSession(t *testing.T, inst *instance, api *jupyterAPI) *jupyterWS {
	t.Helper()
	var s sessionModel
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "dask.ipynb", "type": "notebook", "name": "dask.ipynb",
		"kernel": map[string]any{"name": "python3"}, "cluster": "par"}).want(t, http.StatusCreated).decode(t, &s)
	t.Cleanup(func() { api.deleteQuietly("api/sessions/" + s.ID) })
	inst.readyKernel(t, s.Kernel.ID)
	ws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", "")
	t.Cleanup(ws.close)
	return ws
}

// mapOnWorkers runs a map of 40 tasks over the cluster's n workers from the kernel of ws with
// Dask's Client() and no argument (DASK_SCHEDULER_ADDRESS and the TLS settings come with the
// kernel), and returns the names of the workers that ran them.
func mapOnWorkers(t *testing.T, ws *jupyterWS, n int) []string {
	t.Helper()
	e := runCell(t, ws, fmt.Sprintf(`import json, os
from dask.distributed import Client, get_worker
client = Client(timeout=60)
client.wait_for_workers(%d, timeout=60)
print(json.dumps(sorted(set(client.gather(client.map(lambda i: get_worker().name, range(40), pure=False)))), separators=(",", ":")), os.environ["DASK_SCHEDULER_ADDRESS"].split(":")[0])`, n))
	out := strings.Fields(strings.TrimSpace(e.Stdout.String()))
	var names []string
	if len(out) != 2 || json.Unmarshal([]byte(out[0]), &names) != nil || out[1] != "tls" {
		t.Fatalf("the map from the kernel printed %q (stderr %q): want the workers' names and a tls:// scheduler", e.Stdout.String(), e.Stderr.String())
	}
	return names
}

// TestDask_ThroughLocal runs a real dask cluster (Debian's python3-distributed) on the local
// node of one user, as `make run` does: made through /api/clusters, used from a kernel
// attached to it with Dask's Client() and no argument, scaled down from 3 workers to 1 while
// tasks run and results are held (none lost), its dashboard's pages proxied, and stopped.
func TestDask_ThroughLocal(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	t.Cleanup(func() { inst.stop(t) })
	api := inst.api(t)

	createDask(t, api, 2)
	workers := clusterPodNames(t, inst, "dask-worker", 2)
	ws := daskSession(t, inst, api)
	if got := mapOnWorkers(t, ws, 2); !slices.Equal(got, slices.Sorted(slices.Values(workers))) {
		t.Errorf("the map ran on %v, want both worker pods %v", got, workers)
	}

	// kubectl shows the framework.
	if out := inst.kubectl(t, "get", "clusters", "par"); !strings.Contains(out, "FRAMEWORK") || !strings.Contains(out, "dask") {
		t.Errorf("kubectl get clusters:\n%s", out)
	}

	// 3 workers, then 1 while 6 tasks of 6 s run and 30 results are held: the two that go are
	// retired through the scheduler first, so nothing is lost or computed again.
	patchCluster(t, inst, func(c *nbv1.Cluster) { c.Spec.Engines = 3 })
	waitEngines(t, api, "api/clusters/par", 3)
	runCell(t, ws, `import time
client.wait_for_workers(3, timeout=60)
def square(i):
    return i * i
held = client.map(square, range(30), pure=False)
client.gather(held)
slow = client.map(lambda i: (time.sleep(6), i)[1], range(6), pure=False)
time.sleep(1)`)
	patchCluster(t, inst, func(c *nbv1.Cluster) { c.Spec.Engines = 1 })
	left := clusterPodNames(t, inst, "dask-worker", 1)
	// The scheduler's story of each held result says how often it went to a worker to be
	// computed: once, when nothing was lost with the workers that went.
	e := runCell(t, ws, `computed = client.run_on_scheduler(lambda dask_scheduler, keys: sum(1 for k in keys for s in dask_scheduler.story(k) if s[2] == "processing"), keys=[f.key for f in held])
print(sum(client.gather(held)), computed, client.gather(slow), [w["name"] for w in client.scheduler_info()["workers"].values()])`)
	if got, want := strings.TrimSpace(e.Stdout.String()), fmt.Sprintf("8555 30 [0, 1, 2, 3, 4, 5] [%q]", left[0]); got != strings.ReplaceAll(want, `"`, "'") {
		t.Errorf("after scaling down: %q, want every result, each computed once (%s) (stderr %q)", got, want, e.Stderr.String())
	}

	// The dashboard's routes, through the API server's proxy.
	r := api.call(t, http.MethodGet, "dask/par/json/counts.json", nil).want(t, http.StatusOK)
	var counts struct {
		Workers *int `json:"workers"`
	}
	r.decode(t, &counts)
	if counts.Workers == nil || *counts.Workers != 1 {
		t.Errorf("the scheduler's counts through the proxy: %s", r.body)
	}
	if r := api.call(t, http.MethodGet, "dask/par/info/main/workers.html", nil).want(t, http.StatusOK); !strings.Contains(string(r.body), left[0]) {
		t.Errorf("the scheduler's workers page does not name %s: %.300s", left[0], r.body)
	}

	var stopped daskModel
	api.call(t, http.MethodPost, "api/clusters/par/stop", nil).want(t, http.StatusOK).decode(t, &stopped)
	if stopped.Status != "stopped" || stopped.Framework != "dask" {
		t.Errorf("stop answered %+v", stopped)
	}
	clusterPodNames(t, inst, "", 0)
	api.call(t, http.MethodGet, "dask/par/json/counts.json", nil).want(t, http.StatusServiceUnavailable)

	// Adaptive, between 1 and 3 workers: started with 1, it grows to 3 for 24 tasks of 3 s and
	// goes back to 1 once their results are released, as the scheduler recommends.
	patchCluster(t, inst, func(c *nbv1.Cluster) {
		c.Spec.State, c.Spec.MinEngines, c.Spec.MaxEngines = nbv1.ClusterRunning, ptr.To[int32](1), ptr.To[int32](3)
	})
	waitEngines(t, api, "api/clusters/par", 1)
	ws = daskSession(t, inst, api)
	runCell(t, ws, `import time
from dask.distributed import Client
client = Client(timeout=60)
busy = client.map(lambda i: time.sleep(3), range(24), pure=False)`)
	waitEngines(t, api, "api/clusters/par", 3)
	runCell(t, ws, `client.gather(busy)
del busy`)
	waitEngines(t, api, "api/clusters/par", 1)
}

// TestDask_SandboxedUsersOwnTheirClusters runs ann's dask cluster on a node that sandboxes
// pods and enforces NetworkPolicies: her kernel uses it; its dashboard is hers alone (ben,
// and the admin, get 404); ben's kernel reaches neither its scheduler nor its workers; and
// her engines limit counts its workers.
func TestDask_SandboxedUsersOwnTheirClusters(t *testing.T) {
	inst, as, _, _ := startSandboxedUsers(t)
	ann, ben := as("ann"), as("ben")
	limit := int32(3)
	policy := &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ann-engines"},
		Spec: nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Engines: &limit}}}
	if err := inst.client.Create(t.Context(), policy); err != nil {
		t.Fatal(err)
	}

	createDask(t, ann, 2)
	ws := daskSession(t, inst, ann)
	if got := mapOnWorkers(t, ws, 2); len(got) != 2 {
		t.Errorf("ann's map ran on %v, want her 2 workers", got)
	}

	// Past her limit of 3 engines, counted in workers: a second cluster of 2 is refused.
	testenv.Eventually(t, "ann's second cluster refused", 10*time.Second, func() error {
		r := ann.call(t, http.MethodPost, "api/clusters", map[string]any{"profile": "par2", "n": 2, "framework": "dask"})
		if r.status != http.StatusForbidden {
			ann.deleteQuietly("api/clusters/par2")
			return fmt.Errorf("HTTP %d: %s", r.status, r.body)
		}
		return nil
	})

	// The dashboard: ann's; 404 to ben and to the admin, as for a cluster that does not exist.
	ann.call(t, http.MethodGet, "dask/par/json/counts.json", nil).want(t, http.StatusOK)
	ben.call(t, http.MethodGet, "dask/par/json/counts.json", nil).want(t, http.StatusNotFound).jupyterError(t)
	inst.api(t).call(t, http.MethodGet, "dask/par/json/counts.json", nil).want(t, http.StatusNotFound)
	ann.call(t, http.MethodGet, "dask/nosuch/json/counts.json", nil).want(t, http.StatusNotFound)

	// Ben's kernel reaches none of the cluster's ports; ann's kernel reaches the scheduler's.
	var pods corev1.PodList
	if err := inst.client.List(t.Context(), &pods, client.InNamespace("default"), client.MatchingLabels{nbv1.LabelCluster: "par"}); err != nil {
		t.Fatal(err)
	}
	// The scheduler's 8786 and 8787 first, then the workers'.
	var scheduler, workers []string
	for _, p := range pods.Items {
		switch p.Labels[nbv1.LabelComponent] {
		case "dask-scheduler":
			scheduler = append(scheduler, net.JoinHostPort(p.Status.PodIP, "8786"), net.JoinHostPort(p.Status.PodIP, "8787"))
		case "dask-worker":
			workers = append(workers, net.JoinHostPort(p.Status.PodIP, "8788"))
		}
	}
	targets := append(scheduler, workers...)
	if len(scheduler) != 2 || len(targets) != 4 {
		t.Fatalf("ann's cluster's addresses: %v", targets)
	}
	code := reachScript(t, targets)
	var k struct {
		ID string `json:"id"`
	}
	ben.call(t, http.MethodPost, "api/kernels", map[string]any{"name": "python3"}).want(t, http.StatusCreated).decode(t, &k)
	bws := dialJupyterWS(t, ben, "api/kernels/"+k.ID+"/channels", randomID())
	defer bws.close()
	if err := bws.awaitKernelInfo(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(bws.run(code).Stdout.String()); got != "[]" {
		t.Errorf("ben's kernel reaches ann's dask cluster at %s", got)
	}
	// Ann's kernel reaches her scheduler and workers, not the HTTP port (nbkube's only).
	e := runCell(t, ws, code)
	var reached []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(e.Stdout.String())), &reached); err != nil ||
		!slices.Equal(reached, append([]string{targets[0]}, workers...)) {
		t.Errorf("ann's kernel reaches %q of %v: want the scheduler's 8786, not its 8787", e.Stdout.String(), targets)
	}
}
