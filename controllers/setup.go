// Package controllers holds nbkube's reconcilers: Kernel, Session, Cluster, KernelSpec and
// Terminal, plus the re-emission of pod events onto their Kernels, Clusters and Terminals and
// the cullers of idle kernels and inactive terminals. Owned objects come from internal/builder.
//
// Each reconciler is a short orchestrator with one rule for its status: fetch the object,
// leave one being deleted alone, run the steps in order (a step that fails stops the ones
// after it), compute the status on a copy as a pure function of what the steps observed and
// of the failed step's error (setReconcileError), write it only if it differs (writeStatus),
// and return the step's error last, so that the request is retried with back-off.
package controllers

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/daskcluster"
	"github.com/nbkube/nbkube/internal/ipcluster"
	"github.com/nbkube/nbkube/internal/quota"
)

// Options configure the reconcilers.
type Options struct {
	// Builder are the settings of the objects the controllers create.
	Builder builder.Options
	// Clock stamps conditions and paces the culler; the real clock when nil.
	Clock clock.Clock
	// Rand makes kernel and cluster keys; crypto/rand when nil.
	Rand io.Reader
	// AgentTokenKey is the installation's agent token key (at least agenttoken.KeySize
	// bytes), from which the agent tokens of kernels and of the reStructuredText renderer
	// are derived: the API server must hold the same one.
	AgentTokenKey []byte
	// Agents asks kernel agents for their status; an agentclient.Client when nil.
	Agents AgentStatus
	// StatusInterval is how often a running kernel's agent is asked for its status
	// (DefaultStatusInterval when zero), at most: see MaxStatusPolls.
	StatusInterval time.Duration
	// MaxStatusPolls bounds the status requests to agents per second, all running kernels
	// together: past MaxStatusPolls × StatusInterval kernels each is asked less often
	// (DefaultMaxStatusPolls when zero, none when negative).
	MaxStatusPolls float64
	// KernelWorkers is how many kernels the kernel controller reconciles at once
	// (DefaultKernelWorkers when zero).
	KernelWorkers int
	// Culling shuts idle kernels down.
	Culling CullingOptions
	// TerminalCulling deletes inactive terminals.
	TerminalCulling TerminalCullingOptions
	// TerminalAgents asks terminal agents for their activity: Agents when it can, else an
	// agentclient.Client.
	TerminalAgents TerminalAgents
	// Hub asks clusters' ipcontrollers about their engines; ipcluster.QueryHub when nil.
	Hub ClusterHub
	// Dask asks dask clusters' schedulers about their workers and retires workers;
	// daskcluster.Client over HTTP when nil.
	Dask DaskScheduler
	// ClusterPollInterval is how often a running cluster's hub is asked about its engines
	// (DefaultClusterPollInterval when zero).
	ClusterPollInterval time.Duration
	// RSTRenderer keeps the reStructuredText renderer when it names a namespace.
	RSTRenderer RSTRendererOptions
	// ClusterNetworkPolicies gives each cluster's ipcontroller a NetworkPolicy that lets in
	// only its engines and its owner's kernels; for clusters whose network enforces policies.
	ClusterNetworkPolicies bool
}

// DefaultStatusInterval is how often a running kernel's status is refreshed by default.
const DefaultStatusInterval = 10 * time.Second

// DefaultKernelWorkers is how many kernels are reconciled at once by default. A reconcile
// mostly waits on the API server (creating the Secret and the Pod, writing the status) or on
// an agent, so workers cost little; with one, the last of twenty kernels started together got
// its pod seven seconds after the first.
const DefaultKernelWorkers = 16

const (
	// kernelSpecIndex indexes Kernels by the KernelSpec they run.
	kernelSpecIndex = "spec.kernelSpec"
	// ownerUIDIndex indexes Kernels by the UIDs of their owners (the sessions using them).
	ownerUIDIndex = "metadata.ownerReferences.uid"
	// kernelOwnerIndex indexes Kernels by the user they belong to.
	kernelOwnerIndex = "spec.owner"
	// terminalOwnerIndex indexes Terminals by the user they belong to.
	terminalOwnerIndex = "spec.owner"
)

// CacheOptions keep the manager's caches to the objects nbkube makes: without them every Pod,
// Secret and Event of the cluster would be held in memory (and every Secret readable here).
func CacheOptions() cache.Options {
	ours := labels.SelectorFromSet(labels.Set{nbv1.LabelManagedBy: nbv1.ManagedByValue})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:                 {Label: ours},
		&corev1.Secret{}:              {Label: ours},
		&corev1.Service{}:             {Label: ours},
		&networkingv1.NetworkPolicy{}: {Label: ours},
		&corev1.Event{}:               {Field: fields.OneTermEqualSelector("involvedObject.kind", "Pod")},
	}}
}

// SetupWithManager registers every reconciler and the indexes they use.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := agenttoken.CheckKey(opts.AgentTokenKey); err != nil {
		return err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.Agents == nil {
		opts.Agents = agentclient.New()
	}
	if opts.Hub == nil {
		opts.Hub = HubFunc(ipcluster.QueryHub)
	}
	if opts.Dask == nil {
		opts.Dask = daskcluster.Client{HTTP: &http.Client{Timeout: daskcluster.RetireTimeout}}
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = DefaultStatusInterval
	}
	if opts.MaxStatusPolls == 0 {
		opts.MaxStatusPolls = DefaultMaxStatusPolls
	}
	if opts.Culling.Interval <= 0 {
		opts.Culling.Interval = DefaultCullInterval
	}
	if opts.TerminalCulling.Interval <= 0 {
		opts.TerminalCulling.Interval = DefaultCullInterval
	}
	if opts.TerminalAgents == nil {
		if a, ok := opts.Agents.(TerminalAgents); ok {
			opts.TerminalAgents = a
		} else {
			opts.TerminalAgents = agentclient.New()
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nbv1.Kernel{}, kernelSpecIndex, func(o client.Object) []string {
		return []string{o.(*nbv1.Kernel).Spec.KernelSpec}
	}); err != nil {
		return fmt.Errorf("index kernels by kernel spec: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nbv1.Kernel{}, kernelOwnerIndex, func(o client.Object) []string {
		return []string{string(o.(*nbv1.Kernel).Spec.Owner)}
	}); err != nil {
		return fmt.Errorf("index kernels by user: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nbv1.Terminal{}, terminalOwnerIndex, func(o client.Object) []string {
		return []string{string(o.(*nbv1.Terminal).Spec.Owner)}
	}); err != nil {
		return fmt.Errorf("index terminals by user: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nbv1.Kernel{}, ownerUIDIndex, func(o client.Object) []string {
		uids := make([]string, 0, len(o.GetOwnerReferences()))
		for _, ref := range o.GetOwnerReferences() {
			uids = append(uids, string(ref.UID))
		}
		return uids
	}); err != nil {
		return fmt.Errorf("index kernels by owner: %w", err)
	}
	c := mgr.GetClient()
	deliveries := &AgentDeliveries{Reader: mgr.GetAPIReader(), Clock: opts.Clock}
	ledger := &quota.Ledger{Client: c, Reader: c, APIReader: mgr.GetAPIReader(), Clock: opts.Clock}
	setups := []struct {
		name string
		err  error
	}{
		{"kernel", (&KernelReconciler{Client: c, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("nbkube-kernel"),
			Clock: opts.Clock, Rand: opts.Rand, AgentTokenKey: opts.AgentTokenKey, Options: opts.Builder, Deliveries: deliveries, Agents: opts.Agents, StatusInterval: opts.StatusInterval,
			MaxStatusPolls: opts.MaxStatusPolls, Quota: ledger, Workers: opts.KernelWorkers}).SetupWithManager(mgr)},
		{"culler", mgr.Add(&Culler{Client: c, Recorder: mgr.GetEventRecorder("nbkube-kernel"), Clock: opts.Clock,
			Agents: opts.Agents, Options: opts.Culling})},
		{"terminal", (&TerminalReconciler{Client: c, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("nbkube-terminal"),
			Clock: opts.Clock, AgentTokenKey: opts.AgentTokenKey, Options: opts.Builder, Deliveries: deliveries, Agents: opts.TerminalAgents,
			StatusInterval: opts.StatusInterval, Quota: ledger}).SetupWithManager(mgr)},
		{"terminal-culler", mgr.Add(&TerminalCuller{Client: c, Recorder: mgr.GetEventRecorder("nbkube-terminal"), Clock: opts.Clock,
			Agents: opts.TerminalAgents, Options: opts.TerminalCulling})},
		{"session", (&SessionReconciler{Client: c, Recorder: mgr.GetEventRecorder("nbkube-session"),
			Clock: opts.Clock}).SetupWithManager(mgr)},
		{"cluster", (&ClusterReconciler{Client: c, Recorder: mgr.GetEventRecorder("nbkube-cluster"),
			Clock: opts.Clock, Rand: opts.Rand, Options: opts.Builder, Hub: opts.Hub, Dask: opts.Dask, PollInterval: opts.ClusterPollInterval,
			NetworkPolicies: opts.ClusterNetworkPolicies, Quota: ledger}).SetupWithManager(mgr)},
		{"usage", (&UsageReconciler{Client: c, APIReader: mgr.GetAPIReader(), Clock: opts.Clock, Ledger: ledger}).SetupWithManager(mgr)},
		{"kernelspec", (&KernelSpecReconciler{Client: c, Clock: opts.Clock,
			Builder: opts.Builder}).SetupWithManager(mgr)},
		{"podevents", (&PodEventReconciler{Client: c, Recorder: mgr.GetEventRecorder("nbkube-kernel")}).
			SetupWithManager(mgr, opts.Clock)},
	}
	if opts.RSTRenderer.Namespace != "" {
		setups = append(setups, struct {
			name string
			err  error
		}{"rst-renderer", mgr.Add(&RSTRendererKeeper{Client: c, Reader: mgr.GetAPIReader(), AgentTokenKey: opts.AgentTokenKey,
			Builder: opts.Builder, Deliveries: deliveries, Options: opts.RSTRenderer})})
	}
	for _, s := range setups {
		if s.err != nil {
			return fmt.Errorf("set up %s controller: %w", s.name, s.err)
		}
	}
	return nil
}
