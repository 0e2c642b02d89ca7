package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// TerminalCullingOptions are Jupyter Server's TerminalManager culling settings.
type TerminalCullingOptions struct {
	// InactiveTimeout is how long a terminal may go without activity (a keystroke, output)
	// before it is deleted, Jupyter's cull_inactive_timeout; zero turns culling off.
	InactiveTimeout time.Duration
	// Interval is how often terminals are checked, Jupyter's cull_interval
	// (DefaultCullInterval when zero).
	Interval time.Duration
}

// TerminalCuller deletes inactive terminals as Jupyter Server's terminal manager does: every
// Interval, each terminal whose last activity (its agent's word, else its status's, else its
// creation) is older than InactiveTimeout gets a Culled condition and is deleted, whether or
// not a client is connected; its pod and secret go with it. It runs on the elected leader only.
type TerminalCuller struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.Clock
	Agents   TerminalAgents
	Options  TerminalCullingOptions
}

// NeedLeaderElection keeps the culler to the leader.
func (c *TerminalCuller) NeedLeaderElection() bool { return true }

// Start checks the terminals every Interval until ctx ends; with culling off it only waits.
func (c *TerminalCuller) Start(ctx context.Context) error {
	if c.Options.InactiveTimeout <= 0 {
		<-ctx.Done()
		return nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("terminal-culler"))
	for {
		t := c.Clock.NewTimer(c.Options.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		c.cullTerminals(ctx)
	}
}

// cullTerminals is one pass over every terminal.
func (c *TerminalCuller) cullTerminals(ctx context.Context) {
	var terminals nbv1.TerminalList
	if err := c.Client.List(ctx, &terminals); err != nil {
		log.FromContext(ctx).Error(err, "List terminals to cull")
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, cullConcurrency)
	for i := range terminals.Items {
		t := &terminals.Items[i]
		if t.DeletionTimestamp != nil {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c.cullIfInactive(ctx, t)
		})
	}
	wg.Wait()
}

func (c *TerminalCuller) cullIfInactive(ctx context.Context, t *nbv1.Terminal) {
	last := t.CreationTimestamp.Time
	if t.Status.LastActivity != nil && t.Status.LastActivity.After(last) {
		last = t.Status.LastActivity.Time
	}
	if t.Status.Phase == nbv1.TerminalRunning && t.Status.PodIP != "" {
		// The status is as old as the controller's last poll: the agent knows better.
		rep, err := c.agentReport(ctx, t)
		if err != nil {
			// Not knowing is no reason to cull; the next pass asks again.
			log.FromContext(ctx).V(1).Info("Terminal agent did not answer", "terminal", klog.KObj(t), "error", err.Error())
			return
		}
		if rep.After(last) {
			last = rep
		}
	}
	now := c.Clock.Now()
	inactive := now.Sub(last)
	if inactive <= c.Options.InactiveTimeout {
		return
	}
	c.cull(ctx, t, fmt.Sprintf("the terminal was inactive for %s, longer than the inactive timeout of %s (last activity %s)",
		inactive.Round(time.Second), c.Options.InactiveTimeout, last.UTC().Format(time.RFC3339)), now)
}

func (c *TerminalCuller) agentReport(ctx context.Context, t *nbv1.Terminal) (time.Time, error) {
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(t), secret); err != nil {
		return time.Time{}, fmt.Errorf("get terminal secret: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, agentStatusTimeout)
	defer cancel()
	st, err := c.Agents.TerminalStatus(ctx, agentEndpoint(t.Status.PodIP, secret))
	return st.LastActivity, err
}

// cull records why on the terminal (a Culled condition, applied as the culler's own field, and
// an event) and deletes it.
func (c *TerminalCuller) cull(ctx context.Context, t *nbv1.Terminal, why string, now time.Time) {
	logger := log.FromContext(ctx).WithValues("terminal", klog.KObj(t))
	if err := c.applyCulled(ctx, t, why, now); err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		// The condition only tells why; the terminal is culled all the same.
		logger.Error(err, "Set the Culled condition")
	}
	recordEvent(c.Recorder, t, nil, corev1.EventTypeNormal, nbv1.EventCulled, "Cull", "Culled terminal: %s", why)
	err := c.Client.Delete(ctx, t, client.Preconditions{UID: &t.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		logger.Error(err, "Delete culled terminal")
		return
	}
	logger.Info("Culled terminal", "message", why)
}

// applyCulled sets the Culled condition alone by a server-side apply as the culler's field
// manager, which leaves the controller's conditions as they are (see Culler.applyCulled).
func (c *TerminalCuller) applyCulled(ctx context.Context, t *nbv1.Terminal, why string, now time.Time) error {
	var conds []metav1.Condition
	setCondition(&conds, nbv1.ConditionCulled, metav1.ConditionTrue, nbv1.ReasonIdleTimeout, why, t.Generation, metav1.NewTime(now))
	cond, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[0])
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nbv1.GroupVersion.WithKind("Terminal"))
	u.SetNamespace(t.Namespace)
	u.SetName(t.Name)
	if err := unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"); err != nil {
		return err
	}
	return c.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cullerFieldOwner), client.ForceOwnership)
}
