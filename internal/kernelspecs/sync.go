package kernelspecs

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// Sync makes the host's kernel specs KernelSpecs of namespace: new ones are created, those
// made from the host before are updated or, when gone from the host, deleted. KernelSpecs an
// admin made (without the host label) are never touched, even when a host spec has the same
// name. It returns the names now offered from the host.
func Sync(ctx context.Context, c client.Client, namespace string, specs []Spec) ([]string, error) {
	var names []string
	var errs []error
	want := map[string]bool{}
	for _, s := range specs {
		ks, err := s.Resource(namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want[ks.Name] = true
		existing := &nbv1.KernelSpec{}
		err = c.Get(ctx, client.ObjectKeyFromObject(ks), existing)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, ks)
		case err != nil:
		case existing.Labels[LabelSource] != SourceHost:
			continue
		default:
			existing.Spec = ks.Spec
			existing.Labels = ks.Labels
			err = c.Update(ctx, existing)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("kernel spec %s: %w", ks.Name, err))
			continue
		}
		names = append(names, ks.Name)
	}
	var list nbv1.KernelSpecList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{LabelSource: SourceHost}); err != nil {
		return names, errors.Join(append(errs, err)...)
	}
	for i := range list.Items {
		if ks := &list.Items[i]; !want[ks.Name] {
			if err := c.Delete(ctx, ks); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete kernel spec %s: %w", ks.Name, err))
			}
		}
	}
	return names, errors.Join(errs...)
}
