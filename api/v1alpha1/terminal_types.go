package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerminalParameters is the spec of a Terminal: a shell on a pseudo-terminal, in a pod that
// runs in its owner's context as the owner's kernels do (the image of a KernelSpec, the
// owner's home mounted where kernels mount it, the kernels' security context, egress policy
// and placement).
// +kubebuilder:validation:XValidation:rule="has(self.home) == has(oldSelf.home)",message="home is immutable"
type TerminalParameters struct {
	// owner is the user the terminal belongs to.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="owner is immutable"
	Owner Owner `json:"owner"`

	// kernelSpec names the KernelSpec (in the same namespace) whose image, resources and pod
	// template the terminal's pod takes; its argv is not run.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kernelSpec is immutable"
	KernelSpec string `json:"kernelSpec"`

	// home is the directory of the contents volume that the terminal's pod mounts, as a
	// Kernel's spec.home: "/" for the whole volume, a relative path for a home, empty for its
	// owner's home under the manager's --user-home template.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="home is immutable"
	// +kubebuilder:validation:XValidation:rule="self == '/' || (!self.startsWith('/') && !self.split('/').exists(s, s == '' || s.startsWith('.')))",message="home must be \"/\" or a relative path of plain, visible names"
	Home string `json:"home,omitempty"`

	// cwd is the shell's working directory relative to the mounted home (Jupyter's POST
	// /api/terminals "cwd"). Empty means the home itself.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cwd is immutable"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="cwd must be relative and stay inside the home"
	Cwd string `json:"cwd,omitempty"`
}

// TerminalPhase is where a terminal is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Ended;Failed
type TerminalPhase string

// The phases of a Terminal.
const (
	// TerminalPending: its pod is being made, scheduled or started.
	TerminalPending TerminalPhase = "Pending"
	// TerminalRunning: its shell runs and its agent takes connections.
	TerminalRunning TerminalPhase = "Running"
	// TerminalEnded: its shell exited (the user typed exit); the Terminal waits to be deleted.
	TerminalEnded TerminalPhase = "Ended"
	// TerminalFailed: its pod could not run or was ended from outside (OOMKilled, evicted,
	// the image could not be pulled); the Ready condition's reason and message say why.
	TerminalFailed TerminalPhase = "Failed"
)

// TerminalStatus is what the controller and the terminal's agent observed.
type TerminalStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is Pending, Running, Ended or Failed.
	// +optional
	Phase TerminalPhase `json:"phase,omitempty"`

	// conditions: Ready (the agent takes connections; the reason says why not: PodPending,
	// ImagePullBackOff, OOMKilled, Evicted, ShellExited...) and Culled (set just before the
	// culler deletes an inactive terminal).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// podIP is the address of the terminal pod's agent.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodIP string `json:"podIP,omitempty"`

	// lastActivity is when a client last typed or the shell last printed, Jupyter's
	// last_activity.
	// +optional
	LastActivity *metav1.Time `json:"lastActivity,omitempty"`

	// connections is the number of clients attached to the terminal.
	// +optional
	Connections int32 `json:"connections,omitempty"`
}

// Terminal is a shell on a pseudo-terminal in a pod of its owner's: Jupyter's terminal. Its
// name is the terminal's name of the Jupyter API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=term,categories=nbkube
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Spec",type=string,JSONPath=`.spec.kernelSpec`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Clients",type=integer,JSONPath=`.status.connections`,priority=1
// +kubebuilder:printcolumn:name="Pod IP",type=string,JSONPath=`.status.podIP`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Terminal struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the terminal that was asked for.
	// +required
	Spec TerminalParameters `json:"spec"`

	// status is what runs.
	// +optional
	Status TerminalStatus `json:"status,omitempty"`
}

// TerminalList is a list of Terminals.
// +kubebuilder:object:root=true
type TerminalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Terminal `json:"items"`
}
