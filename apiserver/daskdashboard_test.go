package apiserver_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// A dask cluster's dashboard goes through the API server to the scheduler's HTTP server at
// the cluster's status.dashboardAddress, path unchanged, WebSockets too (Bokeh's), for its
// owner only, without nbkube's token or cookies; anyone else, admins too, gets 404. (The
// scheduler here is a stand-in for its HTTP server: Debian's Dask has no Bokeh, whose
// WebSockets the proxy must carry; the real scheduler's pages are proxied in the e2e tests.)
func TestDaskDashboard_ProxiedToItsOwnerOnlyWebSocketsToo(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	scheduler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		switch r.URL.Path {
		case "/dask/d1/json/counts.json":
			w.Header().Set("Content-Type", "application/json")
			http.SetCookie(w, &http.Cookie{Name: "from-the-scheduler", Value: "x"})
			_, _ = w.Write([]byte(`{"workers": 2}`))
		case "/dask/d1/ws":
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				typ, msg, err := c.ReadMessage()
				if err != nil {
					return
				}
				_ = c.WriteMessage(typ, append([]byte("echo "), msg...))
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer scheduler.Close()

	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	cl := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d1"},
		Spec: nbv1.ClusterParameters{Owner: "ann", Framework: nbv1.FrameworkDask, State: nbv1.ClusterRunning, Engines: 2}}
	if err := c.Create(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.DashboardAddress = strings.TrimPrefix(scheduler.URL, "http://")
	if err := c.Status().Update(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	s := terminalServer(t, c, ns, func(o *apiserver.Options) {
		o.Clusters = &repository.Clusters{Reader: c, Writer: c, Namespace: ns}
	})

	r := s.do("GET", "/dask/d1/json/counts.json", nil, append(as("ann"), "Cookie", "_xsrf=secret")...)
	expect(t, r, http.StatusOK)
	if string(r.body) != `{"workers": 2}` || r.header.Get("Set-Cookie") != "" {
		t.Errorf("through the proxy: %s, Set-Cookie %q", r.body, r.header.Get("Set-Cookie"))
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Get("Authorization") != "" || seen[0].Get("Cookie") != "" {
		t.Errorf("the scheduler got nbkube's credentials: %v", seen)
	}
	mu.Unlock()
	r = s.do("GET", "/api/clusters/d1", nil, as("ann")...)
	if !strings.Contains(string(r.body), `"dashboard_url":"/dask/d1/"`) || !strings.Contains(string(r.body), `"framework":"dask"`) {
		t.Errorf("the model: %s", r.body)
	}

	// A WebSocket, as Bokeh's dashboard opens one, with the token in the query.
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/dask/d1/ws?token=token-ann", nil)
	if err != nil {
		t.Fatalf("WebSocket through the proxy: %v (%v)", err, resp)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "echo hi" {
		t.Errorf("WebSocket echo %q, %v", msg, err)
	}
	_ = ws.Close()
	mu.Lock()
	if last := seen[len(seen)-1]; strings.Contains(last.Get("Authorization")+last.Get("Cookie"), "token") {
		t.Errorf("the WebSocket's request carried nbkube's token: %v", last)
	}
	n := len(seen)
	mu.Unlock()

	for _, user := range []string{"ben", "admin"} {
		expect(t, s.do("GET", "/dask/d1/json/counts.json", nil, as(user)...), http.StatusNotFound)
	}
	expect(t, s.do("GET", "/dask/nosuch/json/counts.json", nil, as("ann")...), http.StatusNotFound)
	mu.Lock()
	if len(seen) != n {
		t.Errorf("the scheduler was asked for others: %v", seen[n:])
	}
	mu.Unlock()

	cl.Spec.State = nbv1.ClusterStopped
	if err := c.Update(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a stopped cluster's dashboard", 10*time.Second, func() error {
		if r := s.do("GET", "/dask/d1/json/counts.json", nil, as("ann")...); r.status != http.StatusServiceUnavailable {
			return fmt.Errorf("HTTP %d: %s", r.status, r.body)
		}
		return nil
	})
}
