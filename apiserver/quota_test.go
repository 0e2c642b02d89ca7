package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/quota"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// quotaServer is an API server replica over ns with quotas, through a client of its own (as
// each replica has), whose users are the tokens' "token-<name>". Its kernels never start
// (no controller runs here): those admitted fail after startTimeout.
func quotaServer(t *testing.T, c client.Client, ns string, startTimeout time.Duration, users ...identity.User) *testServer {
	t.Helper()
	var providers []identity.Provider
	for _, u := range users {
		providers = append(providers, identity.NewToken("token-"+u.Name, u))
	}
	return newServer(t, func(o *apiserver.Options) {
		ledger := &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs, StartTimeout: startTimeout, Quota: ledger}
		o.Kernels = kernels
		o.Sessions = &repository.Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: kernels}
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns, Quota: ledger}
		o.KernelSpecs = specs
		o.Quotas = &repository.Quotas{Ledger: ledger, Specs: specs}
		o.Providers = providers
		o.Log = testr.New(t)
	})
}

func quotaNamespace(t *testing.T) (client.Client, string) {
	t.Helper()
	c, cfg := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	for _, name := range []string{"python3", "big", "r"} {
		ks := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nbv1.KernelSpecSpec{
			DisplayName: name, Language: "python", Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}}
		if name == "big" {
			ks.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
		}
		if err := c.Create(t.Context(), ks); err != nil {
			t.Fatal(err)
		}
	}
	// Each replica talks to the kube-apiserver through its own client.
	own, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return own, ns
}

// post is a POST as user that may run in a goroutine: no t.Fatal.
func post(s *testServer, user, path string, body any) (int, map[string]any, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest("POST", s.url+path, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "token token-"+user)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, nil
}

func as(user string) []string { return []string{"Authorization", "token token-" + user} }

// TestQuota_ConcurrentStartsThroughTwoReplicasNeverExceed: twenty starts at once by one user,
// through two API server replicas, admit exactly the limit; the others are refused with 403
// and the limit and usage in the reason, and create nothing. A watcher counts the user's
// Kernels throughout: never more than the limit.
func TestQuota_ConcurrentStartsThroughTwoReplicasNeverExceed(t *testing.T) {
	c, ns := quotaNamespace(t)
	if err := c.Create(t.Context(), &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ann"},
		Spec: nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: new(int32(5))}}}); err != nil {
		t.Fatal(err)
	}
	ann := identity.User{Name: "ann"}
	replicas := []*testServer{quotaServer(t, c, ns, 4*time.Second, ann), quotaServer(t, c, ns, 4*time.Second, ann)}

	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			var list nbv1.KernelList
			if err := c.List(t.Context(), &list, client.InNamespace(ns)); err == nil {
				n := int64(0)
				for _, k := range list.Items {
					if k.Spec.Owner == "ann" && k.DeletionTimestamp == nil {
						n++
					}
				}
				if n > peak.Load() {
					peak.Store(n)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	type result struct {
		status int
		body   map[string]any
		err    error
	}
	results := make([]result, 20)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			st, body, err := post(replicas[i%2], "ann", "/api/kernels", map[string]string{"name": "python3"})
			results[i] = result{st, body, err}
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	refused := 0
	for i, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("start %d: %v", i, r.err)
		case r.status == http.StatusForbidden:
			refused++
			if r.body["reason"] != "kernels: 5 of 5" || !strings.Contains(fmt.Sprint(r.body["message"]), "kernels: 5 of 5") {
				t.Errorf("start %d refused with %v", i, r.body)
			}
		case r.status != http.StatusInternalServerError:
			// Admitted: with no controller here the kernel never answers (a timeout, or the
			// direct client's rate limit running out the start's time).
			t.Errorf("start %d: %d %v", i, r.status, r.body)
		}
	}
	if refused != 15 || peak.Load() > 5 || peak.Load() == 0 {
		t.Fatalf("refused %d of 20 (want 15); ann had up to %d kernels at once (limit 5)", refused, peak.Load())
	}
	// The admitted starts failed and let their room go: the next start is admitted.
	u := &nbv1.UserUsage{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ann"}, u); err != nil || len(u.Spec.Reservations) != 0 {
		t.Fatalf("after the failed starts: %v, %d reservations", err, len(u.Spec.Reservations))
	}
}

// TestQuota_RefusalsAndWhatUsersAreTold covers sessions, kernel specs, clusters and uploads,
// and /api/status and /api/me.
func TestQuota_RefusalsAndWhatUsersAreTold(t *testing.T) {
	c, ns := quotaNamespace(t)
	ben := identity.User{Name: "ben", Groups: []string{"students"}}
	cat := identity.User{Name: "cat"}
	dan := identity.User{Name: "dan"}
	s := quotaServer(t, c, ns, 200*time.Millisecond, ben, cat, dan)

	// No policy: quotas are off, and users are told nothing of them.
	if _, ok := s.do("GET", "/api/status", nil, as("ben")...).json(t)["quota"]; ok {
		t.Error("/api/status tells a quota without policies")
	}
	for _, p := range []*nbv1.UserPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "students"}, Spec: nbv1.UserPolicySpec{Groups: []string{"students"}, KernelSpecs: []string{"python3", "big"},
			Limits: nbv1.UserLimits{Kernels: new(int32(1)), Engines: new(int32(2)), CPU: resourcePtr("2"), UploadBytes: resourcePtr("1000")}}},
	} {
		p.Namespace = ns
		if err := c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	// A spec over the CPU limit.
	r := s.do("POST", "/api/kernels", map[string]string{"name": "big"}, as("ben")...)
	expect(t, r, http.StatusForbidden)
	if r.json(t)["reason"] != "cpu: 0 of 2" {
		t.Errorf("big: %s", r.body)
	}
	// Ben's one kernel, reserved by a session: a second session is refused and not created.
	st, body, err := post(s, "ben", "/api/sessions", map[string]any{"path": "a.ipynb", "type": "notebook", "kernel": map[string]string{"name": "python3"}})
	if err != nil || st != http.StatusInternalServerError {
		// The session's kernel never starts here (no controller): 500 after the timeout.
		t.Fatalf("first session: %d %v %v", st, body, err)
	}
	// The failed start let its room go; hold it with a kernel made as kubectl would.
	if err := c.Create(t.Context(), &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bens"},
		Spec: nbv1.KernelParameters{Owner: "ben", KernelSpec: "python3"}}); err != nil {
		t.Fatal(err)
	}
	l := &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}
	if _, _, err := l.Reserve(t.Context(), quota.Request{Owner: "ben", Reservation: quota.KernelRoom("bens", "python3", corev1.ResourceRequirements{})}); err != nil {
		t.Fatal(err)
	}
	r = s.do("POST", "/api/sessions", map[string]any{"path": "b.ipynb", "type": "notebook", "kernel": map[string]string{"name": "python3"}}, as("ben")...)
	expect(t, r, http.StatusForbidden)
	if r.json(t)["reason"] != "kernels: 1 of 1" {
		t.Errorf("second session: %s", r.body)
	}
	var sessions nbv1.SessionList
	if err := c.List(t.Context(), &sessions, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions.Items {
		if s.Spec.Path == "b.ipynb" {
			t.Error("a refused session was created")
		}
	}
	// Cat is governed by no policy: not limited.
	st, _, _ = post(s, "cat", "/api/kernels", map[string]string{"name": "big"})
	if st == http.StatusForbidden {
		t.Error("a user no policy governs was refused")
	}

	// Clusters: more engines than the limit are refused and the cluster stays stopped.
	if err := c.Create(t.Context(), &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "par"},
		Spec: nbv1.ClusterParameters{Owner: "ben", State: nbv1.ClusterStopped, Engines: 1}}); err != nil {
		t.Fatal(err)
	}
	r = s.do("POST", "/api/clusters/par/start?n=3", nil, as("ben")...)
	expect(t, r, http.StatusForbidden)
	if r.json(t)["reason"] != "engines: 0 of 2" {
		t.Errorf("3 engines: %s", r.body)
	}
	expect(t, s.do("POST", "/api/clusters/par/start?n=2", nil, as("ben")...), http.StatusOK)

	// The launcher offers ben the specs he may start; cat, whom no policy governs, all.
	for user, want := range map[string]string{"ben": "[big python3]", "cat": "[big python3 r]"} {
		var names []string
		for name := range s.do("GET", "/api/kernelspecs", nil, as(user)...).json(t)["kernelspecs"].(map[string]any) {
			names = append(names, name)
		}
		slices.Sort(names)
		if fmt.Sprint(names) != want {
			t.Errorf("%s is offered %v, want %s", user, names, want)
		}
	}

	// A start that names no spec starts the user's default, one the user may start: for dan,
	// whose policy allows r only, r, not the installation's python3.
	if err := c.Create(t.Context(), &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-only"},
		Spec: nbv1.UserPolicySpec{Users: []string{"dan"}, KernelSpecs: []string{"r"}}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "dan's policy read", 10*time.Second, func() error {
		if q, _ := s.do("GET", "/api/status", nil, as("dan")...).json(t)["quota"].(map[string]any); fmt.Sprint(q["kernel_specs"]) != "[r]" {
			return fmt.Errorf("dan's quota %v", q)
		}
		return nil
	})
	r = s.do("POST", "/api/kernels", map[string]any{}, as("dan")...)
	if r.status == http.StatusForbidden || strings.Contains(string(r.body), "python3") {
		t.Errorf("a start of dan's default kernel: %d %s", r.status, r.body)
	}
	var started nbv1.KernelList
	if err := c.List(t.Context(), &started, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, k := range started.Items {
		if k.Spec.Owner == "dan" && k.Spec.KernelSpec != "r" {
			t.Errorf("dan's default kernel is %s", k.Spec.KernelSpec)
		}
	}

	// What ben is told.
	for _, p := range []string{"/api/status", "/api/me"} {
		q, ok := s.do("GET", p, nil, as("ben")...).json(t)["quota"].(map[string]any)
		if !ok {
			t.Fatalf("%s tells no quota", p)
		}
		usage, limits := q["usage"].(map[string]any), q["limits"].(map[string]any)
		if usage["kernels"] != 1.0 || usage["engines"] != 2.0 || limits["kernels"] != 1.0 || limits["engines"] != 2.0 ||
			limits["cpu"] != "2" || limits["memory"] != nil || limits["upload_bytes"] != 1000.0 || fmt.Sprint(q["policies"]) != "[students]" ||
			fmt.Sprint(q["kernel_specs"]) != "[big python3]" {
			t.Errorf("%s quota: %v", p, q)
		}
	}
	// Stopping frees the engines' room.
	expect(t, s.do("POST", "/api/clusters/par/stop", nil, as("ben")...), http.StatusOK)
	if q := s.do("GET", "/api/status", nil, as("ben")...).json(t)["quota"].(map[string]any); q["usage"].(map[string]any)["engines"] != 0.0 {
		t.Errorf("after stop: %v", q)
	}
	// A cluster made through the API is held to the same limit: refused past it and not
	// made; its engines counted while it runs, and given back when it is deleted.
	r = s.do("POST", "/api/clusters", map[string]any{"profile": "more", "n": 3}, as("ben")...)
	expect(t, r, http.StatusForbidden)
	if r.json(t)["reason"] != "engines: 0 of 2" {
		t.Errorf("a new cluster of 3 engines: %s", r.body)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "more"}, &nbv1.Cluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused cluster: %v", err)
	}
	expect(t, s.do("POST", "/api/clusters", map[string]any{"profile": "more", "n": 2}, as("ben")...), http.StatusCreated)
	if q := s.do("GET", "/api/status", nil, as("ben")...).json(t)["quota"].(map[string]any); q["usage"].(map[string]any)["engines"] != 2.0 {
		t.Errorf("with a new cluster of 2 engines: %v", q)
	}
	expect(t, s.do("DELETE", "/api/clusters/more", nil, as("ben")...), http.StatusNoContent)
	if q := s.do("GET", "/api/status", nil, as("ben")...).json(t)["quota"].(map[string]any); q["usage"].(map[string]any)["engines"] != 0.0 {
		t.Errorf("after delete: %v", q)
	}

	// Uploads: two uploads in progress may not hold more than 1000 bytes.
	chunk := func(name string, n int) response {
		return s.do("PUT", "/api/contents/"+name, map[string]any{"type": "file", "format": "base64", "chunk": 1,
			"content": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), n))}, as("ben")...)
	}
	expect(t, chunk("one.bin", 600), http.StatusCreated)
	r = chunk("two.bin", 600)
	expect(t, r, http.StatusRequestEntityTooLarge)
	if !strings.Contains(string(r.body), "upload allowance of 1000 bytes") {
		t.Errorf("upload over the allowance: %s", r.body)
	}
	// Cat has no allowance.
	expect(t, s.do("PUT", "/api/contents/cat.bin", map[string]any{"type": "file", "format": "base64", "chunk": 1,
		"content": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 2000))}, as("cat")...), http.StatusCreated)
}

func resourcePtr(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
