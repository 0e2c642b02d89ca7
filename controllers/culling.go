package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// DefaultCullInterval is how often kernels are checked for culling unless told otherwise,
// Jupyter Server's cull_interval.
const DefaultCullInterval = 300 * time.Second

// cullConcurrency bounds the agents asked at once during a cull pass.
const cullConcurrency = 8

// CullingOptions are Jupyter Server's MappingKernelManager culling settings. A KernelSpec's
// culling overrides IdleTimeout, CullConnected and CullBusy for its kernels.
type CullingOptions struct {
	// IdleTimeout is how long a kernel may go without activity before it is shut down;
	// zero turns culling off (dead kernels included, as in Jupyter).
	IdleTimeout time.Duration
	// Interval is how often kernels are checked (DefaultCullInterval when zero).
	Interval time.Duration
	// CullConnected culls idle kernels that have clients connected.
	CullConnected bool
	// CullBusy culls busy kernels whose last activity is older than IdleTimeout.
	CullBusy bool
	// UnusedTimeout shuts down a kernel no client has connected to within this long of its
	// agent's start, whatever IdleTimeout says (zero: never): what an API server that died
	// between creating a kernel and its client's first connection leaves behind.
	UnusedTimeout time.Duration
}

// DefaultUnusedTimeout is how long a kernel may wait for its first client by default.
const DefaultUnusedTimeout = time.Hour

// on says whether any culling is on.
func (o CullingOptions) on() bool { return o.IdleTimeout > 0 || o.UnusedTimeout > 0 }

// forSpec is the culling of the kernels of a spec: the spec's settings where it has them.
func (o CullingOptions) forSpec(c *nbv1.KernelCulling) CullingOptions {
	if c == nil {
		return o
	}
	if c.IdleTimeout != nil {
		o.IdleTimeout = c.IdleTimeout.Duration
	}
	if c.CullConnected != nil {
		o.CullConnected = *c.CullConnected
	}
	if c.CullBusy != nil {
		o.CullBusy = *c.CullBusy
	}
	return o
}

// Culler shuts down idle and dead kernels as Jupyter Server's culler does: every Interval it
// asks each kernel's agent for its state and deletes the kernels that have been inactive for
// longer than their idle timeout (and, unless told otherwise, are neither busy nor
// connected to), and the dead ones. It runs on the elected leader only.
type Culler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.Clock
	Agents   AgentStatus
	Options  CullingOptions
}

// NeedLeaderElection keeps the culler to the leader: two culling the same kernel would
// record its end twice.
func (c *Culler) NeedLeaderElection() bool { return true }

// Start checks the kernels every Interval until ctx ends.
func (c *Culler) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("culler"))
	return everyInterval(ctx, c.Clock, c.Options.Interval, c.cullKernels)
}

// everyInterval runs pass every interval of clk until ctx ends.
func everyInterval(ctx context.Context, clk clock.Clock, interval time.Duration, pass func(context.Context)) error {
	for {
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		pass(ctx)
	}
}

// cullEach runs the work that plan gives for each of items (none when it gives nil),
// cullConcurrency at a time, and returns when all is done.
func cullEach[T any](items []T, plan func(*T) func()) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, cullConcurrency)
	for i := range items {
		work := plan(&items[i])
		if work == nil {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			work()
		})
	}
	wg.Wait()
}

// cullKernels is one pass over every kernel whose culling is on.
func (c *Culler) cullKernels(ctx context.Context) {
	var kernels nbv1.KernelList
	if err := c.Client.List(ctx, &kernels); err != nil {
		log.FromContext(ctx).Error(err, "List kernels to cull")
		return
	}
	cullEach(kernels.Items, func(k *nbv1.Kernel) func() {
		// A warm kernel's life is its pool's (planWarmPool).
		if k.DeletionTimestamp != nil || k.Warm() {
			return nil
		}
		o, err := c.optionsFor(ctx, k)
		if err != nil {
			log.FromContext(ctx).Error(err, "Culling settings of kernel", "kernel", klog.KObj(k))
			return nil
		}
		if !o.on() {
			return nil
		}
		return func() { c.cullIfIdle(ctx, k, o) }
	})
}

// optionsFor is the culling of the kernel, its spec's when the spec has some. A kernel
// whose spec is gone keeps running, culled by the operator's settings.
func (c *Culler) optionsFor(ctx context.Context, k *nbv1.Kernel) (CullingOptions, error) {
	spec := &nbv1.KernelSpec{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Spec.KernelSpec}, spec)
	switch {
	case apierrors.IsNotFound(err):
		return c.Options, nil
	case err != nil:
		return CullingOptions{}, fmt.Errorf("get kernel spec: %w", err)
	}
	return c.Options.forSpec(spec.Spec.Culling), nil
}

func (c *Culler) cullIfIdle(ctx context.Context, k *nbv1.Kernel, o CullingOptions) {
	var st *agentapi.Status
	if !kernelFailed(k) && k.Status.PodIP != "" && meta.IsStatusConditionTrue(k.Status.Conditions, nbv1.ConditionReady) {
		s, err := c.agentStatus(ctx, k)
		if err != nil {
			// Not knowing is no reason to cull; the next pass asks again.
			log.FromContext(ctx).V(1).Info("Kernel agent did not answer", "kernel", klog.KObj(k), "error", err.Error())
			return
		}
		st = &s
	}
	now := c.Clock.Now()
	v, ok := cullVerdict(o, k, st, now)
	if !ok {
		return
	}
	c.cull(ctx, k, v, now)
}

func (c *Culler) agentStatus(ctx context.Context, k *nbv1.Kernel) (agentapi.Status, error) {
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(k), secret); err != nil {
		return agentapi.Status{}, fmt.Errorf("get kernel secret: %w", err)
	}
	return askAgent(ctx, c.Agents, agentEndpoint(k.Status.PodIP, secret))
}

func kernelFailed(k *nbv1.Kernel) bool {
	return meta.IsStatusConditionTrue(k.Status.Conditions, nbv1.ConditionFailed)
}

// verdict is why a kernel is culled.
type verdict struct {
	reason  nbv1.ConditionReason
	message string
}

// cullVerdict decides, as Jupyter Server's cull_kernel_if_idle does, whether a kernel is
// culled: when it is dead (it failed, or its agent says so), or when it has been inactive
// for longer than the idle timeout and is neither busy nor connected to (unless the options
// cull those too). st is the agent's report just now, nil when the agent was not asked.
func cullVerdict(o CullingOptions, k *nbv1.Kernel, st *agentapi.Status, now time.Time) (verdict, bool) {
	if v, ok := unusedVerdict(o, st, claimedAt(k), now); ok {
		return v, true
	}
	if o.IdleTimeout <= 0 {
		return verdict{}, false
	}
	if f := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed); f != nil && f.Status == metav1.ConditionTrue {
		return verdict{nbv1.ReasonKernelDead, fmt.Sprintf("the kernel is dead (%s: %s)", f.Reason, f.Message)}, true
	}
	if st == nil {
		return verdict{}, false
	}
	state := nbv1.ExecutionState(st.ExecutionState)
	if state == nbv1.ExecutionStateDead {
		return verdict{nbv1.ReasonKernelDead, "the kernel's agent reports it dead"}, true
	}
	// An agent always reports a last activity; a missing one is not taken as "long ago".
	last := st.LastActivity
	if last.IsZero() {
		last = k.CreationTimestamp.Time
	}
	// A warm kernel's activity starts again with its claim.
	if c := claimedAt(k); c.After(last) {
		last = c
	}
	idle := now.Sub(last)
	if idle <= o.IdleTimeout || (state == nbv1.ExecutionStateBusy && !o.CullBusy) || (st.Connections > 0 && !o.CullConnected) {
		return verdict{}, false
	}
	return verdict{nbv1.ReasonIdleTimeout, fmt.Sprintf("the kernel was inactive for %s, longer than its idle timeout of %s (last activity %s; %s, %d connections)",
		idle.Round(time.Second), o.IdleTimeout, last.UTC().Format(time.RFC3339), state, st.Connections)}, true
}

// cullerFieldOwner is the field manager of the culler's status writes.
const cullerFieldOwner = "nbkube-culler"

// applyCulled sets the kernel's Culled condition by a server-side apply of that condition
// alone, as its own field manager: the conditions are a map by type, so the apply changes no
// other condition and loses none to the Kernel controller's status write of the same moment
// (a merge patch would replace the whole list with the culler's copy of it), and it needs no
// resource version, since the culler is not the Kernel's reconciler and has nothing to retry.
func (c *Culler) applyCulled(ctx context.Context, k *nbv1.Kernel, v verdict, now time.Time) error {
	return applyCulled(ctx, c.Client, "Kernel", k, v, now)
}

// applyCulled applies the Culled condition of obj, of kind, as Culler.applyCulled tells.
func applyCulled(ctx context.Context, c client.Client, kind string, obj client.Object, v verdict, now time.Time) error {
	var conds []metav1.Condition
	setCondition(&conds, nbv1.ConditionCulled, metav1.ConditionTrue, v.reason, v.message, obj.GetGeneration(), metav1.NewTime(now))
	cond, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[0])
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nbv1.GroupVersion.WithKind(kind))
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"); err != nil {
		return err
	}
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cullerFieldOwner), client.ForceOwnership)
}

// unusedVerdict culls a kernel that no client has connected to within UnusedTimeout of its
// agent's start (or of its claim, for a kernel of a warm pool; claimed is zero for others),
// unless it is busy (someone's code runs).
func unusedVerdict(o CullingOptions, st *agentapi.Status, claimed, now time.Time) (verdict, bool) {
	if o.UnusedTimeout <= 0 || st == nil || st.UnusedSince == nil || nbv1.ExecutionState(st.ExecutionState) == nbv1.ExecutionStateBusy {
		return verdict{}, false
	}
	since := *st.UnusedSince
	if claimed.After(since) {
		since = claimed
	}
	unused := now.Sub(since)
	if unused <= o.UnusedTimeout {
		return verdict{}, false
	}
	return verdict{nbv1.ReasonUnused, fmt.Sprintf("no client connected to the kernel in the %s since its start (%s), longer than the unused timeout of %s",
		unused.Round(time.Second), since.UTC().Format(time.RFC3339), o.UnusedTimeout)}, true
}

// cull records why on the kernel (a Culled condition and an event) and deletes it; its pod
// and secret follow through their owner references, and its sessions are dropped by the
// Session controller.
func (c *Culler) cull(ctx context.Context, k *nbv1.Kernel, v verdict, now time.Time) {
	logger := log.FromContext(ctx).WithValues("kernel", klog.KObj(k))
	if err := c.applyCulled(ctx, k, v, now); err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		// The condition only tells why; the kernel is culled all the same.
		logger.Error(err, "Set the Culled condition")
	}
	eventType := corev1.EventTypeNormal
	if v.reason == nbv1.ReasonKernelDead {
		eventType = corev1.EventTypeWarning
	}
	recordEvent(c.Recorder, k, nil, eventType, nbv1.EventCulled, "Cull", "Culled kernel: %s", v.message)
	err := c.Client.Delete(ctx, k, client.Preconditions{UID: &k.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		logger.Error(err, "Delete culled kernel")
		return
	}
	if err == nil {
		kernelsCulled.WithLabelValues(k.Spec.KernelSpec, string(v.reason)).Inc()
	}
	logger.Info("Culled kernel", "reason", v.reason, "message", v.message)
}
