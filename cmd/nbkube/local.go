package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/controlplane"
	"github.com/nbkube/nbkube/internal/crds"
	"github.com/nbkube/nbkube/internal/jpserver"
	"github.com/nbkube/nbkube/internal/kernelspecs"
	"github.com/nbkube/nbkube/internal/localnode"
	"github.com/nbkube/nbkube/internal/scheme"
)

// runLocal is the embedded default: a real control plane, the controllers and a local node
// that runs pods as processes of this machine, all in this process, with state that survives
// a restart.
func runLocal(ctx context.Context, args []string) error {
	fs, logOpts := newFlagSet("local")
	dataDir := fs.String("data-dir", ".nbkube", "directory of the state (cluster data, kubeconfig, pod directories)")
	listenDefault, retriesDefault, err := localListenDefaults(os.Getenv)
	if err != nil {
		return err
	}
	var api apiFlags
	api.bind(fs, listenDefault)
	agentKey := bindAgentKeyFlag(fs)
	portRetries := fs.Int("port-retries", retriesDefault, "how many ports after the default one to try when it is taken, Jupyter's port_retries (with --listen: none unless given)")
	root := &api.root
	binDir := fs.String("kube-bin-dir", controlplane.DefaultBinDir(os.Getenv), "directory with etcd, kube-apiserver and kube-controller-manager (hack/build-k8s.sh builds them)")
	namespace := fs.String("namespace", "default", "namespace of the kernel specs, kernels and sessions")
	nodeName := fs.String("node-name", "nbkube-local", "name of the local node")
	var sandbox sandboxMode
	fs.Var(&sandbox, "sandbox", "run every pod in Linux namespaces of its own, built without privileges: it sees its volumes, the system's directories read-only, its own processes and its own network (see docs/local.md); auto: when --auth has a provider besides the token, which refuses to start where sandboxes cannot be made")
	forkServer := fs.Bool("kernel-fork-server", true, "fork Python kernels from a process that imported ipykernel once (starts in milliseconds; see docs/local.md), rather than start a new interpreter for each")
	var ctrlOpts controllers.Options
	bindCullFlags(fs, &ctrlOpts)
	rstOpts := builder.DefaultRSTRendererOptions()
	// The local node runs the renderer as a process of this machine, with its python3.
	rstOpts.Python = []string{"python3", "/usr/bin/python3"}
	var rst rstFlags
	bindRSTFlags(fs, &rst, &rstOpts)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "nbkube: "+format+"\n", args...) }

	if *dataDir, err = filepath.Abs(*dataDir); err != nil {
		return err
	}
	if *root, err = filepath.Abs(*root); err != nil {
		return err
	}
	if st, err := os.Stat(*root); err != nil || !st.IsDir() {
		return fmt.Errorf("contents root %s is not a directory", *root)
	}
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return err
	}
	// The controllers and the API server share the process, and the key: kept in the data
	// directory unless given, so that kernels outlive a restart.
	if agentKey.file == "" {
		agentKey.file = filepath.Join(*dataDir, agentKeyFileName)
	}
	key, err := readOrMakeAgentKey(agentKey.file)
	if err != nil {
		return err
	}
	ctrlOpts.AgentTokenKey = key
	self, err := os.Executable()
	if err != nil {
		return err
	}
	agentHostDir, err := agentDir(self)
	if err != nil {
		return err
	}
	var listener net.Listener
	if api.listen != "" {
		if api.token, err = api.resolveToken(); err != nil {
			return err
		}
		if listener, err = listenLocal(fs, api.listen, *portRetries, progress); err != nil {
			return err
		}
		defer listener.Close()
	}

	started := time.Now()
	progress("starting the control plane in %s", *dataDir)
	cp, err := controlplane.Start(ctx, controlplane.Config{
		BinDir: *binDir, DataDir: *dataDir, ControllerManager: true, Progress: prefixed{},
		BeforeControllerManager: func(ctx context.Context, cfg *rest.Config) error {
			if err := crds.Install(ctx, cfg); err != nil {
				return err
			}
			progress("custom resources installed")
			return nil
		},
	})
	if err != nil {
		return err
	}
	defer func() {
		progress("stopping the control plane")
		if err := cp.Stop(); err != nil {
			progress("stopping the control plane: %v", err)
		}
	}()
	cfg := cp.RESTConfig()

	kinds := scheme.New()
	c, err := client.New(cfg, client.Options{Scheme: kinds})
	if err != nil {
		return err
	}
	host := &kernelspecs.Host{Client: c, Namespace: *namespace, Dirs: kernelspecs.Dirs(os.Getenv), Python: []string{"python3", "/usr/bin/python3"}}
	if err := installHostKernelSpecs(ctx, host, progress); err != nil {
		return err
	}

	opts := builder.DefaultOptions()
	// The local node ignores images; names that say so make `kubectl get pods -o yaml` honest.
	opts.AgentImage, opts.DefaultKernelImage, opts.DefaultClusterImage = "nbkube.local/nbkube:"+version, "nbkube.local/host:local", "nbkube.local/host:local"
	// The local node has no Services: engines and kernels find an ipcontroller at its pod IP.
	opts.ClusterControllerByPodIP = true
	// Dask schedulers serve their dashboards where this process's API server proxies them.
	opts.DaskDashboardBase = apiserver.NormalizeBaseURL(api.baseURL)
	// Kernel pods run the nbkube-agent where it lies, without copying it.
	opts.AgentHostDir = agentHostDir
	opts.RSTRenderer = rstOpts
	// Off unless asked: one person's laptop has one home, the contents root.
	opts.UserHome = api.userHome
	ctrlOpts.RSTRenderer = controllers.RSTRendererOptions{Namespace: *namespace, Disabled: !rst.enabled}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 kinds,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	ctrlOpts.Builder = opts
	// A node that sandboxes enforces NetworkPolicies: each cluster's ipcontroller gets its own.
	sandboxed := sandbox.enabled(api.auth.multiUser())
	ctrlOpts.ClusterNetworkPolicies = sandboxed
	if err := controllers.SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	node, err := localnode.New(clientset, localnode.Config{
		NodeName:         *nodeName,
		DataDir:          filepath.Join(*dataDir, "node"),
		ClaimDirs:        map[string]string{opts.ContentsClaim: *root},
		SelfExecutable:   self,
		KernelForkServer: forkServerPython(ctx, c, *namespace, *forkServer),
		Sandbox:          sandboxed,
	})
	if err != nil {
		return err
	}
	if err := checkIsolation(sandbox, api.auth.multiUser(), node.CheckSandbox, progress); err != nil {
		return err
	}
	if sandboxed {
		if err := applyLocalNetworkPolicies(ctx, c, *namespace); err != nil {
			return err
		}
	}
	if err := mgr.Add(node); err != nil {
		return err
	}
	urls := make(chan string, 1)
	if api.listen != "" {
		if api.cookieSecretFile == "" {
			api.cookieSecretFile = filepath.Join(*dataDir, "cookie_secret")
		}
		runnable, err := newAPIRunnable(&api, cfg, mgr.GetClient(), mgr.GetCache(), mgr.GetAPIReader(), *namespace, key, localUser(), host, listener, func(url string) { urls <- url })
		if err != nil {
			return err
		}
		if err := mgr.Add(runnable); err != nil {
			return err
		}
	}

	mgrCtx, stopMgr := context.WithCancel(ctx)
	defer stopMgr()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	if !mgr.GetCache().WaitForCacheSync(mgrCtx) {
		return errors.Join(errors.New("caches did not sync"), <-done)
	}
	url := ""
	if api.listen != "" {
		select {
		case url = <-urls:
		case err := <-done:
			return err
		}
	}
	fmt.Printf("nbkube local is ready (%s): contents %s, namespace %s\n", time.Since(started).Round(10*time.Millisecond), *root, *namespace)
	if url != "" {
		fmt.Printf("  Jupyter API: %s?token=%s\n", url, api.token)
		// Jupyter's tools (`jupyter server list`, editors) find running servers by this file.
		if path, err := writeRuntimeFile(&api, url, listener.Addr()); err != nil {
			progress("no Jupyter runtime file: %v", err)
		} else {
			defer func() {
				if err := jpserver.Remove(path); err != nil {
					progress("removing the Jupyter runtime file: %v", err)
				}
			}()
		}
	}
	fmt.Printf("  kubectl --kubeconfig %s get kernelspecs,kernels,sessions,clusters\n", cp.KubeconfigPath())
	err = <-done
	progress("controllers and local node stopped")
	return err
}

func installHostKernelSpecs(ctx context.Context, host *kernelspecs.Host, progress func(string, ...any)) error {
	names, _, err := host.Refresh(ctx)
	if err != nil {
		progress("kernel specs: %v", err)
	}
	if len(names) == 0 {
		progress("no Jupyter kernel found on this machine (install one, e.g. apt-get install python3-ipykernel)")
		return nil
	}
	progress("kernel specs from this machine: %v", names)
	return nil
}

// prefixed writes the control plane's progress lines as nbkube's.
type prefixed struct{}

func (prefixed) Write(p []byte) (int, error) {
	fmt.Fprintf(os.Stderr, "nbkube: %s", p)
	return len(p), nil
}

// forkServerPython is the interpreter of the local node's kernel fork server: the one the
// "python3" kernel spec runs (from this machine's kernel.json, or the python3 found with
// ipykernel), when it runs ipykernel_launcher; empty when off or there is none.
func forkServerPython(ctx context.Context, c client.Client, namespace string, on bool) string {
	if !on {
		return ""
	}
	var ks nbv1.KernelSpec
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "python3"}, &ks); err != nil {
		return ""
	}
	if !agentapi.IPyKernelCommand(ks.Spec.Argv) {
		return ""
	}
	p, err := exec.LookPath(ks.Spec.Argv[0])
	if err != nil {
		return ""
	}
	return p
}
