// Package v1alpha1 contains the nbkube.io/v1alpha1 API: the Kernel, Session, Cluster and
// KernelSpec custom resources that the nbkube controllers reconcile and the nbkube API server
// translates Jupyter requests into.
//
// +kubebuilder:object:generate=true
// +groupName=nbkube.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "nbkube.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
