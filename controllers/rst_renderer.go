package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/builder"
)

// DefaultRSTRendererInterval is how often the renderer's objects are checked by default.
const DefaultRSTRendererInterval = time.Minute

// RSTRendererOptions decide whether and where the manager keeps the reStructuredText
// renderer of the older interface's /rstservice/render.
type RSTRendererOptions struct {
	// Namespace holds the renderer; nothing is done when it is empty.
	Namespace string
	// Disabled removes a renderer made before instead of keeping one.
	Disabled bool
	// OwnerDeployment, when set, names the manager's own Deployment in Namespace: the
	// renderer's objects are its dependents, so they go when the installation goes.
	OwnerDeployment string
	// Interval is how often the objects are checked and restored (DefaultRSTRendererInterval
	// when zero).
	Interval time.Duration
}

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;create;update;delete

// RSTRendererKeeper makes the reStructuredText renderer's Secret and Deployment exist as the
// builder says, and restores them when they are deleted or changed. It holds no watch: the
// objects are few and change seldom, so a periodic uncached read is all it costs. The token
// is derived from the agent token key (agenttoken.RSTRenderer), as the API server derives it
// without reading the Secret; a Secret with another token (the key changed, or it was made
// before tokens were derived) is made again, and a new Secret rolls the pods (the builder
// names its UID in the pod template).
type RSTRendererKeeper struct {
	// Client writes the objects.
	Client client.Writer
	// Reader reads them, uncached (the manager's API reader), so that the manager keeps no
	// cache of Deployments and Secrets beyond its own.
	Reader client.Reader
	// AgentTokenKey is the installation's agent token key.
	AgentTokenKey []byte
	// Builder shapes the renderer's pods.
	Builder builder.Options
	// Deliveries decides the agent's delivery when Builder says Auto.
	Deliveries *AgentDeliveries
	// Options say whether and where.
	Options RSTRendererOptions
}

// Start keeps the renderer until ctx ends.
func (k *RSTRendererKeeper) Start(ctx context.Context) error {
	interval := k.Options.Interval
	if interval <= 0 {
		interval = DefaultRSTRendererInterval
	}
	logger := log.FromContext(ctx).WithName("rst-renderer").WithValues("namespace", k.Options.Namespace)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := k.Ensure(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Keeping the reStructuredText renderer")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is true: one manager keeps the renderer.
func (k *RSTRendererKeeper) NeedLeaderElection() bool { return true }

// Ensure makes the Secret and the Deployment exist as desired, or go when disabled.
func (k *RSTRendererKeeper) Ensure(ctx context.Context) error {
	if k.Options.Disabled {
		return k.remove(ctx)
	}
	owner, err := k.owner(ctx)
	if err != nil {
		return err
	}
	secret, err := k.ensureSecret(ctx, owner)
	if err != nil {
		return err
	}
	return k.ensureDeployment(ctx, builder.RSTRendererDeployment(k.Options.Namespace, string(secret.UID), k.Deliveries.Resolve(ctx, k.Builder), owner))
}

// remove deletes the renderer's objects, if they are there and nbkube's.
func (k *RSTRendererKeeper) remove(ctx context.Context) error {
	key := client.ObjectKey{Namespace: k.Options.Namespace, Name: builder.RSTRendererName}
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Secret{}} {
		if err := k.Reader.Get(ctx, key, o); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("get the renderer's %T: %w", o, err)
		}
		if o.GetLabels()[nbv1.LabelComponent] != builder.ComponentRSTRenderer {
			continue
		}
		if err := k.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the renderer's %T: %w", o, err)
		}
		log.FromContext(ctx).Info("Removed the reStructuredText renderer's object", "namespace", key.Namespace, "kind", fmt.Sprintf("%T", o))
	}
	return nil
}

func (k *RSTRendererKeeper) owner(ctx context.Context) (*metav1.OwnerReference, error) {
	if k.Options.OwnerDeployment == "" {
		return nil, nil
	}
	d := &appsv1.Deployment{}
	if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: k.Options.Namespace, Name: k.Options.OwnerDeployment}, d); err != nil {
		return nil, fmt.Errorf("get the owner deployment: %w", err)
	}
	// Not a controller reference: the manager's Deployment does not manage the renderer.
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}, nil
}

func (k *RSTRendererKeeper) ensureSecret(ctx context.Context, owner *metav1.OwnerReference) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: k.Options.Namespace, Name: builder.RSTRendererName}
	token := agenttoken.RSTRenderer(k.AgentTokenKey, k.Options.Namespace)
	secret := &corev1.Secret{}
	err := k.Reader.Get(ctx, key, secret)
	switch {
	case err == nil && string(secret.Data[agentapi.SecretKeyToken]) == token:
		return secret, nil
	case err == nil && secret.Labels[nbv1.LabelComponent] != builder.ComponentRSTRenderer:
		return nil, fmt.Errorf("secret %s/%s exists and is not the renderer's", key.Namespace, key.Name)
	case err == nil:
		// Immutable: made again, under a new UID that rolls the pods.
		if err := k.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete the renderer's secret of another token: %w", err)
		}
		log.FromContext(ctx).Info("Replacing the reStructuredText renderer's secret: its token is not derived from the agent token key", "namespace", key.Namespace)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get the renderer's secret: %w", err)
	}
	secret = builder.RSTRendererSecret(k.Options.Namespace, token, owner)
	if err := k.Client.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("create the renderer's secret: %w", err)
	}
	return secret, nil
}

func (k *RSTRendererKeeper) ensureDeployment(ctx context.Context, desired *appsv1.Deployment) error {
	hash, err := stampHash(desired, desired.Spec)
	if err != nil {
		return err
	}
	existing := &appsv1.Deployment{}
	if err := k.Reader.Get(ctx, client.ObjectKeyFromObject(desired), existing); apierrors.IsNotFound(err) {
		if err := k.Client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create the renderer's deployment: %w", err)
		}
		log.FromContext(ctx).Info("Created the reStructuredText renderer", "namespace", desired.Namespace)
		return nil
	} else if err != nil {
		return fmt.Errorf("get the renderer's deployment: %w", err)
	}
	if existing.Annotations[specHashAnnotation] == hash {
		return nil
	}
	existing.Spec = desired.Spec
	existing.Labels = desired.Labels
	existing.OwnerReferences = desired.OwnerReferences
	existing.Annotations = mergeAnnotations(existing.Annotations, desired.Annotations)
	if err := k.Client.Update(ctx, existing); err != nil {
		return fmt.Errorf("update the renderer's deployment: %w", err)
	}
	return nil
}
