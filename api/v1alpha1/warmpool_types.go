package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// WarmPool keeps kernels of a spec started ahead of need, so that a start takes one that is
// already running instead of waiting for a pod and a kernel process.
//
// A warm kernel already has its user's home mounted and its owner set, since neither can
// change in a running pod without giving it more than one user's files: pools are per user,
// kept for the users who started a kernel of the spec within activeWithin. A user's first
// start of a spec (or the first after a pause longer than activeWithin) is a cold start; the
// ones after it find warm kernels. Warm kernels do not count toward their owner's limits
// (UserPolicy) until claimed, but their pods take the spec's resources on the nodes.
type WarmPool struct {
	// size is how many warm kernels each active user has ready: 1 makes every start after
	// the first fast while starts come one at a time, more serves several at once.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	Size int32 `json:"size"`

	// activeWithin is how long after a user's last start of a kernel of this spec their pool
	// is kept filled, e.g. "8h". A user's warm kernels are stopped when it runs out.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('720h')",message="activeWithin must be a duration above 0s and at most 720h, such as 8h"
	ActiveWithin *metav1.Duration `json:"activeWithin,omitempty"`
}

// WarmPoolStatus counts a spec's warm kernels.
type WarmPoolStatus struct {
	// ready counts warm kernels that answer and wait to be claimed.
	// +optional
	Ready int32 `json:"ready"`

	// starting counts warm kernels on their way to ready.
	// +optional
	Starting int32 `json:"starting"`

	// users counts the users whose pools are kept filled.
	// +optional
	Users int32 `json:"users"`
}

// Labels and annotations of warm kernels.
const (
	// LabelWarm marks a Kernel of a warm pool that nobody has claimed yet, with value "true".
	// The API server claims a kernel by removing the label with an update conditional on the
	// kernel's resourceVersion, so that of two replicas claiming one kernel only one gets it.
	// Unclaimed kernels are not in the Jupyter API, are not culled and do not count toward
	// their owner's limits.
	LabelWarm = "nbkube.io/warm"
	// AnnotationClaimed records when a warm kernel was claimed (RFC 3339): a claim is a start
	// of the user's, which keeps the user's pool filled for the spec's activeWithin.
	AnnotationClaimed = "nbkube.io/claimed"
	// AnnotationLastStart records, on warm kernels, the owner's last start of a kernel of the
	// spec (RFC 3339) when the kernel was made, so that a pool outlives the kernels it served
	// for the spec's activeWithin.
	AnnotationLastStart = "nbkube.io/last-start"
	// AnnotationSpecGeneration records, on warm kernels, the generation of the KernelSpec
	// they were made for: warm kernels of an older generation are replaced.
	AnnotationSpecGeneration = "nbkube.io/kernelspec-generation"
)

// Warm tells whether k is a warm kernel nobody has claimed yet (LabelWarm).
func (k *Kernel) Warm() bool { return k.Labels[LabelWarm] == "true" }
