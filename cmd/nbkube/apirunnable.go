package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/kernelspecs"
	"github.com/nbkube/nbkube/internal/quota"
	"github.com/nbkube/nbkube/internal/repository"
)

// newAPIRunnable builds the API server over the contents root and the cluster's resources
// (c, and informers of the same cache, from which kernels' deaths and culls are told),
// serving on l; cfg reaches the cluster's API server (for --auth=kubernetes); reader, uncached, finds the reStructuredText renderer;
// agentKey derives the agents' tokens, as the manager derived them (no Secret is read). host, when not nil,
// brings this machine's kernel specs into every kernel spec answer. ready receives the URL to
// open (without the token) once GET /api/status answers.
// The API server registers its metrics with controller-runtime's registry: the process's
// metrics port (HTTPS, authorized through the Kubernetes API) serves them, and the API's own
// /metrics serves the controllers' too when they run in the same process.
func newAPIRunnable(f *apiFlags, cfg *rest.Config, c client.Client, informers cache.Informers, reader client.Reader, namespace string, agentKey []byte, u identity.User, host *kernelspecs.Host, l net.Listener, ready func(url string)) (*apiRunnable, error) {
	token, err := f.resolveToken()
	if err != nil {
		return nil, err
	}
	secret, err := cookieSecret(f.cookieSecretFile)
	if err != nil {
		return nil, err
	}
	store, err := f.contentsStore()
	if err != nil {
		return nil, err
	}
	log := ctrl.Log.WithName("apiserver")
	providers, err := f.auth.providers(token, u, kubeAuth{config: cfg, namespace: namespace}, log)
	if err != nil {
		return nil, err
	}
	// Readiness is asked with the token when it proves anyone; otherwise the public GET /api
	// tells that the server answers.
	readyToken := ""
	if f.auth.has(identity.KindToken) {
		readyToken = token
	}
	specs := &repository.KernelSpecs{Reader: c, Namespace: namespace, Host: host}
	// The users' ledgers: each start reserves room in its owner's before it creates anything,
	// reading around the cache after a write lost to another replica's.
	ledger := &quota.Ledger{Client: c, Reader: c, APIReader: reader, Namespace: namespace}
	kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: namespace, Agents: agentclient.New(), AgentTokenKey: agentKey, StartTimeout: f.kernelStartTimeout, Specs: specs, Quota: ledger,
		Homes: f.userHome, MakeHome: func(home string) error {
			view, err := store.Sub(home)
			if err != nil {
				return err
			}
			return view.Close()
		}}
	var terminals apiserver.TerminalService
	if f.terminals {
		terminals = &repository.Terminals{Kernels: kernels, APIReader: reader}
	}
	var peers func(context.Context) ([]string, error)
	if f.peersService != "" {
		peers = (&repository.Peers{Reader: c, Namespace: namespace, Service: f.peersService, Port: "http", Self: os.Getenv("POD_IP")}).Addresses
	}
	opts := apiserver.Options{
		BaseURL:            f.baseURL,
		PublicURL:          f.publicURL,
		TrustedProxies:     f.trustedProxies,
		Providers:          providers,
		CookieSecret:       secret,
		Contents:           store,
		Homes:              f.userHome,
		Kernels:            kernels,
		Sessions:           &repository.Sessions{Reader: c, Writer: c, Namespace: namespace, Kernels: kernels},
		Clusters:           &repository.Clusters{Reader: c, Writer: c, Namespace: namespace, Quota: ledger},
		Terminals:          terminals,
		TerminalKernelSpec: f.terminalKernelSpec,
		Quotas:             &repository.Quotas{Ledger: ledger, Specs: specs},
		KernelSpecs:        specs,
		RST:                &repository.RSTRenderers{Reader: reader, Namespace: namespace, Agents: agentclient.New(), AgentTokenKey: agentKey},
		DefaultKernelSpec:  f.defaultKernel,
		RateLimits:         &agentapi.RateLimits{MsgRate: f.iopubMsgRate, DataRate: f.iopubDataRate, Window: f.rateLimitWindow},
		MaxBodyBytes:       f.maxBody,
		BodyMemory:         f.bodyMemory,
		AdmissionWait:      f.admissionWait,
		ReadTimeout:        f.readTimeout,
		Peers:              peers,
		Version:            version,
		Metrics:            ctrlmetrics.Registry,
		Log:                log,
	}
	if informers != nil {
		opts.KernelEvents = &repository.KernelEvents{Informers: informers}
	}
	srv, err := apiserver.New(opts)
	if err != nil {
		return nil, err
	}
	base := apiserver.NormalizeBaseURL(f.baseURL)
	return &apiRunnable{server: srv, listener: l, ready: func(addr net.Addr) {
		host := addr.String()
		if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
			host = fmt.Sprintf("127.0.0.1:%d", tcp.Port)
		}
		go func() {
			url := "http://" + host + base
			if err := waitForStatus(url, readyToken); err != nil {
				ctrl.Log.Error(err, "The API server does not answer")
				return
			}
			ready(url)
		}()
	}}, nil
}

// apiRunnable serves the API as a controller-runtime manager runnable, on a listener bound
// before the manager starts, so that a port in use stops the start at once instead of after
// the caches have synced. Every replica serves, so it needs no leader election.
type apiRunnable struct {
	server   *apiserver.Server
	listener net.Listener
	// ready is called with the listening address once the server starts.
	ready func(addr net.Addr)
}

// Start serves until ctx ends.
func (r *apiRunnable) Start(ctx context.Context) error {
	r.ready(r.listener.Addr())
	return r.server.Serve(ctx, r.listener)
}

// NeedLeaderElection is false: all replicas serve.
func (r *apiRunnable) NeedLeaderElection() bool { return false }

// waitForStatus polls GET /api/status with the token until the server answers it (GET /api
// without a token).
func waitForStatus(base, token string) error {
	path := "api/status"
	if token == "" {
		path = "api"
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	return wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return false, err
		}
		if token != "" {
			req.Header.Set("Authorization", "token "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// localUser is who runs `nbkube local`: the machine's user, an admin of the local cluster.
func localUser() identity.User {
	name := "nbkube"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return identity.User{Name: name, Admin: true}
}
