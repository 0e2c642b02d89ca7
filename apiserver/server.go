// Package apiserver serves the Jupyter notebook server REST API (and the older IPython
// interface) with Gin. Handlers are thin: they bind the request, check who asks, make one
// call on a store or repository and render the Jupyter model (internal/jupyter), returning
// early with an error that one function (answerTo, errors.go) maps to Jupyter's JSON errors.
// Every service is always there, an empty one when the server runs without it, so handlers
// never ask. The server keeps no state of its own beyond caches, so any number of replicas
// can serve the same users.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"k8s.io/utils/clock"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/events"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/web"
)

// Options configure the server.
type Options struct {
	// BaseURL is the prefix of every route, "/" by default; it always starts and ends with "/".
	BaseURL string
	// Token authenticates User, in an Authorization header or a ?token= parameter (which also
	// logs the browser in with a cookie): the "token" identity provider, used when Providers
	// is empty.
	Token string
	// User is the identity of requests that present Token.
	User User
	// Providers tell who presents a token (or whom a login cookie names), the first that
	// knows it answering; a "token" provider of Token and User when empty.
	Providers []identity.Provider
	// IdentityCache bounds how long the providers' answers are reused: a removed user or a
	// rotated token loses access within its TTL, a minute at most.
	IdentityCache identity.CacheOptions
	// PublicURL is the server's origin as browsers reach it (https://nbkube.example.com),
	// where browser providers send logins back (PublicURL + BaseURL + "oauth_callback", the
	// address registered with them); the address of each login's request when empty.
	PublicURL string
	// TrustedProxies are the addresses of TLS-terminating proxies (an Ingress controller)
	// whose X-Forwarded-Proto is believed: a request they forward over HTTPS gets Secure
	// cookies and https addresses. None by default, where only nbkube's own TLS counts. Their
	// X-Forwarded-For tells the login throttle which client a login comes from.
	TrustedProxies []netip.Prefix
	// CookieSecret signs login cookies; every replica needs the same one. At least 32 bytes.
	CookieSecret []byte
	// Contents is the notebook store.
	Contents *contents.Store
	// Homes places each user's home on the contents volume: a user who is not an admin sees
	// only their home, as their root; admins see the volume's root, and so every home. Off
	// (everyone sees the root) when zero.
	Homes homes.Template
	// Kernels runs the users' kernels; without it there are none.
	Kernels KernelService
	// Events is the event bus of /api/events; a bus of this server's own when nil.
	Events *events.Bus
	// KernelEvents tells what happened to kernels that only the cluster knows (a death, a
	// cull), as kernel_status events; none when nil.
	KernelEvents interface {
		Watch(ctx context.Context, emit func(owner string, data map[string]any)) error
	}
	// Peers lists the other replicas of this API server ("10.1.2.3:8888"), whose events this
	// one's subscribers hear too (events_peers.go); nil for none. Every replica needs the
	// same CookieSecret, which signs the links.
	Peers func(context.Context) ([]string, error)
	// Sessions keeps the users' sessions; without it there are none.
	Sessions SessionService
	// Clusters keeps the users' ipyparallel clusters; without it there are none.
	Clusters ClusterService
	// Terminals runs the users' terminals; without it there are none, and the terminal
	// routes answer 404, as Jupyter Server's do without its terminals extension.
	Terminals TerminalService
	// TerminalKernelSpec names the kernel spec whose image and resources a terminal runs in
	// when its start names none: for the users whose policies allow it; the user's default
	// kernel spec when empty, and for the others.
	TerminalKernelSpec string
	// Quotas tells users their usage and limits (in /api/status and /api/me) and bounds their
	// chunked uploads; no quotas when nil.
	Quotas QuotaService
	// RateLimits are the iopub limits of every channels connection; Jupyter's defaults when
	// nil.
	RateLimits *agentapi.RateLimits
	// RST renders reStructuredText for /rstservice/render; none when nil (503).
	RST RSTRenderer
	// KernelSpecs lists the kernel specs of /api/kernelspecs; none when nil.
	KernelSpecs KernelSpecLister
	// DefaultKernelSpec is the default kernel's name, "python3" when empty; when no spec has
	// it, the first spec by name is the default.
	DefaultKernelSpec string
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64
	// BodyMemory is the budget, in bytes, of the request bodies handled at once: a request
	// with a body waits for room before it is read (admission.go). DefaultBodyMemory when 0.
	BodyMemory int64
	// AdmissionWait is how long a request waits for room in BodyMemory before it gets 503;
	// DefaultAdmissionWait when 0.
	AdmissionWait time.Duration
	// Assets are the web pages' built scripts and styles; web.Assets(), those built into the
	// binary, when nil. Without them the pages say how to build them.
	Assets fs.FS
	// ReadTimeout bounds how long Serve waits for a request, its body included, counted from
	// its start: a client that trickles a body gets 408 and loses the connection instead of
	// holding it, a goroutine and the body read so far. What comes after the body is not
	// bounded: the handler's work, a WebSocket's life, a long download. DefaultReadTimeout
	// when zero.
	ReadTimeout time.Duration
	// BodyIdleTimeout bounds each wait for a byte of a request's body, within ReadTimeout: a
	// client that stops sending gets 408 then, not at the end of the read timeout, which
	// must be long enough for a large body over a slow link. DefaultBodyIdleTimeout when
	// zero.
	BodyIdleTimeout time.Duration
	// Version is reported by GET /api.
	Version string
	// TrashSweepInterval is how often Serve deletes expired trash entries and abandoned
	// chunked uploads; DefaultTrashSweepInterval when zero.
	TrashSweepInterval time.Duration
	// Clock stamps /api/status and times requests; the real clock when nil.
	Clock clock.PassiveClock
	// Metrics is where the server registers its metrics, and what GET /metrics serves; a
	// registry of its own when nil.
	Metrics Registry
	// Log receives request and error logs; never tokens or cookies.
	Log logr.Logger
}

// QuotaService tells users their usage and limits.
type QuotaService interface {
	// Quota is the user's usage and limits, nil when the installation has no quotas.
	Quota(ctx context.Context, u User) (*jupyter.Quota, error)
	// UploadAllowance is how many bytes the user's chunked uploads in progress may hold; 0
	// is no limit.
	UploadAllowance(ctx context.Context, u User) (int64, error)
}

// KernelCounter tells how many kernels a user has and how many clients are connected to them.
type KernelCounter interface {
	CountKernels(ctx context.Context, user User) (kernels, connections int, err error)
}

// APIVersion is the Jupyter Server release whose REST API nbkube follows; GET /api reports it
// because clients compare it, not nbkube's own version.
const APIVersion = "2.14.2"

// DefaultMaxBodyBytes bounds request bodies unless configured: a large notebook fits, an
// upload of a large file comes in chunks as Jupyter clients send them.
const DefaultMaxBodyBytes = 128 << 20

// DefaultReadTimeout bounds the arrival of request bodies unless configured. Bodies are small
// or come in pieces: JupyterLab uploads a file over 15 MB in chunks of 1 MB, and a notebook is
// saved whole. Five minutes let a 15 MB body through at 400 kbit/s and one of
// DefaultMaxBodyBytes at 4 Mbit/s, and keep what a trickling client can hold short.
const DefaultReadTimeout = 5 * time.Minute

// DefaultBodyIdleTimeout bounds the wait for a byte of a request body unless configured: a
// link that carries nothing for this long is not slow but gone, or a client holding the
// connection on purpose.
const DefaultBodyIdleTimeout = 30 * time.Second

// Server is the Jupyter API server.
type Server struct {
	opts   Options
	agents *agentclient.Client
	events *events.Bus
	// peers links to the other replicas' events; nil without Options.Peers.
	peers *peerLinks
	// peerKey signs and checks links between replicas.
	peerKey []byte
	auth    *authenticator
	engine  *gin.Engine
	started time.Time
	metrics *serverMetrics
	// bodies is the budget of request bodies (Options.BodyMemory).
	bodies *semaphore.Weighted
	// assetTags are the entity tags of the pages' assets, by name, computed on first use.
	assetTags sync.Map
	// exports holds a slot per export running: exports are CPU-bound and each holds up to
	// its notebook and output in memory, so their number is bounded too.
	exports chan struct{}
}

// New builds the server and its routes.
func New(opts Options) (*Server, error) {
	if opts.Contents == nil {
		return nil, errors.New("apiserver: a contents store is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Assets == nil {
		opts.Assets = web.Assets()
	}
	if opts.BodyMemory <= 0 {
		opts.BodyMemory = DefaultBodyMemory
	}
	if opts.AdmissionWait <= 0 {
		opts.AdmissionWait = DefaultAdmissionWait
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.BodyIdleTimeout <= 0 {
		opts.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if opts.TrashSweepInterval <= 0 {
		opts.TrashSweepInterval = DefaultTrashSweepInterval
	}
	if opts.Kernels == nil {
		opts.Kernels = repository.None{}
	}
	if opts.Sessions == nil {
		opts.Sessions = repository.None{}
	}
	if opts.Clusters == nil {
		opts.Clusters = repository.None{}
	}
	if opts.KernelSpecs == nil {
		opts.KernelSpecs = repository.None{}
	}
	if opts.RST == nil {
		opts.RST = repository.None{}
	}
	if len(opts.Providers) == 0 {
		if opts.Token == "" {
			return nil, errors.New("apiserver: a token is required")
		}
		if opts.User.Name == "" {
			return nil, errors.New("apiserver: the token's user needs a name")
		}
		opts.Providers = []identity.Provider{identity.NewToken(opts.Token, opts.User)}
	}
	if opts.IdentityCache.Clock == nil {
		opts.IdentityCache.Clock = opts.Clock
	}
	opts.BaseURL = NormalizeBaseURL(opts.BaseURL)
	if opts.PublicURL != "" {
		u, err := url.Parse(opts.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return nil, fmt.Errorf("apiserver: the public URL %q is not an origin such as https://nbkube.example.com", opts.PublicURL)
		}
		opts.PublicURL = u.Scheme + "://" + u.Host
	}
	auth, err := newAuthenticator(identity.NewCache(opts.Providers, opts.IdentityCache), opts.CookieSecret, opts.BaseURL, opts.Clock)
	if err != nil {
		return nil, err
	}
	auth.proxies = trustedProxies(opts.TrustedProxies)
	if opts.RateLimits == nil {
		limits := agentapi.DefaultRateLimits
		opts.RateLimits = &limits
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	if opts.Events == nil {
		opts.Events = events.NewBus()
	}
	s := &Server{opts: opts, auth: auth, started: opts.Clock.Now(), agents: agentclient.New(), events: opts.Events,
		exports: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))), bodies: semaphore.NewWeighted(opts.BodyMemory)}
	if s.metrics, err = newServerMetrics(s); err != nil {
		return nil, err
	}
	s.peerKey = peerKey(opts.CookieSecret)
	if opts.Peers != nil {
		if len(opts.CookieSecret) == 0 {
			return nil, errors.New("apiserver: replicas that hear each other's events need a cookie secret")
		}
		s.peers = &peerLinks{s: s, peers: opts.Peers, links: map[string]*peerLink{}}
	}
	s.engine = s.routes()
	return s, nil
}

// NormalizeBaseURL makes "", "x", "/x", "x/" into "/x/" (and "" into "/").
func NormalizeBaseURL(b string) string {
	b = strings.Trim(b, "/")
	if b == "" {
		return "/"
	}
	return "/" + b + "/"
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Serve answers requests on l, and sweeps the trash and abandoned uploads, until ctx ends,
// then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	sweepCtx, stopSweeping := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		s.sweep(sweepCtx)
	}()
	defer func() {
		stopSweeping()
		<-swept
	}()
	if s.opts.KernelEvents != nil {
		go func() {
			// Every replica's cache sees the same kernels: each tells its own subscribers,
			// and passes none of it on.
			err := s.opts.KernelEvents.Watch(sweepCtx, func(owner string, data map[string]any) {
				s.eventFault(s.events.EmitHereOnly(owner, events.KernelStatus, data), events.KernelStatus)
			})
			if err != nil && sweepCtx.Err() == nil {
				s.opts.Log.Error(err, "Kernels' deaths, culls and outputs written are not told as events")
			}
		}()
	}
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: 10 * time.Second,
		// ReadTimeout bounds the request until its body has arrived, and no longer: net/http
		// lifts the connection's read deadline once the body is read, at once when there is
		// none, so that neither the handler's work (a kernel start) nor a WebSocket, which
		// takes the connection over, is cut short. timeouts_test.go holds it to that.
		ReadTimeout: s.opts.ReadTimeout,
		IdleTimeout: 2 * time.Minute,
		// No WriteTimeout: kernel WebSockets and large downloads stream for long.
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}
