package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/identity"
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(nbv1.AddToScheme(s))
	return s
}

func runManager(ctx context.Context, args []string) error {
	fs, logOpts := newFlagSet("manager")
	metricsAddr := fs.String("metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS, authenticated and authorized through the API server); 0 disables it")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	leaderElect := fs.Bool("leader-elect", false, "elect a leader among manager replicas, so that one reconciles at a time")
	leaderNamespace := fs.String("leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's own namespace)")
	namespace := fs.String("namespace", envOr("POD_NAMESPACE", "default"), "namespace of the users' kernels, sessions and clusters")
	var api apiFlags
	api.bind(fs, "")
	opts := builder.DefaultOptions()
	bindBuilderFlags(fs, &opts)
	var ctrlOpts controllers.Options
	bindCullFlags(fs, &ctrlOpts)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
	log := ctrl.Log.WithName("manager")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: newScheme(),
		Cache:  controllers.CacheOptions(),
		Metrics: metricsserver.Options{
			BindAddress:    *metricsAddr,
			SecureServing:  true,
			FilterProvider: filters.WithAuthenticationAndAuthorization,
			// HTTP/2 stays off: its rapid-reset and stream-cancellation weaknesses are not
			// worth it for a metrics endpoint.
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "nbkube-manager.nbkube.io",
		LeaderElectionNamespace: *leaderNamespace,
		// The leader steps down at once on shutdown instead of letting the lease expire.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	ctrlOpts.Builder = opts
	if err := controllers.SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return err
	}
	if api.listen != "" {
		if api.cookieSecretFile == "" {
			return fmt.Errorf("--cookie-secret-file is required with --listen: every replica must sign cookies alike")
		}
		runnable, err := newAPIRunnable(&api, mgr.GetClient(), *namespace, identity.User{Name: "admin", Admin: true}, nil, func(string) {
			log.Info("Jupyter API server ready", "listen", api.listen)
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(runnable); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting manager", "version", version)
	return mgr.Start(ctx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
