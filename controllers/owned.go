package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// notOurs refuses to write over an object of the desired one's name that another owner
// controls (or none does): a user names their clusters, and a cluster must never take
// another's Secret, Service or policy, nor one left by a cluster of the same name that is
// still being garbage collected. The garbage collector removes such a leftover, and the
// next reconcile makes the object anew.
func notOurs(noun string, existing, desired client.Object) error {
	want := metav1.GetControllerOf(desired)
	if want == nil {
		return nil
	}
	if got := metav1.GetControllerOf(existing); got == nil || got.UID != want.UID {
		return fmt.Errorf("%s %s exists and is not this %s's: waiting for it to go", noun, existing.GetName(), want.Kind)
	}
	return nil
}

// specHashAnnotation records the hash of the spec an owned object was last written from, so
// that the object is updated when (and only when) the builder's output changes, without
// comparing against fields the API server defaulted.
const specHashAnnotation = "nbkube.io/spec-hash"

func specHash(spec any) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64()), nil
}

func stampHash(o client.Object, spec any) (string, error) {
	hash, err := specHash(spec)
	if err != nil {
		return "", err
	}
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[specHashAnnotation] = hash
	o.SetAnnotations(a)
	return hash, nil
}

// applyService creates the Service or brings its ports and selector to the desired ones
// (the rest of its spec, the cluster IP above all, is the API server's).
func applyService(ctx context.Context, c client.Client, desired *corev1.Service) error {
	hash, err := stampHash(desired, desired.Spec)
	if err != nil {
		return err
	}
	existing := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(desired), existing); apierrors.IsNotFound(err) {
		if err := c.Create(ctx, desired); err != nil {
			return fmt.Errorf("create service %s: %w", desired.Name, err)
		}
		return nil
	} else if err != nil {
		return err
	}
	if err := notOurs("service", existing, desired); err != nil {
		return err
	}
	if existing.Annotations[specHashAnnotation] == hash {
		return nil
	}
	existing.Spec.Ports = desired.Spec.Ports
	existing.Spec.Selector = desired.Spec.Selector
	existing.Spec.PublishNotReadyAddresses = desired.Spec.PublishNotReadyAddresses
	existing.Labels = desired.Labels
	existing.Annotations = mergeAnnotations(existing.Annotations, desired.Annotations)
	if err := c.Update(ctx, existing); err != nil {
		return fmt.Errorf("update service %s: %w", desired.Name, err)
	}
	return nil
}

func mergeAnnotations(existing, desired map[string]string) map[string]string {
	out := make(map[string]string, len(existing)+len(desired))
	for k, v := range existing {
		out[k] = v
	}
	for k, v := range desired {
		out[k] = v
	}
	return out
}

// applyNetworkPolicy creates the NetworkPolicy or brings its spec to the desired one.
func applyNetworkPolicy(ctx context.Context, c client.Client, desired *networkingv1.NetworkPolicy) error {
	hash, err := stampHash(desired, desired.Spec)
	if err != nil {
		return err
	}
	existing := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(desired), existing); apierrors.IsNotFound(err) {
		if err := c.Create(ctx, desired); err != nil {
			return fmt.Errorf("create network policy %s: %w", desired.Name, err)
		}
		return nil
	} else if err != nil {
		return err
	}
	if err := notOurs("network policy", existing, desired); err != nil {
		return err
	}
	if existing.Annotations[specHashAnnotation] == hash {
		return nil
	}
	existing.Spec = desired.Spec
	existing.Labels = desired.Labels
	existing.Annotations = mergeAnnotations(existing.Annotations, desired.Annotations)
	if err := c.Update(ctx, existing); err != nil {
		return fmt.Errorf("update network policy %s: %w", desired.Name, err)
	}
	return nil
}
