package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"math"
	"net"
	"os"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/scheme"
)

// runManager runs the controllers, and the Jupyter API server too when --listen is given (one
// process for small installs).
func runManager(ctx context.Context, args []string) error {
	fs, logOpts := newFlagSet("manager")
	common := bindOperatorFlags(fs)
	leaderElect := fs.Bool("leader-elect", false, "elect a leader among manager replicas, so that one reconciles at a time")
	leaderNamespace := fs.String("leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own namespace)")
	var api apiFlags
	api.bind(fs, "")
	agentKey := bindAgentKeyFlag(fs)
	opts := builder.DefaultOptions()
	bindBuilderFlags(fs, &opts)
	var ctrlOpts controllers.Options
	bindCullFlags(fs, &ctrlOpts)
	fs.BoolVar(&ctrlOpts.ClusterNetworkPolicies, "cluster-network-policies", false, "give each cluster's ipcontroller a NetworkPolicy that lets in only its engines and its owner's kernels (for networks that enforce policies; the chart sets it with networkPolicy.enabled)")
	var rst rstFlags
	bindRSTFlags(fs, &rst, &opts.RSTRenderer)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrlOpts.RSTRenderer = controllers.RSTRendererOptions{Namespace: common.namespace, Disabled: !rst.enabled, OwnerDeployment: rst.owner}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
	key, err := agentKey.managerKey(api.listen != "")
	if err != nil {
		return err
	}
	ctrlOpts.AgentTokenKey = key
	mgr, err := common.newManager(func(o *ctrl.Options) {
		o.LeaderElection = *leaderElect
		o.LeaderElectionID = "nbkube-manager.nbkube.io"
		o.LeaderElectionNamespace = *leaderNamespace
		// The leader steps down at once on shutdown instead of letting the lease expire.
		o.LeaderElectionReleaseOnCancel = true
	})
	if err != nil {
		return err
	}
	// Kernels made without a home (with kubectl) mount their owner's.
	opts.UserHome = api.userHome
	ctrlOpts.Builder = opts
	if err := controllers.SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return err
	}
	if api.listen != "" {
		if err := addAPIServer(mgr, &api, common.namespace, key); err != nil {
			return err
		}
	}
	ctrl.Log.WithName("manager").Info("Starting manager", "version", version)
	return mgr.Start(ctx)
}

// runAPIServer runs the Jupyter API server alone: any number of replicas, no controllers, and
// a service account that may touch only what the API needs.
func runAPIServer(ctx context.Context, args []string) error {
	fs, logOpts := newFlagSet("apiserver")
	common := bindOperatorFlags(fs)
	var api apiFlags
	api.bind(fs, ":8888")
	agentKey := bindAgentKeyFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if api.listen == "" {
		return fmt.Errorf("--listen must not be empty")
	}
	key, err := agentKey.read()
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
	mgr, err := common.newManager(nil)
	if err != nil {
		return err
	}
	if err := addAPIServer(mgr, &api, common.namespace, key); err != nil {
		return err
	}
	ctrl.Log.WithName("apiserver").Info("Starting API server", "version", version)
	return mgr.Start(ctx)
}

// operatorFlags are the settings the manager and the API server share.
type operatorFlags struct {
	metricsAddr, probeAddr, namespace string
	// qps and burst bound this process's requests to the Kubernetes API; 0 leaves no
	// client-side bound (controller-runtime's default), the API server's priority and
	// fairness deciding.
	qps   float64
	burst int
}

func bindOperatorFlags(fs *flag.FlagSet) *operatorFlags {
	f := &operatorFlags{}
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS, authenticated and authorized through the API server); 0 disables it")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "default"), "namespace of the users' kernels, sessions and clusters")
	fs.Float64Var(&f.qps, "kube-api-qps", 0,
		"requests per second this process may send the Kubernetes API on average; 0: no client-side limit (the API server's priority and fairness decides)")
	fs.IntVar(&f.burst, "kube-api-burst", 0, "requests it may send at once above --kube-api-qps; 0: twice --kube-api-qps")
	return f
}

// restConfig applies the client-side limits to cfg.
func (f *operatorFlags) restConfig(cfg *rest.Config) (*rest.Config, error) {
	if f.qps < 0 || f.burst < 0 || math.IsNaN(f.qps) || math.IsInf(f.qps, 0) {
		return nil, fmt.Errorf("--kube-api-qps and --kube-api-burst must be 0 or more")
	}
	if f.qps == 0 {
		return cfg, nil
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	if cfg.Burst == 0 {
		cfg.Burst = max(1, int(2*f.qps))
	}
	return cfg, nil
}

// newManager makes a controller-runtime manager with the shared settings; tune adjusts them.
func (f *operatorFlags) newManager(tune func(*ctrl.Options)) (manager.Manager, error) {
	cacheOpts := controllers.CacheOptions()
	// Only the one namespace is watched, so a namespaced Role is all the RBAC either needs.
	cacheOpts.DefaultNamespaces = map[string]cache.Config{f.namespace: {}}
	o := ctrl.Options{
		Scheme: scheme.New(),
		Cache:  cacheOpts,
		Metrics: metricsserver.Options{
			BindAddress:    f.metricsAddr,
			SecureServing:  true,
			FilterProvider: filters.WithAuthenticationAndAuthorization,
			// HTTP/2 stays off: its rapid-reset and stream-cancellation weaknesses are not
			// worth it for a metrics endpoint.
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		},
		HealthProbeBindAddress: f.probeAddr,
	}
	if tune != nil {
		tune(&o)
	}
	cfg, err := f.restConfig(ctrl.GetConfigOrDie())
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// addAPIServer adds the Jupyter API server to the manager; it runs on every replica, leader
// or not. agentKey is the installation's agent token key.
func addAPIServer(mgr manager.Manager, api *apiFlags, namespace string, agentKey []byte) error {
	if api.cookieSecretFile == "" {
		return fmt.Errorf("--cookie-secret-file is required with --listen: every replica must sign cookies alike")
	}
	l, err := net.Listen("tcp", api.listen)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("apiserver")
	runnable, err := newAPIRunnable(api, mgr.GetConfig(), mgr.GetClient(), mgr.GetCache(), mgr.GetAPIReader(), namespace, agentKey, identity.User{Name: "admin", Admin: true}, nil, l, func(string) {
		log.Info("Jupyter API server ready", "listen", api.listen)
	})
	if err != nil {
		l.Close()
		return err
	}
	return mgr.Add(runnable)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
