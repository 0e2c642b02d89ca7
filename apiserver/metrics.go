package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// Registry is where the server registers its metrics and what /metrics serves: a Prometheus
// registry, controller-runtime's in the nbkube binary, so that the metrics port of the
// process serves the same metrics.
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// requestBuckets are the default buckets of Python's prometheus_client, which Jupyter Server's
// request histogram has: dashboards made for it find the same "le" labels.
var requestBuckets = []float64{.005, .01, .025, .05, .075, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10}

// unmatchedHandler is the handler label of requests that no route serves.
const unmatchedHandler = "none"

// metricsUser is the identity the server's own kernel count reads with: every user's kernels,
// as Jupyter Server's gauge counts every kernel of its one user.
var metricsUser = User{Name: "nbkube-metrics", Admin: true}

// collectTimeout bounds the reads of one scrape.
const collectTimeout = 5 * time.Second

// serverMetrics are the API server's metrics: Jupyter Server's, under its names, so that
// dashboards made for it work, and nbkube's own (nbkube_*).
type serverMetrics struct {
	requests *prometheus.HistogramVec
	contents *prometheus.CounterVec
	channels prometheus.Gauge
	// refusedBusy counts requests refused for want of room in the body budget.
	refusedBusy prometheus.Counter
	// lastRequest is the Unix time in nanoseconds of the last request that counts as activity
	// (Jupyter's api_last_activity); 0 before the first.
	lastRequest atomic.Int64
}

func newServerMetrics(s *Server) (*serverMetrics, error) {
	m := &serverMetrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "duration in seconds for all HTTP requests",
			Buckets: requestBuckets,
		}, []string{"method", "handler", "status_code"}),
		contents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nbkube_contents_operations_total",
			Help: "Contents API operations by operation and outcome.",
		}, []string{"operation", "outcome"}),
		channels: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nbkube_channels_connections",
			Help: "Kernel channels WebSocket connections open on this API server.",
		}),
		refusedBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nbkube_requests_refused_busy_total",
			Help: "Requests with bodies refused (503) because the bytes of the requests being handled left no room in time.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.contents, m.channels, m.refusedBusy, &stateCollector{s: s, m: m}} {
		if err := s.opts.Metrics.Register(c); err != nil {
			return nil, fmt.Errorf("apiserver: register metrics: %w", err)
		}
	}
	return m, nil
}

// activity records a request as the server's latest activity.
func (m *serverMetrics) activity(at time.Time) {
	t := at.UnixNano()
	for {
		last := m.lastRequest.Load()
		if t <= last || m.lastRequest.CompareAndSwap(last, t) {
			return
		}
	}
}

// Descriptions of the metrics stateCollector computes at each scrape.
var (
	kernelsDesc = prometheus.NewDesc("kernel_currently_running_total",
		"counter for how many kernels are running labeled by type", []string{"type"}, nil)
	startedDesc = prometheus.NewDesc("jupyter_server_started_timestamp_seconds",
		"Timestamp of when this Jupyter Server was started", nil, nil)
	lastActivityDesc = prometheus.NewDesc("jupyter_server_last_activity_timestamp_seconds",
		"Timestamp of last seen activity on this Jupyter Server", nil, nil)
	activeDurationDesc = prometheus.NewDesc("jupyter_server_active_duration_seconds",
		"Number of seconds this Jupyter Server has been active", nil, nil)
)

// stateCollector reads the kernels and the server's activity when scraped rather than
// keeping gauges up to date: kernels start and end through any replica, and through
// kubectl, so only the resources know how many there are. Every replica reports every
// kernel; sum across replicas with max, not sum.
type stateCollector struct {
	s *Server
	m *serverMetrics
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kernelsDesc, startedDesc, lastActivityDesc, activeDurationDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	started := c.s.started
	last := started
	if t := c.m.lastRequest.Load(); t > 0 && time.Unix(0, t).After(last) {
		last = time.Unix(0, t)
	}
	if running, lastKernel, err := c.kernelsByType(ctx); err != nil {
		// The rest of the scrape is still worth having; the kernels are missing from it.
		c.s.opts.Log.Error(err, "Count the kernels for the metrics")
	} else {
		for spec, n := range running {
			ch <- prometheus.MustNewConstMetric(kernelsDesc, prometheus.GaugeValue, float64(n), spec)
		}
		if lastKernel.After(last) {
			last = lastKernel
		}
	}
	ch <- prometheus.MustNewConstMetric(startedDesc, prometheus.GaugeValue, unixSeconds(started))
	ch <- prometheus.MustNewConstMetric(lastActivityDesc, prometheus.GaugeValue, unixSeconds(last))
	ch <- prometheus.MustNewConstMetric(activeDurationDesc, prometheus.GaugeValue, last.Sub(started).Seconds())
}

// kernelsByType counts the kernels of each kernel spec, 0 for a spec without kernels, and
// finds their latest activity.
func (c *stateCollector) kernelsByType(ctx context.Context) (map[string]int, time.Time, error) {
	var last time.Time
	specs, err := c.s.opts.KernelSpecs.ListKernelSpecs(ctx)
	if err != nil {
		return nil, last, err
	}
	kernels, err := c.s.opts.Kernels.ListKernels(ctx, metricsUser)
	if err != nil {
		return nil, last, err
	}
	running := make(map[string]int, len(specs))
	for _, ks := range specs {
		running[ks.Name] = 0
	}
	for _, k := range kernels {
		running[k.Name]++
		if k.LastActivity.After(last) {
			last = k.LastActivity.Time
		}
	}
	return running, last, nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// serveMetrics is GET /metrics, authenticated as every route (Jupyter Server's default,
// authenticate_prometheus) and for admins only: the metrics are every user's activity
// (requests by route, contents operations, kernels by spec), where Jupyter Server's one user
// sees only their own. The metrics port (cmd/nbkube) is authorized through the Kubernetes API
// instead and does not come here.
func (s *Server) serveMetrics() gin.HandlerFunc {
	h := promhttp.HandlerFor(s.opts.Metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return func(c *gin.Context) {
		if u := userOf(c); u == nil || !u.Admin {
			s.abortErr(c, domainerr.Forbidden("Only admins may read the metrics"))
			return
		}
		h.ServeHTTP(c.Writer, c.Request)
	}
}

// countContents counts the operations of the contents routes by their outcome.
func (s *Server) countContents(c *gin.Context) {
	c.Next()
	s.metrics.contents.WithLabelValues(contentsOperation(c.Request.Method, apiPath(c)), outcome(c.Writer.Status())).Inc()
}

// contentsOperation names what a contents request does after the contents manager's methods;
// a POST to a directory makes a new untitled item or a copy, which only its body tells.
func contentsOperation(method, p string) string {
	if m := checkpointsRoute.FindStringSubmatch(p); m != nil {
		switch {
		case m[2] == "" && method == http.MethodGet:
			return "list_checkpoints"
		case m[2] == "" && method == http.MethodPost:
			return "create_checkpoint"
		case m[2] != "" && method == http.MethodGet:
			return "get_checkpoint"
		case m[2] != "" && method == http.MethodPost:
			return "restore_checkpoint"
		case m[2] != "" && method == http.MethodDelete:
			return "delete_checkpoint"
		}
		return "other"
	}
	if trustRoute.MatchString(p) {
		return "trust"
	}
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPut:
		return "save"
	case http.MethodPost:
		return "create"
	case http.MethodPatch:
		return "rename"
	case http.MethodDelete:
		return "delete"
	}
	return "other"
}

// outcome names the answer's status in a few words, the kinds of refusal of errors.go.
func outcome(status int) string {
	switch {
	case status < http.StatusBadRequest:
		return "ok"
	case status == http.StatusBadRequest:
		return "invalid"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusConflict:
		return "conflict"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusInsufficientStorage:
		// The volume is full: the admin's to fix, not a failure of the server.
		return "no_space"
	case status < http.StatusInternalServerError:
		return "refused"
	}
	return "error"
}

// handlerLabel is the route of the request without the base URL, which bounds the label's
// values to the routes; unmatchedHandler when no route serves the path.
func (s *Server) handlerLabel(c *gin.Context) string {
	route := c.FullPath()
	if route == "" {
		return unmatchedHandler
	}
	return "/" + strings.TrimPrefix(route, s.opts.BaseURL)
}

// tracksActivity says whether a request is activity of the server, as Jupyter Server's
// api_last_activity: an authenticated request of the REST API, but for the polls of the
// status and a request that asks not to be (?no_track_activity).
func tracksActivity(c *gin.Context, handler string) bool {
	if userOf(c) == nil || !strings.HasPrefix(handler, "/api/") {
		return false
	}
	switch handler {
	case "/api/status", "/api/spec.yaml":
		return false
	}
	_, quiet := c.GetQuery("no_track_activity")
	return !quiet
}
