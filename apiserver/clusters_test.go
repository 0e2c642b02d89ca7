package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The cluster routes over real Cluster resources (no controller runs here: the state the
// API sets is what is checked).
func TestClusters(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	for _, cl := range []*nbv1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}, Spec: nbv1.ClusterParameters{Owner: "alice", State: nbv1.ClusterStopped, Engines: 2}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bobs"}, Spec: nbv1.ClusterParameters{Owner: "bob", State: nbv1.ClusterRunning, Engines: 1}},
	} {
		if err := c.Create(t.Context(), cl); err != nil {
			t.Fatal(err)
		}
	}
	ks := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python3"}, Spec: nbv1.KernelSpecSpec{
		DisplayName: "Python 3", Language: "python", Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}}
	if err := c.Create(t.Context(), ks); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *apiserver.Options) {
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
		o.KernelSpecs = specs
		o.Sessions = &repository.Sessions{Reader: c, Writer: c, Namespace: ns,
			Kernels: &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs}}
	})
	model := func(r response) jupyter.Cluster {
		t.Helper()
		var m jupyter.Cluster
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		return m
	}
	spec := func() nbv1.ClusterParameters {
		cl := &nbv1.Cluster{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "mine"}, cl); err != nil {
			t.Fatal(err)
		}
		return cl.Spec
	}

	for _, prefix := range []string{"/api/clusters", "/clusters"} {
		r := s.do("GET", prefix, nil)
		expect(t, r, http.StatusOK)
		var list []jupyter.Cluster
		if err := json.Unmarshal(r.body, &list); err != nil || len(list) != 1 || list[0].Profile != "mine" || list[0].Status != "stopped" || list[0].N != 2 {
			t.Errorf("GET %s: %s (%v), want only the user's stopped cluster", prefix, r.body, err)
		}
		expect(t, s.do("GET", prefix+"/bobs", nil), http.StatusNotFound)
		expect(t, s.do("POST", prefix+"/bobs/stop", nil), http.StatusNotFound)
		expect(t, s.do("GET", prefix+"/nosuch", nil), http.StatusNotFound)
		expect(t, s.do("POST", prefix+"/mine/restart", nil), http.StatusBadRequest)
	}

	r := s.do("POST", "/api/clusters/mine/start?n=3", nil)
	expect(t, r, http.StatusOK)
	if m := model(r); m.Status != "running" || m.N != 3 || m.ClusterID != "mine" {
		t.Errorf("start: %+v", m)
	}
	if sp := spec(); sp.State != nbv1.ClusterRunning || sp.Engines != 3 {
		t.Errorf("after start: %+v", sp)
	}
	if r := s.do("POST", "/api/clusters/mine/start", nil); r.status != http.StatusConflict || !json.Valid(r.body) {
		t.Errorf("start of a running cluster: %d %s, want 409", r.status, r.body)
	}
	expect(t, s.do("POST", "/clusters/mine/stop", nil), http.StatusOK)
	if sp := spec(); sp.State != nbv1.ClusterStopped {
		t.Errorf("after stop: %+v", sp)
	}
	expect(t, s.do("POST", "/api/clusters/mine/stop", nil), http.StatusConflict)

	expect(t, s.do("POST", "/api/clusters/mine/start?n=many", nil), http.StatusBadRequest)
	expect(t, s.do("POST", "/api/clusters/mine/start", map[string]any{"n": 5000}), http.StatusBadRequest)
	r = s.do("POST", "/api/clusters/mine/start", map[string]any{"n": 1})
	expect(t, r, http.StatusOK)
	if sp := spec(); sp.State != nbv1.ClusterRunning || sp.Engines != 1 {
		t.Errorf("after start with a body: %+v", sp)
	}
	if m := model(s.do("GET", "/api/clusters/mine", nil)); m.Status != "running" || m.N != 1 || m.ProfileDir != "~/.ipython/profile_mine" {
		t.Errorf("GET: %+v", m)
	}

	// A session's kernel may use only a cluster of the user's.
	for _, cluster := range []string{"nosuch", "bobs"} {
		r := s.do("POST", "/api/sessions", map[string]any{"path": "p.ipynb", "type": "notebook",
			"kernel": map[string]any{"name": "python3"}, "cluster": cluster})
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "No such cluster: "+cluster) {
			t.Errorf("session attached to %s: %d %s, want 400 No such cluster", cluster, r.status, r.body)
		}
	}
}

// Users make clusters of their own through the API and delete them: the Cluster resource is
// theirs and started; names are checked, taken ones are conflicts whoever has them, and one
// user's clusters are bounded.
func TestClusters_UsersMakeAndDeleteTheirOwn(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	if err := c.Create(t.Context(), &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bobs"},
		Spec: nbv1.ClusterParameters{Owner: "bob", State: nbv1.ClusterStopped, Engines: 1}}); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *apiserver.Options) {
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
	})
	get := func(name string) (*nbv1.Cluster, error) {
		cl := &nbv1.Cluster{}
		return cl, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, cl)
	}

	r := s.do("POST", "/api/clusters", map[string]any{"profile": "work", "n": 3})
	expect(t, r, http.StatusCreated)
	if loc := r.header.Get("Location"); loc != "/api/clusters/work" {
		t.Errorf("Location %q", loc)
	}
	var m jupyter.Cluster
	if err := json.Unmarshal(r.body, &m); err != nil || m.Profile != "work" || m.Status != "running" || m.N != 3 || m.Owner != "alice" {
		t.Errorf("the new cluster's model: %s (%v)", r.body, err)
	}
	if cl, err := get("work"); err != nil || cl.Spec.Owner != "alice" || cl.Spec.State != nbv1.ClusterRunning || cl.Spec.Engines != 3 {
		t.Errorf("the Cluster made: %+v %v", cl.Spec, err)
	}
	expect(t, s.do("GET", "/api/clusters/work", nil), http.StatusOK)
	// No n: the schema's two.
	expect(t, s.do("POST", "/api/clusters", map[string]any{"profile": "two"}), http.StatusCreated)
	if cl, err := get("two"); err != nil || cl.Spec.Engines != 2 {
		t.Errorf("a cluster made without n: %+v %v", cl.Spec, err)
	}

	// Taken names, the user's own or another's, answer alike and change nothing.
	for _, name := range []string{"work", "bobs"} {
		r := s.do("POST", "/api/clusters", map[string]any{"profile": name, "n": 1})
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), "not available") {
			t.Errorf("a new cluster named %s: %d %s, want 409", name, r.status, r.body)
		}
	}
	if cl, _ := get("bobs"); cl.Spec.Owner != "bob" || cl.Spec.Engines != 1 || cl.Spec.State != nbv1.ClusterStopped {
		t.Errorf("bob's cluster after alice asked for its name: %+v", cl.Spec)
	}
	// Bad names and counts.
	for _, body := range []any{
		map[string]any{"profile": "Work"}, map[string]any{"profile": "-x"}, map[string]any{"profile": "x-"},
		map[string]any{"profile": "a/b"}, map[string]any{"profile": "a.b"}, map[string]any{"profile": strings.Repeat("a", 41)},
		map[string]any{"profile": ""}, map[string]any{}, map[string]any{"profile": "ok", "n": 5000},
		map[string]any{"profile": "ok", "n": -1}, map[string]any{"profile": 7}, "[]",
	} {
		r := s.do("POST", "/api/clusters", body)
		if r.status != http.StatusBadRequest || !json.Valid(r.body) {
			t.Errorf("POST /api/clusters %v: %d %s, want 400", body, r.status, r.body)
		}
	}
	if _, err := get("ok"); err == nil {
		t.Error("a refused cluster was made")
	}
	expect(t, s.do("POST", "/api/clusters", map[string]any{"profile": strings.Repeat("a", 40)}), http.StatusCreated)

	// Delete: the user's own only.
	expect(t, s.do("DELETE", "/api/clusters/bobs", nil), http.StatusNotFound)
	expect(t, s.do("DELETE", "/api/clusters/nosuch", nil), http.StatusNotFound)
	expect(t, s.do("DELETE", "/api/clusters/work", nil), http.StatusNoContent)
	expect(t, s.do("GET", "/api/clusters/work", nil), http.StatusNotFound)
	if cl, err := get("work"); err == nil && cl.DeletionTimestamp == nil {
		t.Error("the Cluster is still there after DELETE")
	}
	if _, err := get("bobs"); err != nil {
		t.Errorf("bob's cluster after alice's DELETE: %v", err)
	}

	// At most MaxOwnClusters: alice has two; fill up, then one more is refused.
	for i := 2; i < repository.MaxOwnClusters; i++ {
		expect(t, s.do("POST", "/api/clusters", map[string]any{"profile": "c" + strconv.Itoa(i), "n": 0}), http.StatusCreated)
	}
	r = s.do("POST", "/api/clusters", map[string]any{"profile": "one-more", "n": 0})
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "delete one first") {
		t.Errorf("cluster %d: %d %s, want 403", repository.MaxOwnClusters+1, r.status, r.body)
	}
	expect(t, s.do("DELETE", "/api/clusters/c2", nil), http.StatusNoContent)
	expect(t, s.do("POST", "/api/clusters", map[string]any{"profile": "one-more", "n": 0}), http.StatusCreated)
}
