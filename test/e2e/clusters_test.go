package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// clusterTimeout bounds a cluster's change of state: engines take 4-7 s to register with
// ipyparallel 7, more on a busy machine.
const clusterTimeout = 90 * time.Second

// clusterModel is what /api/clusters and /clusters answer.
type clusterModel struct {
	Profile         string `json:"profile"`
	Status          string `json:"status"`
	N               *int   `json:"n"`
	EnginesReady    int    `json:"engines_ready"`
	ControllerReady bool   `json:"controller_ready"`
}

// TestClusters_ThroughLocal runs a real ipyparallel cluster on the local node: an admin
// makes it with the Kubernetes API, a user starts it through /api/clusters, uses it from a
// kernel attached to it, scales it down while an engine is busy, survives the loss of its
// ipcontroller, and stops it, then the same through the older /clusters routes.
func TestClusters_ThroughLocal(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	t.Cleanup(func() { inst.stop(t) })
	api := inst.api(t)

	// The admin's part: a cluster for the user, stopped until the user starts it.
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "par"},
		Spec: nbv1.ClusterParameters{Owner: nbv1.Owner(localUserName()), State: nbv1.ClusterStopped, Engines: 1}}
	if err := inst.client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	// The API server reads through its cache: a cluster made elsewhere shows up shortly.
	testenv.Eventually(t, "the admin's cluster listed", 10*time.Second, func() error {
		var list []clusterModel
		api.call(t, http.MethodGet, "api/clusters", nil).want(t, http.StatusOK).decode(t, &list)
		if !slices.ContainsFunc(list, func(m clusterModel) bool { return m.Profile == "par" && m.Status == "stopped" }) {
			return fmt.Errorf("GET /api/clusters: %+v", list)
		}
		return nil
	})

	var started clusterModel
	api.call(t, http.MethodPost, "api/clusters/par/start?n=3", nil).want(t, http.StatusOK).decode(t, &started)
	if started.Status != "running" || started.N == nil || *started.N != 3 {
		t.Errorf("start answered %+v", started)
	}
	api.call(t, http.MethodPost, "api/clusters/par/start", nil).want(t, http.StatusConflict)
	waitEngines(t, api, "api/clusters/par", 3)
	engines := clusterPodNames(t, inst, "ipengine", 3)

	// The user's notebook, attached to the cluster, reaches its 3 engines by profile name.
	var s sessionModel
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "par.ipynb", "type": "notebook", "name": "par.ipynb",
		"kernel": map[string]any{"name": "python3"}, "cluster": "par"}).want(t, http.StatusCreated).decode(t, &s)
	t.Cleanup(func() { api.deleteQuietly("api/sessions/" + s.ID) })
	inst.readyKernel(t, s.Kernel.ID)
	ws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", "")
	defer ws.close()
	e := runCell(t, ws, `import ipyparallel as ipp, os, time
rc = ipp.Client(profile='par', timeout=60)
rc.wait_for_engines(3, timeout=60, interactive=False)
print(len(set(rc[:].apply_sync(os.getpid))), rc[:].map_sync(lambda x: x * x, range(6)))`)
	if got := strings.TrimSpace(e.Stdout.String()); got != "3 [0, 1, 4, 9, 16, 25]" {
		t.Errorf("parallel map from the kernel: %q, want 3 distinct pids and the squares", got)
	}

	// Scale to 1 while one engine works: the busy engine is the one that stays.
	e = runCell(t, ws, `busy = rc.ids[1]
ar = rc[busy].apply_async(time.sleep, 20)
time.sleep(1)
print(rc._engines[busy])`)
	busyPod := strings.TrimSpace(e.Stdout.String())
	if !slices.Contains(engines, busyPod) {
		t.Fatalf("busy engine %q is none of the engine pods %v", busyPod, engines)
	}
	patchCluster(t, inst, func(c *nbv1.Cluster) { c.Spec.Engines = 1 })
	if left := clusterPodNames(t, inst, "ipengine", 1); left[0] != busyPod {
		t.Errorf("engine left after scaling down: %v, want the busy %s", left, busyPod)
	}
	e = runCell(t, ws, `ar.get(timeout=60)
print(ar.successful(), rc.ids == [busy])`)
	if got := strings.TrimSpace(e.Stdout.String()); got != "True True" {
		t.Errorf("the busy engine's task and the engines left: %q (stderr %q)", got, e.Stderr.String())
	}

	// An ipcontroller that dies takes its hub with it: a new one comes with new engines,
	// and the kernel's connection file follows it to its new address.
	patchCluster(t, inst, func(c *nbv1.Cluster) { c.Spec.Engines = 2 })
	waitEngines(t, api, "api/clusters/par", 2)
	old := clusterPodNames(t, inst, "ipcontroller", 1)[0]
	if err := inst.client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: old}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a new ipcontroller", clusterTimeout, func() error {
		if names := clusterPodNames(t, inst, "ipcontroller", -1); len(names) != 1 || names[0] == old {
			return fmt.Errorf("ipcontroller pods %v", names)
		}
		return nil
	})
	waitEngines(t, api, "api/clusters/par", 2)
	e = runCell(t, ws, `rc.close()
for attempt in range(60):
    try:
        rc = ipp.Client(profile='par', timeout=10)
        rc.wait_for_engines(2, timeout=30, interactive=False)
        break
    except Exception:
        time.sleep(1)
print(len(set(rc[:].apply_sync(os.getpid))))`)
	if got := strings.TrimSpace(e.Stdout.String()); got != "2" {
		t.Errorf("engines after the ipcontroller was replaced: %q (stderr %q)", got, e.Stderr.String())
	}

	var stopped clusterModel
	api.call(t, http.MethodPost, "api/clusters/par/stop", nil).want(t, http.StatusOK).decode(t, &stopped)
	if stopped.Status != "stopped" {
		t.Errorf("stop answered %+v", stopped)
	}
	api.call(t, http.MethodPost, "api/clusters/par/stop", nil).want(t, http.StatusConflict)
	clusterPodNames(t, inst, "", 0)

	// The older interface, as IPython's dashboard used it.
	var legacy []clusterModel
	api.call(t, http.MethodGet, "clusters", nil).want(t, http.StatusOK).decode(t, &legacy)
	if !slices.ContainsFunc(legacy, func(m clusterModel) bool { return m.Profile == "par" && m.Status == "stopped" }) {
		t.Errorf("GET /clusters: %+v", legacy)
	}
	api.call(t, http.MethodPost, "clusters/par/start?n=1", nil).want(t, http.StatusOK)
	waitEngines(t, api, "clusters/par", 1)
	api.call(t, http.MethodPost, "clusters/par/restart", nil).want(t, http.StatusBadRequest)
	api.call(t, http.MethodGet, "clusters/nosuch", nil).want(t, http.StatusNotFound)
	api.call(t, http.MethodPost, "clusters/par/stop", nil).want(t, http.StatusOK)
	clusterPodNames(t, inst, "", 0)
}

// runCell runs code in the kernel and fails the test if it raised.
// mapOnEngines runs a parallel map on the n engines of cluster par from the kernel of ws and
// answers what it printed: how many engine hosts answered, and the map's squares of 0..3
// ("2 [0, 1, 4, 9]" for two engines). Host names, not PIDs: engines in pods of their own may
// all have the same PID.
func mapOnEngines(t *testing.T, ws *jupyterWS, n int) (got string, e *jpclient.Execution) {
	e = runCell(t, ws, fmt.Sprintf(`import ipyparallel as ipp, socket
rc = ipp.Client(profile='par', timeout=60)
rc.wait_for_engines(%d, timeout=60, interactive=False)
print(len(set(rc[:].apply_sync(socket.gethostname))), rc[:].map_sync(lambda x: x * x, range(4)))`, n))
	return strings.TrimSpace(e.Stdout.String()), e
}

func runCell(t *testing.T, ws *jupyterWS, code string) *jpclient.Execution {
	t.Helper()
	e := jpclient.NewExecution(ws.execute(code))
	ws.await(e, 3*cellTimeout, "cell", (*jpclient.Execution).Finished)
	if e.Status() != "ok" {
		t.Fatalf("cell %q: %s %v (stdout %q)", code, e.Ename, e.Reply, e.Stdout.String())
	}
	return e
}

// waitEngines waits until the cluster model at route says n engines are registered.
func waitEngines(t *testing.T, api *jupyterAPI, route string, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d engines at %s", n, route), clusterTimeout, func() error {
		var m clusterModel
		api.call(t, http.MethodGet, route, nil).want(t, http.StatusOK).decode(t, &m)
		if m.Status != "running" || !m.ControllerReady || m.EnginesReady != n {
			return fmt.Errorf("%+v", m)
		}
		return nil
	})
}

// clusterPodNames waits until the test's cluster has n pods of component ("" for all) that
// are not being deleted, and returns their names; n < 0 does not wait.
func clusterPodNames(t *testing.T, inst *instance, component string, n int) []string {
	t.Helper()
	const cluster = "par"
	var names []string
	list := func() error {
		sel := client.MatchingLabels{nbv1.LabelCluster: cluster}
		if component != "" {
			sel[nbv1.LabelComponent] = component
		}
		var pods corev1.PodList
		if err := inst.client.List(t.Context(), &pods, client.InNamespace("default"), sel); err != nil {
			return err
		}
		names = names[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil || n == 0 {
				names = append(names, p.Name)
			}
		}
		if n >= 0 && len(names) != n {
			return fmt.Errorf("pods %v", names)
		}
		return nil
	}
	if n < 0 {
		if err := list(); err != nil {
			t.Fatal(err)
		}
		return names
	}
	testenv.Eventually(t, fmt.Sprintf("%d %s pods of cluster %s", n, component, cluster), clusterTimeout, list)
	return names
}

// patchCluster changes the test's cluster par.
func patchCluster(t *testing.T, inst *instance, mutate func(*nbv1.Cluster)) {
	t.Helper()
	const name = "par"
	testenv.Eventually(t, "update cluster "+name, 10*time.Second, func() error {
		c := &nbv1.Cluster{}
		if err := inst.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, c); err != nil {
			return err
		}
		mutate(c)
		return inst.client.Update(t.Context(), c)
	})
}
