package apiserver_test

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// asAdmin makes the test server's user, alice, an admin: only admins read /metrics.
func asAdmin(o *apiserver.Options) { o.User = identity.User{Name: "alice", Admin: true} }

// scrape reads the server's /metrics, authenticated as every route.
func scrape(t *testing.T, s *testServer, path string) map[string]*dto.MetricFamily {
	t.Helper()
	r := s.do("GET", path, nil)
	expect(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q", ct)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(r.body)))
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, r.body)
	}
	return families
}

// sample is the metric of the family whose labels are exactly labels ("name=value" pairs).
func sample(families map[string]*dto.MetricFamily, name string, labels ...string) (*dto.Metric, error) {
	f, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("no metric %s", name)
	}
	var seen []string
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if cmp.Equal(got, labels) {
			return m, nil
		}
		seen = append(seen, strings.Join(got, ","))
	}
	return nil, fmt.Errorf("no %s{%s}; there are %v", name, strings.Join(labels, ","), seen)
}

// requestCount is how many requests the histogram holds for method, handler and status.
func requestCount(families map[string]*dto.MetricFamily, method, handler string, status int) (uint64, error) {
	m, err := sample(families, "http_request_duration_seconds", "handler="+handler, "method="+method, fmt.Sprintf("status_code=%d", status))
	if err != nil {
		return 0, err
	}
	return m.GetHistogram().GetSampleCount(), nil
}

func TestMetrics_JupyterServersMetricsAfterRealRequests(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	ctx := t.Context()
	// Later than the kernels' creation, which is their activity until they report some.
	started := time.Now().Add(time.Hour).Truncate(time.Second)
	clk := clocktesting.NewFakePassiveClock(started)
	for _, name := range []string{"python3", "ir", "julia"} {
		if err := c.Create(ctx, &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nbv1.KernelSpecSpec{
			DisplayName: name, Language: name, Argv: []string{name, "-f", "{connection_file}"}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Everyone's kernels count, as in Jupyter Server, whose kernels are all its one user's.
	for _, k := range []struct{ name, owner, spec string }{{"k1", "alice", "python3"}, {"k2", "bob", "python3"}, {"k3", "alice", "ir"}} {
		if err := c.Create(ctx, &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k.name},
			Spec: nbv1.KernelParameters{Owner: nbv1.Owner(k.owner), KernelSpec: k.spec}}); err != nil {
			t.Fatal(err)
		}
	}
	active := started.Add(10 * time.Minute)
	k2 := &nbv1.Kernel{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "k2"}, k2); err != nil {
		t.Fatal(err)
	}
	k2.Status.LastActivity = &metav1.Time{Time: active}
	if err := c.Status().Update(ctx, k2); err != nil {
		t.Fatal(err)
	}
	specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
	kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs}
	s := newServer(t, asAdmin, func(o *apiserver.Options) {
		o.Clock = clk
		o.Kernels = kernels
		o.KernelSpecs = specs
	})

	notebook := map[string]any{"type": "notebook", "content": map[string]any{
		"cells": []any{}, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5}}
	expect(t, s.do("GET", "/api/contents/missing.ipynb", nil), http.StatusNotFound)
	expect(t, s.do("PUT", "/api/contents/n.ipynb", notebook), http.StatusCreated)
	expect(t, s.do("GET", "/api/contents/n.ipynb", nil), http.StatusOK)
	expect(t, s.do("GET", "/api/contents/n.ipynb", nil), http.StatusOK)
	expect(t, s.do("POST", "/api/contents/n.ipynb/checkpoints", nil), http.StatusCreated)
	expect(t, s.do("PATCH", "/api/contents/n.ipynb", nil), http.StatusBadRequest)
	expect(t, s.do("GET", "/api/kernels", nil), http.StatusOK)
	expect(t, s.do("GET", "/nothing/here", nil), http.StatusNotFound)
	// As Jupyter Server's, /metrics needs the token (authenticate_prometheus).
	expect(t, s.do("GET", "/metrics", nil, "Authorization", ""), http.StatusForbidden)

	var families map[string]*dto.MetricFamily
	testenv.Eventually(t, "every request in the histogram", 10*time.Second, func() error {
		families = scrape(t, s, "/metrics")
		for _, want := range []struct {
			method, handler string
			status          int
			count           uint64
		}{
			// The handler is the route, not the path: one series per route, whatever the paths.
			{"GET", "/api/contents/*path", http.StatusNotFound, 1},
			{"PUT", "/api/contents/*path", http.StatusCreated, 1},
			{"GET", "/api/contents/*path", http.StatusOK, 2},
			{"POST", "/api/contents/*path", http.StatusCreated, 1},
			{"GET", "/api/kernels", http.StatusOK, 1},
			{"GET", "none", http.StatusNotFound, 1},
			{"GET", "/metrics", http.StatusForbidden, 1},
		} {
			n, err := requestCount(families, want.method, want.handler, want.status)
			if err != nil {
				return err
			}
			if n != want.count {
				return fmt.Errorf("%s %s %d: %d requests, want %d", want.method, want.handler, want.status, n, want.count)
			}
		}
		return nil
	})
	hist := families["http_request_duration_seconds"]
	if hist.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("http_request_duration_seconds is a %s", hist.GetType())
	}
	// prometheus_client's default buckets, which Jupyter Server's histogram has.
	inf := math.Inf(1)
	var les []float64
	for _, b := range hist.GetMetric()[0].GetHistogram().GetBucket() {
		les = append(les, b.GetUpperBound())
	}
	if d := cmp.Diff([]float64{.005, .01, .025, .05, .075, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10, inf}, les); d != "" {
		t.Errorf("buckets (-Jupyter +nbkube):\n%s", d)
	}

	gauges := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"kernel_currently_running_total", []string{"type=python3"}, 2},
		{"kernel_currently_running_total", []string{"type=ir"}, 1},
		// A spec without kernels is 0, as Jupyter's gauge of a type whose kernels ended.
		{"kernel_currently_running_total", []string{"type=julia"}, 0},
		{"jupyter_server_started_timestamp_seconds", nil, float64(started.Unix())},
		// The last activity is the latest of the requests (at the fake clock's start) and
		// the kernels' activity.
		{"jupyter_server_last_activity_timestamp_seconds", nil, float64(active.Unix())},
		{"jupyter_server_active_duration_seconds", nil, active.Sub(started).Seconds()},
		{"nbkube_contents_operations_total", []string{"operation=get", "outcome=not_found"}, 1},
		{"nbkube_contents_operations_total", []string{"operation=get", "outcome=ok"}, 2},
		{"nbkube_contents_operations_total", []string{"operation=save", "outcome=ok"}, 1},
		{"nbkube_contents_operations_total", []string{"operation=create_checkpoint", "outcome=ok"}, 1},
		{"nbkube_contents_operations_total", []string{"operation=rename", "outcome=invalid"}, 1},
	}
	for _, g := range gauges {
		m, err := sample(families, g.name, g.labels...)
		if err != nil {
			t.Error(err)
			continue
		}
		got := m.GetGauge().GetValue() + m.GetCounter().GetValue()
		if got != g.want {
			t.Errorf("%s%v = %v, want %v", g.name, g.labels, got, g.want)
		}
	}

	// A request is activity: the last activity moves to the clock's time of the latest one.
	later := active.Add(time.Hour)
	clk.SetTime(later)
	expect(t, s.do("GET", "/api/contents", nil), http.StatusOK)
	testenv.Eventually(t, "last activity moved", 10*time.Second, func() error {
		m, err := sample(scrape(t, s, "/metrics"), "jupyter_server_last_activity_timestamp_seconds")
		if err != nil {
			return err
		}
		if got := m.GetGauge().GetValue(); got != float64(later.Unix()) {
			return fmt.Errorf("last activity %v, want %v", got, float64(later.Unix()))
		}
		return nil
	})
}

// The metrics are every user's activity (requests by route, contents operations, kernels by
// spec): a user who is not an admin does not read them, with a token or logged in.
func TestMetrics_OnlyAdminsReadThem(t *testing.T) {
	s := newServer(t)
	expect(t, s.do("GET", "/api/status", nil), http.StatusOK)
	r := s.do("GET", "/metrics", nil)
	expect(t, r, http.StatusForbidden)
	if strings.Contains(string(r.body), "http_request_duration_seconds") {
		t.Errorf("the refusal shows metrics: %s", r.body)
	}
	browser(t, s)
	expect(t, s.do("GET", "/api/status?token="+testToken, nil, "Authorization", ""), http.StatusOK)
	expect(t, s.do("GET", "/metrics", nil, "Authorization", ""), http.StatusForbidden)

	admin := newServer(t, asAdmin)
	if _, err := sample(scrape(t, admin, "/metrics"), "nbkube_channels_connections"); err != nil {
		t.Errorf("an admin's scrape: %v", err)
	}
}

func TestMetrics_HandlerIsTheRouteWithoutTheBaseURL(t *testing.T) {
	s := newServer(t, asAdmin, func(o *apiserver.Options) { o.BaseURL = "/base/" })
	expect(t, s.do("GET", "/base/api/contents/a/b/c.txt", nil), http.StatusNotFound)
	testenv.Eventually(t, "request counted", 10*time.Second, func() error {
		_, err := requestCount(scrape(t, s, "/base/metrics"), "GET", "/api/contents/*path", http.StatusNotFound)
		return err
	})
}

// TestMetrics_ChannelsAreCountedWhileOpen connects a real client through the proxy to a real
// agent: the upgrade is a request of status 101, as Jupyter Server logs it, and the
// connection counts while it is open.
func TestMetrics_ChannelsAreCountedWhileOpen(t *testing.T) {
	ep := startAgent(t)
	s := newServer(t, asAdmin, func(o *apiserver.Options) { o.Kernels = &oneKernel{id: "k1", ep: ep} })
	connections := func(want float64) func() error {
		return func() error {
			families := scrape(t, s, "/metrics")
			m, err := sample(families, "nbkube_channels_connections")
			if err != nil {
				return err
			}
			if got := m.GetGauge().GetValue(); got != want {
				return fmt.Errorf("%v connections, want %v", got, want)
			}
			if want > 0 {
				if n, err := requestCount(families, "GET", "/api/kernels/:id/channels", http.StatusSwitchingProtocols); err != nil || n != 1 {
					return fmt.Errorf("upgrades counted: %d, %w", n, err)
				}
			}
			return nil
		}
	}
	header := http.Header{"Authorization": {"token " + testToken}}
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/api/kernels/k1/channels?session_id=m1", header)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := execute(t, ws, false, "6*7"); got != "42" {
		t.Errorf("execute: %q", got)
	}
	testenv.Eventually(t, "one connection", 10*time.Second, connections(1))
	ws.Close()
	testenv.Eventually(t, "no connection", 10*time.Second, connections(0))
}
