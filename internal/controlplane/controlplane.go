// Package controlplane runs a real Kubernetes control plane (etcd, kube-apiserver and,
// optionally, kube-controller-manager) as child processes with its state in one directory.
// It is the cluster of `nbkube local` and of the end-to-end tests: the binaries are the ones
// hack/build-k8s.sh builds, so controllers meet the same API machinery as in a real cluster.
package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	serviceCIDR = "10.0.0.0/24"
	// serviceIP is the first address of serviceCIDR, the `kubernetes` Service's.
	serviceIP = "10.0.0.1"

	startTimeout = 2 * time.Minute
	stopGrace    = 15 * time.Second
)

// apiServerEnv is kube-apiserver's environment. At rest its live heap is about 100 MiB and
// the collector, left to itself, lets the process grow to twice that before it collects;
// the soft limit makes it collect sooner, at the cost of more collections only once the heap
// nears it. It is soft: a heap that needs more gets it, with the collector busier.
var apiServerEnv = []string{"GOMEMLIMIT=160MiB"}

// controllers are the controllers of kube-controller-manager the control plane runs: those
// that nbkube and what users do through it rely on. The others (jobs, volumes, nodes,
// endpoints, quotas...) have nothing to act on here, and each costs memory for its informers
// and CPU for its periodic passes.
var controllers = []string{
	// The `default` service account, and tokens for the controllers' own accounts
	// (--use-service-account-credentials).
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	// The kube-root-ca.crt ConfigMap that pods mounting a service account token need.
	"root-ca-certificate-publisher-controller",
	// Deleting an owner deletes what it owns: Kernels' and Clusters' pods and secrets.
	"garbage-collector-controller",
	// The reStructuredText renderer is a Deployment.
	"deployment-controller",
	"replicaset-controller",
	// A deleted namespace is emptied and goes.
	"namespace-controller",
	// The aggregated roles (admin, edit, view) that RBAC bindings of users name.
	"clusterrole-aggregation-controller",
	// Pods of a node that no longer exists (a renamed --node-name) are deleted.
	"pod-garbage-collector-controller",
}

// apiGroups are the API group versions kube-apiserver serves, beside the CRDs' groups. Each
// group served costs the server memory that the collector scans at every collection (its
// storage, handlers and OpenAPI schemas: a fifth of the live heap for the twenty-odd groups
// nothing here uses), and the soft memory limit makes collections frequent under load. The
// groups left out are those of controllers the control plane does not run (Jobs,
// autoscaling, disruption budgets, certificate signing, dynamic resources) or of its own
// bookkeeping among several servers (storage versions, API Priority and Fairness, off).
var apiGroups = []string{
	// Pods, Secrets, ConfigMaps, PVCs, Services, namespaces, service accounts and tokens.
	"v1",
	// The reStructuredText renderer's Deployment.
	"apps/v1",
	// Users' roles and bindings (users.md), and kubectl auth can-i.
	"rbac.authorization.k8s.io/v1",
	"authentication.k8s.io/v1",
	"authorization.k8s.io/v1",
	// The manager's leader election.
	"coordination.k8s.io/v1",
	"events.k8s.io/v1",
	// Kernels' network policies; Service CIDRs and IP addresses, which the server itself
	// allocates from.
	"networking.k8s.io/v1",
	// The CRDs, and the aggregator that serves them beside the built-in groups (it follows
	// the built-in API server's endpoints through EndpointSlices).
	"apiextensions.k8s.io/v1",
	"apiregistration.k8s.io/v1",
	"discovery.k8s.io/v1",
	// What the default admission plugins read before they admit anything: admission
	// policies, priority classes, runtime classes and storage classes (which a kernel spec's
	// pod template may name).
	"admissionregistration.k8s.io/v1",
	"scheduling.k8s.io/v1",
	"node.k8s.io/v1",
	"storage.k8s.io/v1",
}

// KubeVersion is the Kubernetes release nbkube runs and tests against; hack/build-k8s.sh
// and the Makefile pin the same.
const KubeVersion = "v1.36.3"

// DefaultBinDir is where hack/build-k8s.sh puts the binaries: $NBKUBE_KUBE_BIN_DIR, else
// $KUBEBUILDER_ASSETS, else <cache>/nbkube/k8s/<version>/bin with the cache directory
// $NBKUBE_CACHE_DIR, $XDG_CACHE_HOME or ~/.cache, as the script computes it.
func DefaultBinDir(getenv func(string) string) string {
	for _, env := range []string{"NBKUBE_KUBE_BIN_DIR", "KUBEBUILDER_ASSETS"} {
		if dir := getenv(env); dir != "" {
			return dir
		}
	}
	cache := getenv("NBKUBE_CACHE_DIR")
	if cache == "" {
		base := getenv("XDG_CACHE_HOME")
		if base == "" {
			base = filepath.Join(getenv("HOME"), ".cache")
		}
		cache = filepath.Join(base, "nbkube")
	}
	return filepath.Join(cache, "k8s", KubeVersion, "bin")
}

// Config says where the binaries are and where the state lives.
type Config struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	BinDir string
	// DataDir holds the state: etcd's data, the PKI, logs and the admin kubeconfig. It
	// survives restarts; one control plane at a time may use it.
	DataDir string
	// ControllerManager also runs kube-controller-manager (Deployments, garbage collection,
	// service accounts). Without it the ServiceAccount admission plugin is off, as in envtest.
	ControllerManager bool
	// BeforeControllerManager, when set, runs once the API server is ready and before
	// kube-controller-manager starts: CRDs installed here are watched by its garbage collector
	// from the start, rather than after its next discovery round (up to 30 s later).
	BeforeControllerManager func(ctx context.Context, cfg *rest.Config) error
	// UnsafeNoFsync makes etcd skip fsync: for throw-away test clusters only.
	UnsafeNoFsync bool
	// AsClusters runs kube-apiserver as clusters run it, for measurements at scale: with its
	// watch cache (lists and watches served from memory), every API group and no soft memory
	// limit. Without it the server is trimmed for one user's kernels at rest, as nbkube local
	// runs it (see startAPIServer, apiGroups and apiServerEnv).
	AsClusters bool
	// AllAPIGroups serves every API group, as clusters do (AsClusters does too), and is
	// otherwise nbkube local's server: for tests that stand for a cluster.
	AllAPIGroups bool
	// Progress receives one line per step for people watching; nil discards.
	Progress io.Writer
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	cfg        Config
	procs      []*process // in start order
	lock       *os.File
	restConfig *rest.Config
	kubeconfig string
}

// ports are the loopback ports the control plane listens on, kept across restarts so that
// etcd's member URLs and users' kubeconfigs stay valid.
type ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
}

// Start brings the control plane up and returns once the API server is ready (and, with the
// controller manager, once service accounts exist). On error nothing is left running.
func Start(ctx context.Context, cfg Config) (cp *ControlPlane, err error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	for _, bin := range cfg.binaries() {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (build it with hack/build-k8s.sh): %w", bin, cfg.BinDir, err)
		}
	}
	for _, d := range []string{cfg.DataDir, cfg.dir("logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// started is stopped on error through its own variable: `return nil, err` has set cp to
	// nil by the time deferred calls run.
	started := &ControlPlane{cfg: cfg, lock: lock, kubeconfig: filepath.Join(cfg.DataDir, "kubeconfig")}
	cp = started
	defer func() {
		if err != nil {
			_ = started.Stop()
			cp = nil
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	ca, err := ensurePKI(cfg.dir("pki"))
	if err != nil {
		return nil, err
	}
	p, err := cfg.choosePorts()
	if err != nil {
		return nil, err
	}
	if err := cp.startEtcd(ctx, p, ca); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, p); err != nil {
		return nil, err
	}
	if cfg.BeforeControllerManager != nil {
		if err := cfg.BeforeControllerManager(ctx, cp.RESTConfig()); err != nil {
			return nil, err
		}
	}
	if cfg.ControllerManager {
		if err := cp.startControllerManager(ctx, p); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// RESTConfig is a cluster-admin client configuration.
func (c *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// KubeconfigPath is the admin kubeconfig, for kubectl.
func (c *ControlPlane) KubeconfigPath() string { return c.kubeconfig }

// LogDir holds one log file per control-plane process.
func (c *ControlPlane) LogDir() string { return c.cfg.dir("logs") }

// Stop stops the processes in reverse start order and releases the data directory.
func (c *ControlPlane) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].stop(stopGrace))
	}
	c.procs = nil
	if c.lock != nil {
		errs = append(errs, c.lock.Close())
		c.lock = nil
	}
	return errors.Join(errs...)
}

func (cfg Config) dir(elem ...string) string {
	return filepath.Join(append([]string{cfg.DataDir}, elem...)...)
}

func (cfg Config) binaries() []string {
	b := []string{"etcd", "kube-apiserver"}
	if cfg.ControllerManager {
		b = append(b, "kube-controller-manager")
	}
	return b
}

// lockDir makes sure that one control plane at a time uses a data directory; the lock goes
// with the process, however it ends.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another nbkube: %w", dir, err)
	}
	return f, nil
}

// choosePorts reuses the ports of the last run where they are still free.
func (cfg Config) choosePorts() (ports, error) {
	path := cfg.dir("ports.json")
	var p ports
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &p); err != nil {
			return p, fmt.Errorf("%s: %w", path, err)
		}
	}
	taken := map[int]bool{}
	for _, port := range []*int{&p.EtcdClient, &p.EtcdPeer, &p.APIServer} {
		if *port == 0 || taken[*port] || !portFree(*port) {
			free, err := freePort(taken)
			if err != nil {
				return p, err
			}
			*port = free
		}
		taken[*port] = true
	}
	data, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	return p, writeFileAtomic(path, data)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort(taken map[int]bool) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !taken[port] {
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port")
}

func (c *ControlPlane) start(name string, args, env []string) (*process, error) {
	p, err := startProcess(name, filepath.Join(c.cfg.BinDir, name), args, env, c.LogDir())
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *ControlPlane) progress(format string, args ...any) {
	fmt.Fprintf(c.cfg.Progress, format+"\n", args...)
}

func (c *ControlPlane) startEtcd(ctx context.Context, p ports, ca *keyPair) error {
	pki := c.cfg.dir("pki")
	client := fmt.Sprintf("https://127.0.0.1:%d", p.EtcdClient)
	peer := fmt.Sprintf("http://127.0.0.1:%d", p.EtcdPeer)
	args := []string{
		"--name=nbkube",
		"--data-dir=" + c.cfg.dir("etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=nbkube=" + peer,
		// Only holders of a certificate from our CA (the API server) may talk to etcd: on a
		// shared machine a plain loopback port would hand every user the cluster's secrets.
		"--client-cert-auth",
		"--trusted-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--cert-file=" + filepath.Join(pki, "etcd-server.crt"),
		"--key-file=" + filepath.Join(pki, "etcd-server.key"),
		"--listen-metrics-urls=",
		"--log-level=warn",
		// One member has no peer to send heartbeats to, yet raft still ticks at every
		// heartbeat interval (100 ms by default): slower ticks halve etcd's CPU at rest. The
		// election timeout keeps the ratio etcd requires, and a single member elects itself at
		// start without waiting for it.
		"--heartbeat-interval=500",
		"--election-timeout=5000",
	}
	if c.cfg.UnsafeNoFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	started := time.Now()
	c.progress("starting etcd")
	proc, err := c.start("etcd", args, nil)
	if err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}
	defer httpClient.CloseIdleConnections()
	err = c.waitFor(ctx, proc, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"health":"true"`)), nil
	})
	if err != nil {
		return err
	}
	c.progress("etcd ready in %s", time.Since(started).Round(10*time.Millisecond))
	return nil
}

func (c *ControlPlane) startAPIServer(ctx context.Context, p ports) error {
	pki := c.cfg.dir("pki")
	f := func(name string) string { return filepath.Join(pki, name) }
	args := []string{
		fmt.Sprintf("--etcd-servers=https://127.0.0.1:%d", p.EtcdClient),
		"--etcd-cafile=" + f("ca.crt"),
		"--etcd-certfile=" + f("apiserver-etcd-client.crt"),
		"--etcd-keyfile=" + f("apiserver-etcd-client.key"),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", p.APIServer),
		"--tls-cert-file=" + f("apiserver.crt"),
		"--tls-private-key-file=" + f("apiserver.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		// The `kubernetes` Endpoints reject loopback addresses; nothing here needs them.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--cert-dir=" + c.cfg.dir("pki", "apiserver-generated"),
		// API Priority and Fairness shares the server among tenants; here there is one, and
		// its configuration objects and their controller cost memory and a steady trickle of
		// CPU. The plain limits of in-flight requests (400 reads, 200 writes) apply instead.
		"--enable-priority-and-fairness=false",
		// The watch cache keeps every object of every resource in memory a second time and
		// sends each watcher a bookmark every few seconds, which is most of the server's CPU at
		// rest. Without it lists and watches are served by etcd itself, as consistent as
		// before; a cluster of one user's kernels is small enough for that.
		fmt.Sprintf("--watch-cache=%t", c.cfg.AsClusters),
		// Both polls of etcd feed metrics only (objects per resource every minute, the
		// database's size every 30 s), and nobody scrapes them here.
		"--etcd-count-metric-poll-period=0",
		"--etcd-db-metric-poll-interval=0",
		// The server's identity Lease (renewed every 10 s, an etcd write each time) serves
		// coordination among several API servers, as does the proxy to peers of another
		// version that depends on it; there is one server here.
		"--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false",
	}
	if !c.cfg.AsClusters && !c.cfg.AllAPIGroups {
		args = append(args, "--runtime-config=api/all=false,"+strings.Join(apiGroups, "=true,")+"=true")
	}
	if !c.cfg.ControllerManager {
		// Without the controller manager no `default` service account ever appears, and the
		// admission plugin would refuse every pod.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	started := time.Now()
	c.progress("starting kube-apiserver")
	env := apiServerEnv
	if c.cfg.AsClusters {
		env = nil
	}
	proc, err := c.start("kube-apiserver", args, env)
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", p.APIServer)
	if err := c.writeKubeconfig(c.kubeconfig, server, "admin"); err != nil {
		return err
	}
	c.restConfig, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	c.restConfig.QPS, c.restConfig.Burst = 200, 400
	clientset, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return err
	}
	err = c.waitFor(ctx, proc, func(ctx context.Context) (bool, error) {
		var status int
		res := clientset.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		return res.Error() == nil && status == http.StatusOK, nil
	})
	if err != nil {
		return err
	}
	c.progress("kube-apiserver ready in %s at %s", time.Since(started).Round(10*time.Millisecond), server)
	return nil
}

func (c *ControlPlane) startControllerManager(ctx context.Context, p ports) error {
	pki := c.cfg.dir("pki")
	kubeconfig := c.cfg.dir("controller-manager.kubeconfig")
	if err := c.writeKubeconfig(kubeconfig, fmt.Sprintf("https://127.0.0.1:%d", p.APIServer), "controller-manager"); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		// Each controller gets its own service account, as kubeadm sets it up: the controller
		// manager's identity only has the rights to mint their tokens.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
		"--root-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--cluster-cidr=",
		"--allocate-node-cidrs=false",
		"--secure-port=0",
		"--profiling=false",
		"--controllers=" + strings.Join(controllers, ","),
	}
	started := time.Now()
	c.progress("starting kube-controller-manager")
	proc, err := c.start("kube-controller-manager", args, nil)
	if err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return err
	}
	// Pods can be created once the service-account controller has made `default`.
	err = c.waitFor(ctx, proc, func(ctx context.Context) (bool, error) {
		_, err := clientset.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	c.progress("kube-controller-manager ready in %s", time.Since(started).Round(10*time.Millisecond))
	return nil
}

// waitFor polls cond until it holds, the process dies (with the tail of its log in the
// error) or ctx ends.
func (c *ControlPlane) waitFor(ctx context.Context, proc *process, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, exitErr := proc.exited(); done {
			return false, fmt.Errorf("%s exited (%w); its log ends with:\n%s", proc.name, exitErr, c.logTail(proc.name))
		}
		return cond(ctx)
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s not ready: %w; its log ends with:\n%s", proc.name, err, c.logTail(proc.name))
	}
	return err
}

func (c *ControlPlane) logTail(name string) string {
	data, err := os.ReadFile(filepath.Join(c.LogDir(), name+".log"))
	if err != nil {
		return err.Error()
	}
	const max = 3000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// writeKubeconfig writes a kubeconfig for the client certificate pki/<user>.crt, with the
// credentials embedded so the file works wherever it is copied.
func (c *ControlPlane) writeKubeconfig(path, server, user string) error {
	read := func(name string) ([]byte, error) { return os.ReadFile(c.cfg.dir("pki", name)) }
	caData, err := read("ca.crt")
	if err != nil {
		return err
	}
	certData, err := read(user + ".crt")
	if err != nil {
		return err
	}
	keyData, err := read(user + ".key")
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nbkube"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certData, ClientKeyData: keyData}
	cfg.Contexts["nbkube"] = &clientcmdapi.Context{Cluster: "nbkube", AuthInfo: user}
	cfg.CurrentContext = "nbkube"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data)
}
