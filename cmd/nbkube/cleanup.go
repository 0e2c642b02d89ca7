package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/scheme"
)

// runCleanup deletes the sessions, kernels, clusters and kernel specs of one namespace and
// waits until the pods made for them are gone. `helm uninstall` runs it before it removes the
// operator: these custom resources are the users' and admins', not Helm's, so without it they
// and their pods would outlive the release. The definitions stay, since other releases may
// share them.
func runCleanup(ctx context.Context, args []string) error {
	fs, logOpts := newFlagSet("cleanup")
	namespace := fs.String("namespace", envOr("POD_NAMESPACE", "default"), "namespace to clean")
	timeout := new(2 * time.Minute)
	durationFlag(fs, timeout, "timeout", false, "how long to wait for the pods to go")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
	log := ctrl.Log.WithName("cleanup")
	c, err := client.New(ctrl.GetConfigOrDie(), client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	// The users' ledgers (UserUsages) go with what they count; the admins' UserPolicies stay,
	// like the CRDs.
	for _, obj := range []client.Object{&nbv1.Session{}, &nbv1.Kernel{}, &nbv1.Cluster{}, &nbv1.KernelSpec{}, &nbv1.UserUsage{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(*namespace), client.PropagationPolicy("Background")); err != nil {
			return fmt.Errorf("delete %T: %w", obj, err)
		}
	}
	log.Info("Deleted sessions, kernels, clusters, kernel specs and user usages; waiting for the pods", "namespace", *namespace)
	// The reStructuredText renderer's pods are not the users': they go with the manager's
	// Deployment, their owner, which Helm deletes after this.
	ours, err := labels.Parse(nbv1.LabelManagedBy + "=" + nbv1.ManagedByValue + "," + nbv1.LabelComponent + "!=" + builder.ComponentRSTRenderer)
	if err != nil {
		return err
	}
	left := 0
	err = wait.PollUntilContextTimeout(ctx, time.Second, *timeout, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(*namespace), client.MatchingLabelsSelector{Selector: ours}); err != nil {
			return false, err
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d pods of kernels and clusters still there after %s: %w", left, *timeout, err)
	}
	log.Info("Clean", "namespace", *namespace)
	return nil
}
