package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SessionKernel says which kernel a session uses.
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.kernelSpec)",message="name an existing kernel or a kernelSpec to start one"
type SessionKernel struct {
	// name is the Kernel the session uses. When no such Kernel exists and kernelSpec is set,
	// the session creates it. Empty means a kernel named after the session.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// kernelSpec is the KernelSpec of a kernel the session starts.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	KernelSpec string `json:"kernelSpec,omitempty"`

	// cluster names a Cluster a kernel the session starts is attached to (the Kernel's
	// cluster). Changing it, like changing kernelSpec, makes the session start a new kernel.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Cluster string `json:"cluster,omitempty"`

	// home is the home of a kernel the session starts (the Kernel's home): the directory of
	// the contents volume it mounts, "/" for the whole volume, or empty for the manager's
	// choice (its owner's home when users have homes).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == '/' || (!self.startsWith('/') && !self.split('/').exists(s, s == '' || s.startsWith('.')))",message="home must be \"/\" or a relative path of plain, visible names"
	Home string `json:"home,omitempty"`

	// parameters are the launch parameters of a kernel the session starts (the Kernel's
	// parameters).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Parameters map[string]string `json:"parameters,omitempty"`
}

// SessionParameters is the spec of a Session, Jupyter's session model.
type SessionParameters struct {
	// owner is the user the session belongs to.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="owner is immutable"
	Owner Owner `json:"owner"`

	// path is the notebook's (or file's) path relative to the contents root.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="path must be relative and stay inside the contents root"
	Path string `json:"path"`

	// name is the session's name, usually the notebook's file name.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name,omitempty"`

	// type is the session's type: "notebook", "console", "file", ...
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Type string `json:"type,omitempty"`

	// kernel is the kernel the session uses or starts. Deleting the session deletes it.
	// +required
	Kernel SessionKernel `json:"kernel"`
}

// SessionStatus mirrors the session's kernel.
type SessionStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready and Failed, as on the session's kernel.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// kernelName is the Kernel the session uses.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	KernelName string `json:"kernelName,omitempty"`

	// executionState is the kernel's execution_state.
	// +optional
	ExecutionState ExecutionState `json:"executionState,omitempty"`

	// kernelUID is the UID of kernelName once the session has seen that Kernel. When it is
	// gone (shut down, culled or deleted) the session is deleted rather than given a new
	// kernel, as Jupyter drops the session of a kernel that no longer exists.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	KernelUID types.UID `json:"kernelUID,omitempty"`
}

// Session ties a notebook to a kernel, Jupyter's session. Its name is the session id.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nbs,categories=nbkube
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.path`
// +kubebuilder:printcolumn:name="Kernel",type=string,JSONPath=`.status.kernelName`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.executionState`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Session struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the session.
	// +required
	Spec SessionParameters `json:"spec"`

	// status mirrors its kernel.
	// +optional
	Status SessionStatus `json:"status,omitempty"`
}

// SessionList is a list of Sessions.
// +kubebuilder:object:root=true
type SessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Session `json:"items"`
}
