package controllers

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nbkube/nbkube/internal/builder"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=list

// AgentDeliveries decides how pods get the agent when the operator is told Auto: from an
// image volume where every node of the cluster can mount one, else by an init container.
// A pod is made before the scheduler picks its node, so one node that cannot is enough to
// keep init containers for all. A node can when its kubelet is 1.36 or later, where
// ImageVolume is generally available and cannot be turned off (1.35 has it on by default,
// but a kubelet or API server may have it off, which the node list does not show; a
// kubelet is never newer than the API server, so that one has it too), and its runtime is
// containerd 2.1+ or CRI-O 1.31+. What else a node runs, or a version it does not report,
// counts as cannot.
type AgentDeliveries struct {
	// Reader lists the nodes (the manager's API reader: nodes are not in its cache).
	Reader client.Reader
	Clock  clock.PassiveClock
	// Every is how long a decision holds before the nodes are listed again
	// (DefaultAgentDeliveryRecheck when zero).
	Every time.Duration

	mu         sync.Mutex
	decided    builder.AgentDelivery
	at         time.Time
	refreshing bool
}

// DefaultAgentDeliveryRecheck is how often Auto looks at the nodes again: a node joining
// with an older runtime is noticed within it (its kernels fail to start meanwhile).
const DefaultAgentDeliveryRecheck = time.Minute

// nodePage is how many nodes one list request returns.
const nodePage = 500

// refreshTimeout bounds one listing of the nodes made in the background.
const refreshTimeout = 30 * time.Second

// Resolve is o with its agent delivery decided where it says Auto (and no host directory
// of the agent overrides it, as on nbkube local's node). The first call lists the nodes;
// once the decision is older than Every, the nodes are listed again in the background and
// the decision at hand serves meanwhile, so that pods are not held up by the listing of a
// large cluster's nodes.
func (a *AgentDeliveries) Resolve(ctx context.Context, o builder.Options) builder.Options {
	if o.AgentDelivery != builder.AgentAuto || o.AgentHostDir != "" || a == nil {
		return o
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.decided == "" {
		now := a.Clock.Now()
		d, why := a.decide(ctx)
		a.record(ctx, d, why, now)
	} else if !a.refreshing && a.Clock.Since(a.at) >= a.every() {
		a.refreshing = true
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
			defer cancel()
			now := a.Clock.Now()
			d, why := a.decide(ctx)
			a.mu.Lock()
			defer a.mu.Unlock()
			a.record(ctx, d, why, now)
			a.refreshing = false
		}()
	}
	o.AgentDelivery = a.decided
	return o
}

func (a *AgentDeliveries) every() time.Duration {
	if a.Every > 0 {
		return a.Every
	}
	return DefaultAgentDeliveryRecheck
}

// record keeps d, decided as of now for why; the caller holds mu.
func (a *AgentDeliveries) record(ctx context.Context, d builder.AgentDelivery, why string, now time.Time) {
	if d != a.decided {
		log.FromContext(ctx).Info("Agent delivery decided", "delivery", d, "why", why)
	}
	a.decided, a.at = d, now
}

func (a *AgentDeliveries) decide(ctx context.Context) (builder.AgentDelivery, string) {
	nodes := 0
	opts := []client.ListOption{client.Limit(nodePage)}
	for {
		var list corev1.NodeList
		if err := a.Reader.List(ctx, &list, opts...); err != nil {
			return builder.AgentInitContainer, "cannot list the nodes: " + err.Error()
		}
		for i := range list.Items {
			if ok, why := mountsImageVolumes(&list.Items[i]); !ok {
				return builder.AgentInitContainer, why
			}
		}
		nodes += len(list.Items)
		if list.Continue == "" {
			break
		}
		opts = []client.ListOption{client.Limit(nodePage), client.Continue(list.Continue)}
	}
	if nodes == 0 {
		return builder.AgentInitContainer, "no nodes"
	}
	return builder.AgentImageVolume, "every node mounts image volumes"
}

// The earliest versions that mount image volumes, the feature always on.
var (
	minKubelet    = version.MustParseGeneric("1.36.0")
	minRuntimeFor = map[string]*version.Version{
		"containerd": version.MustParseGeneric("2.1.0"),
		"cri-o":      version.MustParseGeneric("1.31.0"),
	}
)

// mountsImageVolumes says the node's kubelet and runtime mount image volumes, and if not,
// why.
func mountsImageVolumes(n *corev1.Node) (bool, string) {
	info := n.Status.NodeInfo
	kubelet, err := version.ParseGeneric(info.KubeletVersion)
	if err != nil || kubelet.LessThan(minKubelet) {
		return false, "node " + n.Name + " runs kubelet " + orUnreported(info.KubeletVersion) + ", before " + minKubelet.String()
	}
	runtime, v, _ := strings.Cut(info.ContainerRuntimeVersion, "://")
	least, known := minRuntimeFor[runtime]
	if !known {
		return false, "node " + n.Name + " runs " + orUnreported(info.ContainerRuntimeVersion) + ", neither containerd nor CRI-O"
	}
	rv, err := version.ParseGeneric(v)
	if err != nil || rv.LessThan(least) {
		return false, "node " + n.Name + " runs " + orUnreported(info.ContainerRuntimeVersion) + ", before " + runtime + " " + least.String()
	}
	return true, ""
}

func orUnreported(s string) string {
	if s == "" {
		return "(unreported)"
	}
	return s
}
