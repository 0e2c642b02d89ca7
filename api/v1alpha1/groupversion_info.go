// Package v1alpha1 contains the nbkube.io/v1alpha1 API: the Kernel, Session, Cluster,
// KernelSpec and Terminal custom resources that the nbkube controllers reconcile and the
// nbkube API server translates Jupyter requests into.
//
// +kubebuilder:object:generate=true
// +groupName=nbkube.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "nbkube.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes keeps the package's dependencies to apimachinery, so that clients can import
// the API without controller-runtime.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Kernel{}, &KernelList{},
		&Session{}, &SessionList{},
		&Cluster{}, &ClusterList{},
		&KernelSpec{}, &KernelSpecList{},
		&UserPolicy{}, &UserPolicyList{},
		&UserUsage{}, &UserUsageList{},
		&Terminal{}, &TerminalList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
