package localnode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nbkube/nbkube/internal/podns"
)

// Defaults of Config.
const (
	DefaultNodeName         = "nbkube-local"
	DefaultKubeletVersion   = "v1.36.3"
	DefaultCrashLoopBackOff = 10 * time.Second
	// DefaultVolumeResync is Config.VolumeResync's default, the kubelet's sync period.
	DefaultVolumeResync = time.Minute
)

// maxBackOffFactor caps the crash-loop back-off at this multiple of its base: the kubelet's
// 10 s grows to at most 5 min.
const maxBackOffFactor = 30

// eventComponent is the source of the node's events, in place of "kubelet" and
// "default-scheduler".
const eventComponent = "nbkube-local-node"

// Config configures a Node. Every field but DataDir has a default.
type Config struct {
	// NodeName is the name of the Node object; default "nbkube-local".
	NodeName string
	// DataDir holds a directory per pod (DataDir/pods/<namespace>_<name>_<uid>/ with volumes/ and
	// logs/) and the directories of PersistentVolumeClaims not in ClaimDirs
	// (DataDir/volumes/<namespace>/<claim>/). Required.
	DataDir string
	// ClaimDirs maps a PersistentVolumeClaim, as "namespace/claim" or just "claim", to the host
	// directory behind it, such as the contents root the user serves.
	ClaimDirs map[string]string
	// SelfExecutable runs for containers whose command[0] has the base name "nbkube", so that pods
	// made for the nbkube image run this binary (and the nbkube-agent beside it for
	// "nbkube-agent"); default os.Executable().
	SelfExecutable string
	// Clock drives the node's timers and timestamps; default the real clock. (Probe timeouts run
	// on real time: they bound real network and process I/O.)
	Clock clock.WithTicker
	// KubeletVersion is reported in the Node's nodeInfo; default "v1.36.3".
	KubeletVersion string
	// CrashLoopBackOff is the first wait before restarting a container that failed again; it
	// doubles with each failure up to 30 times its value (the kubelet's 10 s up to 5 min).
	// Default 10 s; tests shorten it.
	CrashLoopBackOff time.Duration
	// VolumeResync is how often the Secret, ConfigMap and downward API volumes of running pods
	// are computed again, as the kubelet's periodic sync does: from the node's cache, writing
	// only the files that changed. A change to a Secret or ConfigMap reaches the volumes of the
	// pods that mount it at once, without waiting for this. Default 1 min.
	VolumeResync time.Duration
	// AddressLockDir holds a lock file per pod IP in use, shared by every nbkube on the machine so
	// that they never hand out the same address; default <os.TempDir()>/nbkube-pod-ips.
	AddressLockDir string
	// KernelForkServer, when set, is the Python interpreter of the node's kernel fork server:
	// kernels of the form `<that python> -m ipykernel_launcher ...` are forked from a process
	// that imported ipykernel once, rather than started as new interpreters (see
	// forkserver.py). Empty: every kernel starts its own interpreter.
	KernelForkServer string
	// Sandbox runs each container in Linux namespaces of its own, built without privileges
	// (see internal/podns): it sees its volumes at their mount paths and the system's
	// directories read-only, its own processes only, and a network of its own into which the
	// node forwards its declared ports. Off: containers are processes of the host.
	Sandbox bool
	// SandboxDNS are the name servers (host:port) that the DNS inside each sandbox relays
	// to; default those of the machine's /etc/resolv.conf.
	SandboxDNS []string
}

// Node is a local node: the scheduler and kubelet of a one-node cluster whose containers are
// host processes. See the package documentation for what it does not enforce.
type Node struct {
	client    kubernetes.Interface
	cfg       Config
	hostEnv   hostEnv
	resolver  hostResolver
	capacity  corev1.ResourceList
	info      corev1.NodeSystemInfo
	addresses *addressPool
	started   atomic.Bool
	// forkServer is the kernel fork server, nil when off.
	forkServer *forkServer
	// network carries the connections of sandboxed pods; nil unless the node sandboxes.
	network *podNetwork
	// spawner starts the sandboxes; nil unless the node sandboxes.
	spawner *podns.Spawner
	// ownUsers: each sandbox runs as a user of the machine of its own (see
	// decideSandboxUsers); set once, before the node runs pods.
	ownUsers bool
	// routeOut: sandboxes get a route out for every protocol (routeout.go); set once,
	// before the node runs pods.
	routeOut bool

	// recorder is set by Start before anything that records events runs.
	recorder record.EventRecorder
	// secrets and configMaps are the node's cache of those objects, set by Start before any
	// pod worker runs (the kubelet's "Watch" change detection strategy).
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister

	mu       sync.Mutex
	stopping bool
	workers  map[types.UID]*podWorker
	running  sync.WaitGroup
}

var _ manager.LeaderElectionRunnable = (*Node)(nil)

// New returns a Node that talks to the API server through client. It reads the facts it
// reports about the host (CPUs, memory, kernel, OS) and the PATH and HOME that containers
// inherit now, once.
func New(client kubernetes.Interface, cfg Config) (*Node, error) {
	if client == nil {
		return nil, errors.New("localnode: a client is required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("localnode: Config.DataDir is required")
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("localnode: resolving the data directory: %w", err)
	}
	cfg.DataDir = dataDir
	if err := os.MkdirAll(filepath.Join(dataDir, "pods"), 0o755); err != nil {
		return nil, fmt.Errorf("localnode: creating the data directory: %w", err)
	}
	if cfg.NodeName == "" {
		cfg.NodeName = DefaultNodeName
	}
	if cfg.SelfExecutable == "" {
		if cfg.SelfExecutable, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("localnode: finding the nbkube executable: %w", err)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.KubeletVersion == "" {
		cfg.KubeletVersion = DefaultKubeletVersion
	}
	if cfg.CrashLoopBackOff <= 0 {
		cfg.CrashLoopBackOff = DefaultCrashLoopBackOff
	}
	if cfg.VolumeResync <= 0 {
		cfg.VolumeResync = DefaultVolumeResync
	}
	if cfg.AddressLockDir == "" {
		cfg.AddressLockDir = filepath.Join(os.TempDir(), "nbkube-pod-ips")
	}
	n := &Node{
		client:  client,
		cfg:     cfg,
		hostEnv: hostEnv{path: os.Getenv("PATH"), home: os.Getenv("HOME")},
		resolver: hostResolver{
			self:     cfg.SelfExecutable,
			lookPath: exec.LookPath,
			exists: func(p string) bool {
				_, err := os.Stat(p)
				return err == nil
			},
		},
		capacity:  hostCapacity(dataDir),
		info:      systemInfo(cfg.KubeletVersion),
		addresses: newAddressPool(cfg.AddressLockDir),
		workers:   map[types.UID]*podWorker{},
	}
	if cfg.KernelForkServer != "" {
		opts := ForkServerOptions{Python: cfg.KernelForkServer, Dir: filepath.Join(dataDir, "forkserver"), SandboxedOnly: cfg.Sandbox}
		if cfg.Sandbox && os.Geteuid() == 0 {
			opts.SandboxIDs = [2]uint32{sandboxIDBase, sandboxIDCount}
		}
		n.forkServer = newForkServer(opts)
	}
	if cfg.Sandbox {
		dns := cfg.SandboxDNS
		if len(dns) == 0 {
			dns = machineNameServers("/etc/resolv.conf")
		}
		n.network = newPodNetwork(dns)
		n.spawner = podns.NewSpawner(n.sandboxInit())
	}
	return n, nil
}

// NeedLeaderElection is false: the node runs in every nbkube process that has one, like a kubelet
// on every machine.
func (n *Node) NeedLeaderElection() bool { return false }

// Start registers the node and runs it until ctx is done: it binds pods to itself and runs the
// pods bound to it. On the way out it stops every pod's processes (SIGTERM, the pod's grace
// period, SIGKILL) and returns; pod directories stay for the next run, which starts the pods
// again (or fails those with restartPolicy Never). Start may be called once.
func (n *Node) Start(ctx context.Context) error {
	if !n.started.CompareAndSwap(false, true) {
		return errors.New("localnode: Start called twice")
	}
	logger := log.FromContext(ctx).WithName("localnode").WithValues("node", n.cfg.NodeName)
	ctx = log.IntoContext(ctx, logger)

	if n.spawner != nil {
		// Last of all, once no pod starts.
		defer n.spawner.Close()
	}
	if !n.register(ctx) {
		return nil // ctx ended before the API server took the node
	}
	if n.cfg.Sandbox {
		n.decideSandboxUsers(logger)
		n.decideRouteOut(logger)
	}
	// The fork server outlives the pods: stopping them lets each agent shut its kernel down.
	forkCtx, stopForks := context.WithCancel(log.IntoContext(context.WithoutCancel(ctx), logger))
	var forks sync.WaitGroup
	defer forks.Wait()
	defer stopForks()
	if f := n.forkServer; f != nil {
		ln, err := f.listen()
		if err != nil {
			logger.Error(err, "Kernel fork server off; kernels start their own interpreters")
		} else {
			n.hostEnv.forkServer = f.socket
			forks.Go(func() { f.serve(forkCtx, ln) })
		}
	}

	// The core/v1 recorder the kubelet uses rather than events.k8s.io: its events carry
	// source.component, which is what kubectl describe and the controllers that re-emit a
	// child pod's events onto its owner read, so this node's events look like a kubelet's.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.client.CoreV1().Events("")})
	n.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent, Host: n.cfg.NodeName})

	// Secrets and ConfigMaps before pods: a worker reads its pod's from the cache, and a change to
	// one refreshes the volumes of the pods that mount it.
	objects := informers.NewSharedInformerFactory(n.client, 0)
	for _, inf := range []cache.SharedIndexInformer{objects.Core().V1().Secrets().Informer(), objects.Core().V1().ConfigMaps().Informer()} {
		if _, err := inf.AddEventHandler(n.objectHandler()); err != nil {
			return fmt.Errorf("localnode: watching secrets and configmaps: %w", err)
		}
	}
	n.secrets, n.configMaps = objects.Core().V1().Secrets().Lister(), objects.Core().V1().ConfigMaps().Lister()
	if n.network != nil {
		n.network.log = logger.WithName("network")
		if err := n.network.watch(objects); err != nil {
			return fmt.Errorf("localnode: watching network policies, services and namespaces: %w", err)
		}
	}
	objects.Start(ctx.Done())
	defer objects.Shutdown()
	objects.WaitForCacheSync(ctx.Done())

	assigned := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.cfg.NodeName).String()
		}))
	if _, err := assigned.Core().V1().Pods().Informer().AddEventHandler(n.podHandler(ctx)); err != nil {
		return fmt.Errorf("localnode: watching the node's pods: %w", err)
	}

	// The same selector as kube-scheduler's: pods not bound yet and not finished.
	unassigned := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.nodeName=,status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
		}))
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Clock: n.cfg.Clock})
	pending := unassigned.Core().V1().Pods()
	if _, err := pending.Informer().AddEventHandler(schedulingHandler(queue)); err != nil {
		return fmt.Errorf("localnode: watching unscheduled pods: %w", err)
	}
	// The node itself, as kube-scheduler caches nodes: placing a pod reads its labels from the
	// cache, and a change of them sends the pods still waiting back to the queue.
	self := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", n.cfg.NodeName).String()
		}))
	if _, err := self.Core().V1().Nodes().Informer().AddEventHandler(nodeChangeHandler(queue, pending.Lister())); err != nil {
		return fmt.Errorf("localnode: watching the node: %w", err)
	}
	self.Start(ctx.Done())
	defer self.Shutdown()
	self.WaitForCacheSync(ctx.Done())

	assigned.Start(ctx.Done())
	unassigned.Start(ctx.Done())
	var loops sync.WaitGroup
	defer func() {
		queue.ShutDown()
		loops.Wait()
		// Shutdown waits for the informers' handlers, so no worker starts after this.
		assigned.Shutdown()
		unassigned.Shutdown()
		n.mu.Lock()
		n.stopping = true
		n.mu.Unlock()
		n.running.Wait()
		logger.Info("Local node stopped")
	}()
	// Either synced or ctx ended; once synced, every pod bound to the node has its worker.
	assigned.WaitForCacheSync(ctx.Done())
	unassigned.WaitForCacheSync(ctx.Done())
	logger.Info("Local node running", "dataDir", n.cfg.DataDir)

	loops.Go(func() { n.heartbeat(ctx) })
	if n.network != nil {
		loops.Go(func() { n.network.run(ctx) })
	}
	s := &scheduler{node: n, queue: queue, lister: pending.Lister(), nodes: self.Core().V1().Nodes().Lister()}
	for range schedulerWorkers {
		loops.Go(func() {
			for s.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	return nil
}

// podHandler dispatches the node's pods to their workers, one per pod UID.
func (n *Node) podHandler(ctx context.Context) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podSeen(ctx, obj) },
		UpdateFunc: func(_, obj any) { n.podSeen(ctx, obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			n.mu.Lock()
			w := n.workers[pod.UID]
			n.mu.Unlock()
			if w != nil {
				w.deliverGone()
			}
		},
	}
}

func (n *Node) podSeen(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		return
	}
	w := n.workers[pod.UID]
	if w == nil {
		w = newPodWorker(n, pod)
		n.workers[pod.UID] = w
		n.running.Go(func() {
			w.run(ctx)
			n.mu.Lock()
			delete(n.workers, pod.UID)
			n.mu.Unlock()
		})
	}
	w.deliver(pod)
}

// objectHandler tells the workers of the pods that refer to a Secret or ConfigMap that it was
// created, changed or deleted.
func (n *Node) objectHandler() cache.ResourceEventHandlerFuncs {
	changed := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		var ref objectRef
		switch o := obj.(type) {
		case *corev1.Secret:
			ref = objectRef{kind: "Secret", namespace: o.Namespace, name: o.Name}
		case *corev1.ConfigMap:
			ref = objectRef{kind: "ConfigMap", namespace: o.Namespace, name: o.Name}
		default:
			return
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, w := range n.workers {
			w.objectChanged(ref)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
}

// fetchObjects gets the Secrets and ConfigMaps a pod refers to; one that does not exist is left
// out, for the caller to judge whether it was optional. They come from the node's cache; one
// the cache lacks is read from the API, as it may have been created just now.
func (n *Node) fetchObjects(ctx context.Context, namespace string, secrets, configMaps []string) (podObjects, error) {
	var (
		objs podObjects
		err  error
	)
	objs.secrets, err = fetchAll(ctx, "secret", secrets, n.secrets.Secrets(namespace).Get, n.client.CoreV1().Secrets(namespace).Get)
	if err != nil {
		return podObjects{}, err
	}
	objs.configMaps, err = fetchAll(ctx, "configmap", configMaps, n.configMaps.ConfigMaps(namespace).Get, n.client.CoreV1().ConfigMaps(namespace).Get)
	if err != nil {
		return podObjects{}, err
	}
	return objs, nil
}

// fetchAll gets the named objects of one kind from the cache (cached), or from the API (live)
// when the cache lacks one; those that do not exist are left out.
func fetchAll[T any](ctx context.Context, kind string, names []string,
	cached func(name string) (*T, error),
	live func(ctx context.Context, name string, opts metav1.GetOptions) (*T, error),
) (map[string]*T, error) {
	objs := make(map[string]*T, len(names))
	for _, name := range names {
		obj, err := cached(name)
		if apierrors.IsNotFound(err) {
			obj, err = live(ctx, name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("getting %s %q: %w", kind, name, err)
		default:
			objs[name] = obj
		}
	}
	return objs, nil
}

// requestToken asks the TokenRequest API for a token of the pod's service account bound to the
// pod, so that it dies with the pod, and says when to refresh it: at 80% of its lifetime and at
// least daily, like the kubelet's token manager.
func (n *Node) requestToken(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	expiration := int64(3600)
	if src.ExpirationSeconds != nil {
		expiration = *src.ExpirationSeconds
	}
	var audiences []string
	if src.Audience != "" {
		audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := n.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         audiences,
			ExpirationSeconds: &expiration,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	ttl := time.Duration(expiration) * time.Second
	return tr.Status.Token, n.cfg.Clock.Now().Add(min(ttl*8/10, 24*time.Hour)), nil
}

// retryForever runs f until it succeeds (true) or ctx ends (false), logging failures, as the
// kubelet keeps trying to register: the API server may still be starting.
func retryForever(ctx context.Context, clk clock.Clock, what string, f func(context.Context) error) bool {
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 10 * time.Second}
	for {
		err := f(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.FromContext(ctx).Error(err, "Retrying", "what", what)
		t := clk.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
}
