package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KernelParameters is the spec of a Kernel. (It is not called KernelSpec because that is the
// kind that describes kinds of kernels.)
// +kubebuilder:validation:XValidation:rule="has(self.home) == has(oldSelf.home)",message="home is immutable"
type KernelParameters struct {
	// owner is the user the kernel belongs to.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="owner is immutable"
	Owner Owner `json:"owner"`

	// kernelSpec names the KernelSpec (in the same namespace) the kernel runs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kernelSpec is immutable"
	KernelSpec string `json:"kernelSpec"`

	// home is the directory of the contents volume that the kernel pod mounts, relative to
	// the volume's root: its owner's home when users have homes. The kernel sees nothing of
	// the volume outside it, and path is relative to it. The API server sets it for users
	// with a home (not for admins, whose kernels mount the whole volume); when empty, the
	// manager's --user-home template names the owner's home, and only without one does the
	// kernel mount the whole volume. "/" (HomeWholeVolume) mounts the whole volume whatever
	// the template: the API server sets it for an admin's own kernels, and anyone who may
	// create Kernels directly may set it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="home is immutable"
	// +kubebuilder:validation:XValidation:rule="self == '/' || (!self.startsWith('/') && !self.split('/').exists(s, s == '' || s.startsWith('.')))",message="home must be \"/\" or a relative path of plain, visible names"
	Home string `json:"home,omitempty"`

	// path is the kernel's working directory relative to the contents root (its home when
	// it has one), as Jupyter's POST /api/kernels "path". Empty means the root.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="path must be relative and stay inside the contents root"
	Path string `json:"path,omitempty"`

	// cluster names a Cluster (in the same namespace) the kernel may use: the kernel gets its
	// client connection file, so that ipyparallel.Client(profile=<cluster>) reaches its engines.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cluster is immutable"
	Cluster string `json:"cluster,omitempty"`

	// parameters are the values of the KernelSpec's launch parameters this kernel was started
	// with, as text; a parameter not named takes its default. The controller checks them
	// against the spec's bounds before it builds the pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="parameters are immutable"
	Parameters map[string]string `json:"parameters,omitempty"`

	// env is added to the kernel's environment after the KernelSpec's env.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Env map[string]string `json:"env,omitempty"`
}

// HomeWholeVolume is the Kernel home that mounts the whole contents volume.
const HomeWholeVolume = "/"

// KernelStatus is what the controller and the kernel's agent observed.
type KernelStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready (the kernel pod is ready to take connections), Failed (it cannot
	// run; the reason says why), Culled (set just before the culler deletes the kernel) and
	// Restarted (why the kernel last restarted without being asked: KernelDied, its process
	// ended, or PodDeleted, its pod was deleted).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// executionState is Jupyter's execution_state of the kernel.
	// +optional
	ExecutionState ExecutionState `json:"executionState,omitempty"`

	// podIP is the address of the kernel pod's agent.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodIP string `json:"podIP,omitempty"`

	// lastActivity is the time of the kernel's last message, Jupyter's last_activity.
	// +optional
	LastActivity *metav1.Time `json:"lastActivity,omitempty"`

	// connections is the number of clients connected to the kernel's channels.
	// +optional
	Connections int32 `json:"connections,omitempty"`

	// restartCount is how often the kernel process was restarted.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`

	// podRestart is the last restart request (the nbkube.io/restart annotation) the
	// controller acted on: a kernel whose pod could not restart it got a new pod.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodRestart string `json:"podRestart,omitempty"`

	// outputsWritten is the agent's last write of the outputs of runs whose client was away
	// into their notebook (docs/api.md, "Outputs that outlive the browser").
	// +optional
	OutputsWritten *OutputsWritten `json:"outputsWritten,omitempty"`
}

// OutputsWritten is a write of the outputs of runs whose client was away into a notebook.
type OutputsWritten struct {
	// time is when the notebook was written.
	Time metav1.Time `json:"time"`

	// notebook is the notebook written, relative to the kernel's contents directory: its
	// path as the kernel's owner sees it.
	// +kubebuilder:validation:MaxLength=4096
	Notebook string `json:"notebook"`

	// cells counts the cells the write changed.
	// +kubebuilder:validation:Minimum=0
	Cells int32 `json:"cells"`

	// writes counts the writes of the kernel pod's agent: it tells one write from the next.
	// +kubebuilder:validation:Minimum=0
	Writes int64 `json:"writes"`
}

// Kernel is a running Jupyter kernel: one pod whose nbkube agent runs the kernel process.
// Its name is the kernel id of the Jupyter API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kn,categories=nbkube
// +kubebuilder:printcolumn:name="Spec",type=string,JSONPath=`.spec.kernelSpec`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Home",type=string,JSONPath=`.spec.home`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.executionState`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Pod IP",type=string,JSONPath=`.status.podIP`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Kernel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the kernel that was asked for.
	// +required
	Spec KernelParameters `json:"spec"`

	// status is what runs.
	// +optional
	Status KernelStatus `json:"status,omitempty"`
}

// KernelList is a list of Kernels.
// +kubebuilder:object:root=true
type KernelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Kernel `json:"items"`
}
