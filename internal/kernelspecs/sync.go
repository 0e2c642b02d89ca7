package kernelspecs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// Sync makes the host's kernel specs KernelSpecs of namespace, each with a ConfigMap of its
// files: new ones are created, those made from the host before are updated or, when gone from
// the host, deleted. KernelSpecs and ConfigMaps an admin made (without the host label) are
// never touched, even when a host spec's would have the same name; a spec whose ConfigMap
// name is an admin's goes without files. It returns the Jupyter names now offered from the
// host.
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
		if ks.Spec.Files != nil {
			if err := checkConfigMapFree(ctx, c, ks); err != nil {
				errs = append(errs, err)
				ks.Spec.Files = nil
			}
		}
		written, err := writeKernelSpec(ctx, c, ks)
		if err != nil {
			errs = append(errs, fmt.Errorf("kernel spec %s: %w", ks.Name, err))
			continue
		}
		if written == nil {
			// An admin's.
			continue
		}
		if written.Spec.Files != nil {
			if err := writeConfigMap(ctx, c, s.FilesConfigMap(written)); err != nil {
				errs = append(errs, fmt.Errorf("files of kernel spec %s: %w", ks.Name, err))
			}
		}
		names = append(names, written.JupyterName())
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
	// Their owner reference would have them collected once their KernelSpec is gone, but not
	// where no garbage collector runs, nor at once.
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(namespace), client.MatchingLabels{LabelSource: SourceHost}); err != nil {
		return names, errors.Join(append(errs, err)...)
	}
	for i := range cms.Items {
		if cm := &cms.Items[i]; !want[cm.Name] {
			if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete files of kernel spec %s: %w", cm.Name, err))
			}
		}
	}
	slices.Sort(names)
	return names, errors.Join(errs...)
}

// checkConfigMapFree fails when the ConfigMap that ks would name exists and is not the host's.
func checkConfigMapFree(ctx context.Context, c client.Client, ks *nbv1.KernelSpec) error {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ks.Namespace, Name: ks.Spec.Files.ConfigMapName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("files of kernel spec %s: %w", ks.Name, err)
	case cm.Labels[LabelSource] != SourceHost:
		return fmt.Errorf("files of kernel spec %s: ConfigMap %s is not the host's; the spec is offered without files", ks.Name, cm.Name)
	}
	return nil
}

// writeKernelSpec creates ks or updates the host's KernelSpec of its name, and returns what
// is stored; nil when the KernelSpec of that name is an admin's.
func writeKernelSpec(ctx context.Context, c client.Client, ks *nbv1.KernelSpec) (*nbv1.KernelSpec, error) {
	existing := &nbv1.KernelSpec{}
	err := c.Get(ctx, client.ObjectKeyFromObject(ks), existing)
	switch {
	case apierrors.IsNotFound(err):
		return ks, c.Create(ctx, ks)
	case err != nil:
		return nil, err
	case existing.Labels[LabelSource] != SourceHost:
		return nil, nil
	}
	existing.Spec = ks.Spec
	existing.Labels = ks.Labels
	return existing, c.Update(ctx, existing)
}

// writeConfigMap creates cm or updates the host's ConfigMap of its name when it differs.
func writeConfigMap(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	existing := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKeyFromObject(cm), existing)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, cm)
	case err != nil:
		return err
	case existing.Labels[LabelSource] != SourceHost:
		// Made by an admin since checkConfigMapFree: left alone.
		return fmt.Errorf("ConfigMap %s is not the host's", cm.Name)
	case maps.Equal(existing.Data, cm.Data) && equality.Semantic.DeepEqual(existing.BinaryData, cm.BinaryData) &&
		equality.Semantic.DeepEqual(existing.OwnerReferences, cm.OwnerReferences):
		return nil
	}
	existing.Data, existing.BinaryData = cm.Data, cm.BinaryData
	existing.Labels, existing.OwnerReferences = cm.Labels, cm.OwnerReferences
	return c.Update(ctx, existing)
}
