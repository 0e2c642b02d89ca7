package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nbkube/nbkube/internal/agentapi"
)

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
	// LabelTerminal names the Terminal a pod or secret belongs to.
	LabelTerminal = "nbkube.io/terminal"
	// LabelSession names the Session that created a Kernel.
	LabelSession = "nbkube.io/session"
	// LabelOwner tells whose a kernel's, terminal's or cluster's pods are (OwnerLabelValue of the owner), so
	// that network policies can let only the owner's kernels reach the owner's clusters.
	LabelOwner = "nbkube.io/owner"
	// AnnotationStartedBy names the user who started a Kernel for its owner (a gateway acting
	// for the user); that user keeps seeing the kernel while they may act for others.
	AnnotationStartedBy = "nbkube.io/started-by"
	// AnnotationRestart asks for a kernel's restart when its pod cannot do it (the pod is
	// gone, failed, or its agent does not answer, as after a node's restart): a new value
	// makes the controller replace a pod that is not ready with a new one, under the same
	// kernel id, and record the value in status.podRestart. The API server sets it when a
	// client restarts a dead kernel; an admin may set it with kubectl.
	AnnotationRestart = "nbkube.io/restart"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "nbkube"
)

// OwnerLabelValue is owner as a label value: the name itself when it is one (up to 63
// letters, digits, '-', '_' and '.', starting and ending with a letter or digit; names with
// '@' or '+' are not), else "u-" and 40 hexadecimal digits of its SHA-256. A name of that
// digest form is digested too, so that two owners never share a value.
func OwnerLabelValue(owner Owner) string {
	if len(validation.IsValidLabelValue(string(owner))) == 0 && !ownerDigest.MatchString(string(owner)) {
		return string(owner)
	}
	return ownerDigestOf(owner)
}

// ownerDigestOf is owner's digest form: "u-" and 40 hexadecimal digits of its SHA-256.
func ownerDigestOf(owner Owner) string {
	sum := sha256.Sum256([]byte(owner))
	return "u-" + hex.EncodeToString(sum[:20])
}

// ownerDigest is the form of OwnerLabelValue's digests: a name of that form is digested too,
// so that no two owners share a label value.
var ownerDigest = regexp.MustCompile(`^u-[0-9a-f]{40}$`)
