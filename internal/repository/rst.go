package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
)

// The API server finds the reStructuredText renderer's pods:
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// ErrRSTUnavailable is the refusal of a rendering when no renderer can take it: none is
// ready, or none answers.
var ErrRSTUnavailable = errors.New("no reStructuredText renderer is ready")

// RSTRenderers has the reStructuredText renderer's ready pods render, for the older
// interface's /rstservice/render. The renderer runs where kernels run (see builder): the
// API server only forwards the text, with the renderer's token, derived as the manager derived
// the one in the renderer's Secret.
type RSTRenderers struct {
	// Reader lists the renderer's pods; best uncached (the manager's API reader), so that the
	// API server holds no cache of every kernel pod for it.
	Reader client.Reader
	// Namespace holds the renderer.
	Namespace string
	// Agents calls the renderer.
	Agents *agentclient.Client
	// AgentTokenKey is the installation's agent token key (agenttoken.RSTRenderer).
	AgentTokenKey []byte

	// next spreads renderings over the ready pods.
	next atomic.Uint32
}

// RenderRST renders src to HTML on a ready renderer pod, trying the next one when a pod does
// not answer. The renderer's refusals are agentclient.Errors; ErrRSTUnavailable when no pod
// took the text.
func (r *RSTRenderers) RenderRST(ctx context.Context, src []byte) ([]byte, error) {
	pods := &corev1.PodList{}
	if err := r.Reader.List(ctx, pods, client.InNamespace(r.Namespace), client.MatchingLabels(builder.RSTRendererLabels())); err != nil {
		return nil, fmt.Errorf("list the renderer's pods: %w", err)
	}
	ips := make([]string, 0, len(pods.Items))
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(p) {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) == 0 {
		return nil, ErrRSTUnavailable
	}
	slices.SortFunc(ips, strings.Compare)
	token := agenttoken.RSTRenderer(r.AgentTokenKey, r.Namespace)
	start := int(r.next.Add(1))
	for i := range ips {
		e := agentclient.Endpoint{Host: ips[(start+i)%len(ips)], Port: agentapi.Port, Token: token}
		html, err := r.Agents.RenderRST(ctx, e, src)
		if errors.Is(err, agentclient.ErrUnreachable) && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, agentclient.ErrUnreachable) {
			// The pod's address is of no use to the client.
			return nil, fmt.Errorf("%w: the renderer did not answer in time", ErrRSTUnavailable)
		}
		return html, err
	}
	return nil, fmt.Errorf("%w: the renderer does not answer", ErrRSTUnavailable)
}

// RenderRST renders nothing: the server runs no renderer.
func (None) RenderRST(context.Context, []byte) ([]byte, error) {
	return nil, fmt.Errorf("%w: this server runs none", ErrRSTUnavailable)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
