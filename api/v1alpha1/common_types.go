package v1alpha1

import "github.com/nbkube/nbkube/internal/agentapi"

// Owner is the user a resource belongs to: the identity of the Jupyter API request that
// created it, or whatever an admin sets. Users see and touch only their own resources.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
type Owner string

// ExecutionState is Jupyter's execution_state of a kernel.
// +kubebuilder:validation:Enum=starting;idle;busy;restarting;dead
type ExecutionState string

// The execution states Jupyter clients know.
const (
	ExecutionStateStarting   ExecutionState = agentapi.ExecutionStarting
	ExecutionStateIdle       ExecutionState = agentapi.ExecutionIdle
	ExecutionStateBusy       ExecutionState = agentapi.ExecutionBusy
	ExecutionStateRestarting ExecutionState = agentapi.ExecutionRestarting
	ExecutionStateDead       ExecutionState = agentapi.ExecutionDead
)

// Labels and annotations nbkube puts on the objects it creates.
const (
	// LabelComponent tells kernel pods from cluster controller and engine pods.
	LabelComponent = "app.kubernetes.io/component"
	// LabelManagedBy marks objects made by nbkube.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelKernel names the Kernel a pod or secret belongs to.
	LabelKernel = "nbkube.io/kernel"
	// LabelKernelSpec names the KernelSpec a kernel pod runs.
	LabelKernelSpec = "nbkube.io/kernelspec"
	// LabelCluster names the Cluster a pod, service or secret belongs to.
	LabelCluster = "nbkube.io/cluster"
	// LabelSession names the Session that created a Kernel.
	LabelSession = "nbkube.io/session"
	// AnnotationStartedBy names the user who started a Kernel for its owner (a gateway acting
	// for the user); that user keeps seeing the kernel while they may act for others.
	AnnotationStartedBy = "nbkube.io/started-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "nbkube"
)
