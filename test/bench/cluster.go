package main

// Kernels on a real cluster (`make bench-e2e`): the chart installed into the single-node
// cluster of hack/cluster.sh, kernels started through its API server's Service, against the
// floor measured in the same run on the same node: a bare pod of the same image reaching
// Running, plus ipykernel's own start inside such a pod.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/builder"
)

// clusterConfig is what -only cluster needs to know of the cluster and the images.
type clusterConfig struct {
	kubeconfig, helm, chart string
	image, kernelImage      string
	contentsDir             string
}

const (
	benchNamespace = "nbkube-bench"
	benchRelease   = "bench"
	benchClass     = "nbkube-bench-contents"
	// clusterStarts is the number of sequential and of concurrent starts of each column.
	clusterStarts = 20
)

// floorPodScript starts ipykernel as the agent does (a kernel of the image's python3) and
// prints how long it took to answer kernel_info, in seconds: from after jupyter_client's own
// import, which the agent (Go) does not pay, to the reply.
const floorPodScript = `import subprocess, sys, time
from jupyter_client.manager import KernelManager
t0 = time.perf_counter()
km = KernelManager(kernel_name="python3")
km.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
kc = km.client()
kc.start_channels()
kc.kernel_info(reply=True, timeout=120)
print("FLOOR_SECONDS", time.perf_counter() - t0, flush=True)
kc.stop_channels()
km.shutdown_kernel(now=True)
`

// clusterReport is the "Kernels on a real cluster" section.
type clusterReport struct {
	node, version string
	// seq and conc are per-start times, sorted: nbkube's POST → 201 (kernel_info answered),
	// the floor's pod creation → Running plus ipykernel's start in the pod. They are taken
	// with manager.agentDelivery ImageVolume, after seqInit (and its floors), taken with
	// InitContainer, what the chart's default (Auto) picks where a node cannot mount image volumes.
	seq, seqFloor, conc, concFloor []time.Duration
	seqInit, seqInitFloor          []time.Duration
	// seqFloorInit and seqFloorVolume are the floor with the kernel pod's way of getting the
	// agent added, in the same run as seqInit and seq: an init container that copies it out
	// of the operator's image, or that image mounted as a volume.
	seqFloorInit, seqFloorVolume []time.Duration
	// concAll, concFloorAll: the first request to the last kernel ready.
	concAll, concFloorAll time.Duration
	// phases of nbkube's sequential starts, per phase name, sorted: with the agent from an
	// image volume, and from an init container.
	phases, phasesInit map[string][]time.Duration
	// warm are sequential starts that each found a ready warm kernel (KernelSpec warmPool),
	// sorted; refill the time from each such start until the pool had a ready kernel again.
	warm, refill []time.Duration
	errs         []error
}

// The phases of a start, as the bench tells them apart.
const (
	phaseCreate   = "API: Kernel, Secret and pod created"
	phaseSchedule = "scheduling"
	phaseRun      = "sandbox, the agent's volume or init container, kernel container started"
	phaseKernel   = "agent and ipykernel start, kernel_info answered through the API server"
)

// podTimes is when this process saw a pod reach each state, from a watch.
type podTimes struct {
	created, scheduled, running time.Time
}

// podClock watches the namespace's pods and notes when each was first seen in each state.
type podClock struct {
	mu   sync.Mutex
	pods map[string]*podTimes
	seen *sync.Cond
}

func newPodClock(ctx context.Context, cs kubernetes.Interface, ns string) *podClock {
	c := &podClock{pods: map[string]*podTimes{}}
	c.seen = sync.NewCond(&c.mu)
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", ns, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		// Every pod the bench makes has a name of its own (kernel ids, floor-<n>).
		t := c.pods[p.Name]
		if t == nil {
			t = &podTimes{created: now}
			c.pods[p.Name] = t
		}
		if t.scheduled.IsZero() && p.Spec.NodeName != "" {
			t.scheduled = now
		}
		if t.running.IsZero() && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded) {
			t.running = now
		}
		c.seen.Broadcast()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }})
	go inf.Run(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return c
}

// wait returns the pod's times once done says they are complete, or after timeout.
func (c *podClock) wait(name string, timeout time.Duration, done func(*podTimes) bool) (podTimes, error) {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() { c.seen.Broadcast() })
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if t := c.pods[name]; t != nil && done(t) {
			return *t, nil
		}
		if time.Now().After(deadline) {
			return podTimes{}, fmt.Errorf("pod %s: not seen as expected within %s", name, timeout)
		}
		c.seen.Wait()
	}
}

func measureCluster(cfg clusterConfig) *clusterReport {
	rep := &clusterReport{phases: map[string][]time.Duration{}, phasesInit: map[string][]time.Duration{}}
	fail := func(err error) *clusterReport {
		rep.errs = append(rep.errs, err)
		fmt.Fprintln(os.Stderr, "bench: cluster:", err)
		return rep
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := setUpBench(ctx, cfg, &rep.version, &rep.node)
	defer b.cleanup()
	if err != nil {
		return fail(err)
	}
	rc, cs, api, clock := b.rc, b.cs, b.api, b.clock

	// One start and one floor pod first: the first of each pays for caches the others find warm.
	if _, _, err := nbkubeStart(api, clock); err != nil {
		return fail(fmt.Errorf("warm-up start: %w", err))
	}
	if _, err := floorStart(ctx, cs, clock, floorPod(cfg.kernelImage, "floor-warm", "", false)); err != nil {
		return fail(fmt.Errorf("warm-up floor pod: %w", err))
	}
	// sequential takes clusterStarts starts one after another, each followed by a bare floor
	// pod and one with the agent delivered as the manager now does.
	sequential := func(delivery string, nb, floor, floorAgent *[]time.Duration, phases map[string][]time.Duration) error {
		viaVolume := delivery == "ImageVolume"
		for i := range clusterStarts {
			d, ph, err := nbkubeStart(api, clock)
			if err != nil {
				return fmt.Errorf("sequential start %d (%s): %w", i, delivery, err)
			}
			*nb = append(*nb, d)
			for name, v := range ph {
				phases[name] = append(phases[name], v)
			}
			f, err := floorStart(ctx, cs, clock, floorPod(cfg.kernelImage, fmt.Sprintf("floor-%s-%d", strings.ToLower(delivery), i), "", false))
			if err != nil {
				return fmt.Errorf("sequential floor %d: %w", i, err)
			}
			*floor = append(*floor, f)
			fa, err := floorStart(ctx, cs, clock, floorPod(cfg.kernelImage, fmt.Sprintf("floor-agent-%s-%d", strings.ToLower(delivery), i), cfg.image, viaVolume))
			if err != nil {
				return fmt.Errorf("sequential floor with the agent (%s) %d: %w", delivery, i, err)
			}
			*floorAgent = append(*floorAgent, fa)
			fmt.Fprintf(os.Stderr, "cluster  start %2d (%s): nbkube %6.0f ms, floor %6.0f ms, floor with the agent %6.0f ms\n", i, delivery, ms(d), ms(f), ms(fa))
		}
		return nil
	}
	if err := sequential("InitContainer", &rep.seqInit, &rep.seqInitFloor, &rep.seqFloorInit, rep.phasesInit); err != nil {
		return fail(err)
	}
	if err := useImageVolume(ctx, cs, cfg); err != nil {
		return fail(err)
	}
	if _, _, err := nbkubeStart(api, clock); err != nil {
		return fail(fmt.Errorf("warm-up start after the upgrade: %w", err))
	}
	if err := sequential("ImageVolume", &rep.seq, &rep.seqFloor, &rep.seqFloorVolume, rep.phases); err != nil {
		return fail(err)
	}

	rep.conc, rep.concAll, err = concurrently(func(i int) (time.Duration, error) {
		d, _, err := nbkubeStart(api, clock)
		return d, err
	})
	if err != nil {
		return fail(fmt.Errorf("concurrent starts: %w", err))
	}
	rep.concFloor, rep.concFloorAll, err = concurrently(func(i int) (time.Duration, error) {
		return floorStart(ctx, cs, clock, floorPod(cfg.kernelImage, fmt.Sprintf("floor-c%d", i), "", false))
	})
	if err != nil {
		return fail(fmt.Errorf("concurrent floor: %w", err))
	}
	if rep.warm, rep.refill, err = warmStarts(ctx, rc, api); err != nil {
		return fail(fmt.Errorf("starts from a warm pool: %w", err))
	}
	for _, v := range [][]time.Duration{rep.seq, rep.seqFloor, rep.seqInit, rep.seqInitFloor, rep.seqFloorInit, rep.seqFloorVolume, rep.conc, rep.concFloor, rep.warm, rep.refill} {
		slices.Sort(v)
	}
	for _, m := range []map[string][]time.Duration{rep.phases, rep.phasesInit} {
		for _, v := range m {
			slices.Sort(v)
		}
	}
	fmt.Fprintf(os.Stderr, "cluster  sequential p50 nbkube %.0f ms, floor %.0f ms; %d at once: all ready in %.1f s, floor %.1f s\n",
		ms(p50(rep.seq)), ms(p50(rep.seqFloor)), clusterStarts, rep.concAll.Seconds(), rep.concFloorAll.Seconds())
	return rep
}

// benchCluster is the chart installed for a run of the cluster sections.
type benchCluster struct {
	rc      *rest.Config
	cs      kubernetes.Interface
	api     *kernelClient
	clock   *podClock
	cleanup func()
}

// setUpBench makes clients of the cluster of cfg, says its version and node, and installs the
// chart (see installBench). Call cleanup even when it fails.
func setUpBench(ctx context.Context, cfg clusterConfig, version, node *string) (*benchCluster, error) {
	b := &benchCluster{cleanup: func() {}}
	var err error
	if b.rc, b.cs, err = clusterClients(cfg); err != nil {
		return b, err
	}
	*version, *node = describeCluster(ctx, b.cs)
	if b.api, b.cleanup, err = installBench(ctx, b.cs, cfg); err != nil {
		return b, err
	}
	b.clock = newPodClock(ctx, b.cs, benchNamespace)
	return b, nil
}

// clusterClients are clients of the cluster of cfg.kubeconfig.
func clusterClients(cfg clusterConfig) (*rest.Config, kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	// client-go's default of 5 requests a second (burst 10) held the twenty floor pods'
	// creations back by seconds (its log said so): the floor must pay for nothing but itself.
	rc.QPS, rc.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(rc)
	return rc, cs, err
}

// describeCluster is the cluster's Kubernetes version and its (first) node, as the report
// names them.
func describeCluster(ctx context.Context, cs kubernetes.Interface) (version, node string) {
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		version = v.GitVersion
	}
	if nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil && len(nodes.Items) > 0 {
		n := nodes.Items[0]
		node = fmt.Sprintf("%s (%s CPU, %s memory, %s)", n.Name, n.Status.Capacity.Cpu(), n.Status.Capacity.Memory(), n.Status.NodeInfo.ContainerRuntimeVersion)
	}
	return version, node
}

// kernelSpecs is the resource of nbkube's KernelSpecs.
var kernelSpecs = schema.GroupVersionResource{Group: "nbkube.io", Version: "v1alpha1", Resource: "kernelspecs"}

// warmStarts gives the chart's python3 spec a warm pool of one and times clusterStarts
// starts one after another, each after the pool has a ready kernel again: what a user's
// starts after their first cost. It returns those times and how long each refill took.
func warmStarts(ctx context.Context, rc *rest.Config, api *kernelClient) (warm, refill []time.Duration, err error) {
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	specs := dc.Resource(kernelSpecs).Namespace(benchNamespace)
	if _, err := specs.Patch(ctx, "python3", types.MergePatchType, []byte(`{"spec":{"warmPool":{"size":1}}}`), metav1.PatchOptions{}); err != nil {
		return nil, nil, err
	}
	// The pool is filled for users who start kernels of the spec: this start is the first.
	if _, _, err := nbkubeStart(api, nil); err != nil {
		return nil, nil, fmt.Errorf("the start that fills the pool: %w", err)
	}
	readyAgain := func() error {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			ks, err := specs.Get(ctx, "python3", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n, _, _ := unstructured.NestedInt64(ks.Object, "status", "warmPool", "ready"); n >= 1 {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return errors.New("no ready warm kernel within 2 minutes")
	}
	if err := readyAgain(); err != nil {
		return nil, nil, err
	}
	for i := range clusterStarts {
		d, _, err := nbkubeStart(api, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("start %d: %w", i, err)
		}
		t0 := time.Now()
		if err := readyAgain(); err != nil {
			return nil, nil, fmt.Errorf("refill after start %d: %w", i, err)
		}
		warm, refill = append(warm, d), append(refill, time.Since(t0)+d)
		fmt.Fprintf(os.Stderr, "cluster  warm start %2d: %6.0f ms, pool ready again %6.0f ms after it\n", i, ms(d), ms(time.Since(t0)+d))
	}
	return warm, refill, nil
}

// concurrently runs clusterStarts starts at once; it returns each one's time, sorted, and the
// time from the first request until the last was done.
func concurrently(start func(i int) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	began := time.Now()
	out := make([]time.Duration, clusterStarts)
	errs := make([]error, clusterStarts)
	var wg sync.WaitGroup
	for i := range clusterStarts {
		wg.Go(func() { out[i], errs[i] = start(i) })
	}
	wg.Wait()
	all := time.Since(began)
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	slices.Sort(out)
	return out, all, nil
}

// nbkubeStart starts a kernel through the API (POST answers once the kernel answered
// kernel_info), deletes it, and returns the start's time and its phases as the pod watch saw
// them (none without a clock).
func nbkubeStart(api *kernelClient, clock *podClock) (time.Duration, map[string]time.Duration, error) {
	t0 := time.Now()
	id, err := api.create()
	if err != nil {
		return 0, nil, err
	}
	took := time.Since(t0)
	done := time.Now()
	// The pod's own Ready condition comes later (its probe's first period): the API server asks
	// the agent itself, so the last step the watch can tell apart is the container's start.
	if clock == nil {
		return took, nil, api.remove(id)
	}
	t, err := clock.wait(id, 10*time.Second, func(t *podTimes) bool { return !t.running.IsZero() })
	if err == nil && !t.running.After(done) {
		return took, map[string]time.Duration{
			phaseCreate:   t.created.Sub(t0),
			phaseSchedule: t.scheduled.Sub(t.created),
			phaseRun:      t.running.Sub(t.scheduled),
			phaseKernel:   done.Sub(t.running),
		}, api.remove(id)
	}
	return took, nil, api.remove(id)
}

// floorStart makes a bare pod of the kernel image that starts ipykernel, and returns the time
// from its creation until it was Running plus ipykernel's start inside it.
func floorStart(ctx context.Context, cs kubernetes.Interface, clock *podClock, p *corev1.Pod) (time.Duration, error) {
	pods := cs.CoreV1().Pods(benchNamespace)
	name := p.Name
	t0 := time.Now()
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	defer func() {
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	t, err := clock.wait(name, 2*time.Minute, func(t *podTimes) bool { return !t.running.IsZero() })
	if err != nil {
		return 0, err
	}
	running := t.running.Sub(t0)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		logs, err := pods.GetLogs(name, &corev1.PodLogOptions{}).Do(ctx).Raw()
		if err == nil {
			if _, rest, ok := bytes.Cut(logs, []byte("FLOOR_SECONDS ")); ok {
				line, _, _ := bytes.Cut(rest, []byte("\n"))
				s, err := strconv.ParseFloat(strings.TrimSpace(string(line)), 64)
				if err != nil {
					return 0, fmt.Errorf("floor pod %s printed %q", name, logs)
				}
				return running + time.Duration(s*float64(time.Second)), nil
			}
		}
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && cur.Status.Phase == corev1.PodFailed {
			return 0, fmt.Errorf("floor pod %s failed: %s", name, logs)
		}
		// The time is the pod's own (running + what it printed): a slower poll adds nothing to
		// it, and twenty pods' logs read every 50 ms (through the kubelet) loaded the node
		// their kernels start on.
		time.Sleep(500 * time.Millisecond)
	}
	return 0, fmt.Errorf("floor pod %s printed no time", name)
}

// floorPod is a pod as plain as the kernel pod's user-facing part: same image, same user and
// restricted security context, a writable /tmp, the same small requests. With agentImage set,
// it also gets the agent out of that image as kernel pods do: mounted as an image volume
// (viaVolume), or copied by the kernel pod's init container.
func floorPod(image, name, agentImage string, viaVolume bool) *corev1.Pod {
	restricted := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nbkube-bench": "floor"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](100),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "floor", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"python3", "-c", floorPodScript},
				Env:             []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}, {Name: "JUPYTER_RUNTIME_DIR", Value: "/tmp/runtime"}},
				Resources:       small,
				SecurityContext: restricted,
				VolumeMounts:    []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	switch {
	case agentImage != "" && viaVolume:
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "agent-bin", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: agentImage, PullPolicy: corev1.PullIfNotPresent}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "agent-bin", MountPath: builder.AgentImageDir, ReadOnly: true})
	case agentImage != "":
		p.Spec.InitContainers = []corev1.Container{{
			Name: "install-agent", Image: agentImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command:   []string{"/usr/local/bin/nbkube-agent", "install", builder.AgentBinary},
			Resources: small, SecurityContext: restricted,
			VolumeMounts: []corev1.VolumeMount{{Name: "agent-bin", MountPath: builder.AgentBinDir}},
		}}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "agent-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return p
}

// installBench installs the chart into benchNamespace with a contents volume in
// cfg.contentsDir and a python3 spec of small requests (twenty kernels fit on two cores), and
// returns a client of its API server; cleanup uninstalls it.
func installBench(ctx context.Context, cs kubernetes.Interface, cfg clusterConfig) (*kernelClient, func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if err := os.MkdirAll(cfg.contentsDir, 0o775); err != nil {
		return nil, cleanup, err
	}
	if err := os.Chown(cfg.contentsDir, 1000, 100); err != nil {
		return nil, cleanup, err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: benchClass},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              benchClass,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: cfg.contentsDir}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, cleanup, err
	}
	undo = append(undo, func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), benchClass, metav1.DeleteOptions{})
	})
	repo, tag, _ := strings.Cut(cfg.image, ":")
	krepo, ktag, _ := strings.Cut(cfg.kernelImage, ":")
	args := []string{"install", benchRelease, cfg.chart, "--namespace", benchNamespace, "--create-namespace", "--wait", "--timeout", "5m",
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "kernelImage.repository=" + krepo, "--set", "kernelImage.tag=" + ktag,
		"--set", "contents.storageClass=" + benchClass, "--set", "contents.size=1Gi",
		"--set", "kernelSpecs.python3.resources.requests.cpu=10m", "--set", "kernelSpecs.python3.resources.requests.memory=64Mi",
		// Init containers first, as on clusters whose nodes cannot mount image volumes (the
		// chart's default, Auto, picks image volumes on this one).
		"--set", "manager.agentDelivery=InitContainer"}
	if err := runHelm(ctx, cfg, args...); err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() {
		un := exec.Command(cfg.helm, "uninstall", benchRelease, "--namespace", benchNamespace, "--wait", "--timeout", "5m")
		un.Env = append(os.Environ(), "KUBECONFIG="+cfg.kubeconfig)
		_ = un.Run()
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), benchNamespace, metav1.DeleteOptions{})
	})
	secret, err := cs.CoreV1().Secrets(benchNamespace).Get(ctx, benchRelease+"-nbkube-auth", metav1.GetOptions{})
	if err != nil {
		return nil, cleanup, err
	}
	svc, err := cs.CoreV1().Services(benchNamespace).Get(ctx, benchRelease+"-nbkube", metav1.GetOptions{})
	if err != nil {
		return nil, cleanup, err
	}
	s := &server{name: "nbkube", base: fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), token: string(secret.Data["token"])}
	api := &kernelClient{s: s, hc: &http.Client{Timeout: kernelTimeout}}
	if err := waitAnswers(api, 2*time.Minute); err != nil {
		return nil, cleanup, fmt.Errorf("the API server's Service %s does not answer: %w", s.base, err)
	}
	return api, cleanup, nil
}

func runHelm(ctx context.Context, cfg clusterConfig, args ...string) error {
	cmd := exec.CommandContext(ctx, cfg.helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm %s: %w: %s", args[0], err, out)
	}
	return nil
}

// useImageVolume upgrades the bench's release to manager.agentDelivery ImageVolume and waits
// until every manager pod is of the new release: until the old one is gone, it may still be
// the one that makes kernels' pods.
func useImageVolume(ctx context.Context, cs kubernetes.Interface, cfg clusterConfig) error {
	if err := runHelm(ctx, cfg, "upgrade", benchRelease, cfg.chart, "--namespace", benchNamespace, "--reuse-values",
		"--wait", "--timeout", "5m", "--set", "manager.agentDelivery=ImageVolume"); err != nil {
		return err
	}
	const flag = "--agent-delivery=ImageVolume"
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		pods, err := cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=manager"})
		if err != nil {
			return err
		}
		upgraded := len(pods.Items) > 0
		for _, p := range pods.Items {
			upgraded = upgraded && slices.Contains(p.Spec.Containers[0].Args, flag)
		}
		if upgraded {
			return nil
		}
		time.Sleep(time.Second)
	}
	return errors.New("manager pods still of the release before the upgrade after 2 minutes")
}

// writeCluster is the report's section.
func writeCluster(b *strings.Builder, rep *clusterReport) {
	fmt.Fprintf(b, "## Kernels on a real cluster\n\n")
	fmt.Fprintf(b, "Generated by `make bench-e2e` (test/bench `-only cluster`): the chart installed into the single-node cluster of `make test-e2e` (hack/cluster.sh: kube-apiserver, etcd, scheduler, controller manager, kubelet, containerd, kube-router; Kubernetes %s) on node %s, the images already on the node. "+
		"nbkube: `POST /api/kernels` through the API server's Service until it answers (the kernel has answered `kernel_info`), then `DELETE`. "+
		"Floor, measured in the same run on the same node: a bare pod of the same kernel image, user and security context reaching Running, plus ipykernel's own start inside such a pod (jupyter_client until `kernel_info` is answered). "+
		"Target: nbkube's p50 at most 150 ms above the floor's. Twenty samples on two cores shared with the whole cluster: a p50 moves by a few hundred milliseconds from run to run, so compare the columns of one run.\n\n", rep.version, rep.node)
	if len(rep.errs) > 0 {
		fmt.Fprintf(b, "Not measured: %v\n", errors.Join(rep.errs...))
		return
	}
	row := func(name string, nb, floor []time.Duration) {
		fmt.Fprintf(b, "| %s | %.0f / %.0f | %.0f / %.0f | %+.0f |\n", name, ms(p50(nb)), ms(p99(nb)), ms(p50(floor)), ms(p99(floor)), ms(p50(nb)-p50(floor)))
	}
	fmt.Fprintf(b, "| starts | nbkube p50 / p99 ms | floor p50 / p99 ms | nbkube − floor, p50 ms |\n|---|---|---|---|\n")
	row(fmt.Sprintf("%d one after another, the agent from an image volume (`manager.agentDelivery: ImageVolume`; p99: the slowest)", clusterStarts), rep.seq, rep.seqFloor)
	row(fmt.Sprintf("%d one after another, the same, against a floor pod that mounts the agent's image volume", clusterStarts), rep.seq, rep.seqFloorVolume)
	row(fmt.Sprintf("%d one after another, the agent copied by an init container (what Auto, the chart's default, picks where a node cannot mount image volumes), before the upgrade to ImageVolume", clusterStarts), rep.seqInit, rep.seqInitFloor)
	row(fmt.Sprintf("%d one after another, the same, against a floor pod with the agent's init container", clusterStarts), rep.seqInit, rep.seqFloorInit)
	row(fmt.Sprintf("%d at once, each (ImageVolume)", clusterStarts), rep.conc, rep.concFloor)
	fmt.Fprintf(b, "| %d at once, until the last is ready | %.1f s | %.1f s | %+.1f s |\n", clusterStarts, rep.concAll.Seconds(), rep.concFloorAll.Seconds(), (rep.concAll - rep.concFloorAll).Seconds())
	row(fmt.Sprintf("%d one after another from a warm pool (`warmPool.size: 1`), each after the pool is ready again", clusterStarts), rep.warm, rep.seqFloor)
	fmt.Fprintf(b, "\nWarm starts: target p50 under 500 ms (nbkube: %.0f ms). A warm kernel is claimed by two API writes (the owner's ledger, the Kernel) and one request to its agent; the pool was ready again %.0f ms (p50; p99 %.0f ms) after each start began: the pool refills with a cold start, and counts a kernel once its pod is Ready.\n\n",
		ms(p50(rep.warm)), ms(p50(rep.refill)), ms(p99(rep.refill)))
	fmt.Fprintf(b, "Where nbkube's sequential starts spend their time, as a watch of the pods saw it (p50 / p99 ms):\n\n| phase | agent from an image volume | agent copied by an init container |\n|---|---|---|\n")
	for _, name := range []string{phaseCreate, phaseSchedule, phaseRun, phaseKernel} {
		v, vi := rep.phases[name], rep.phasesInit[name]
		if len(v) > 0 && len(vi) > 0 {
			fmt.Fprintf(b, "| %s | %.0f / %.0f | %.0f / %.0f |\n", name, ms(p50(v)), ms(p99(v)), ms(p50(vi)), ms(p99(vi)))
		}
	}
	b.WriteString("\n")
}
