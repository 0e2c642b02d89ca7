package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// UserPolicySpec says what the users it selects may run: limits on their kernels and
// engines, the kernel specs they may start and the resources of kernels whose spec asks for
// none. A user is governed by every policy that names them, or, for the fields none of those
// sets, by the policies of their groups, or else by the policies for all users (see
// docs/users.md, "Quotas").
// +kubebuilder:validation:XValidation:rule="(has(self.users) && size(self.users) > 0) || (has(self.groups) && size(self.groups) > 0) || (has(self.allUsers) && self.allUsers)",message="select users, groups or allUsers"
type UserPolicySpec struct {
	// users are the names of the users the policy governs.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Users []string `json:"users,omitempty"`

	// groups are the identity provider's groups whose members the policy governs.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Groups []string `json:"groups,omitempty"`

	// allUsers makes the policy govern every user (the defaults of the installation).
	// +optional
	AllUsers bool `json:"allUsers,omitempty"`

	// limits bound what the users run; an unset limit is no limit.
	// +optional
	Limits UserLimits `json:"limits,omitempty"`

	// kernelSpecs are the KernelSpecs the users may start; empty means all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	KernelSpecs []string `json:"kernelSpecs,omitempty"`

	// defaultResources are given to the kernel container of a kernel whose KernelSpec sets
	// no request or limit of that resource.
	// +optional
	DefaultResources *corev1.ResourceRequirements `json:"defaultResources,omitempty"`
}

// UserLimits are the per-user limits of a UserPolicy. CPU, memory and GPUs count the requests
// of the kernel containers and engine containers (a limit where no request is set).
type UserLimits struct {
	// kernels is how many Kernels the user may have at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Kernels *int32 `json:"kernels,omitempty"`

	// terminals is how many Terminals the user may have at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Terminals *int32 `json:"terminals,omitempty"`

	// engines is how many parallel engines the user's running clusters may have in all.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Engines *int32 `json:"engines,omitempty"`

	// cpu bounds the CPU their kernels and engines request.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// memory bounds the memory their kernels and engines request.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	Memory *resource.Quantity `json:"memory,omitempty"`

	// gpu bounds the GPUs (nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915) their kernels
	// and engines request.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	GPU *resource.Quantity `json:"gpu,omitempty"`

	// uploadBytes bounds the bytes of the user's chunked uploads in progress.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!quantity(string(self)).isLessThan(quantity('0'))",message="must not be negative"
	UploadBytes *resource.Quantity `json:"uploadBytes,omitempty"`
}

// UserPolicy governs what users may run: limits, allowed kernel specs and default resources.
// `kubectl get userusages` shows each user's usage against the limits that apply.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=up,categories=nbkube
// +kubebuilder:printcolumn:name="Users",type=string,JSONPath=`.spec.users`
// +kubebuilder:printcolumn:name="Groups",type=string,JSONPath=`.spec.groups`
// +kubebuilder:printcolumn:name="All",type=boolean,JSONPath=`.spec.allUsers`
// +kubebuilder:printcolumn:name="Kernels",type=integer,JSONPath=`.spec.limits.kernels`
// +kubebuilder:printcolumn:name="Engines",type=integer,JSONPath=`.spec.limits.engines`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.spec.limits.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.limits.memory`
// +kubebuilder:printcolumn:name="GPU",type=string,JSONPath=`.spec.limits.gpu`,priority=1
// +kubebuilder:printcolumn:name="Specs",type=string,JSONPath=`.spec.kernelSpecs`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type UserPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy.
	// +required
	Spec UserPolicySpec `json:"spec"`
}

// UserPolicyList is a list of UserPolicies.
// +kubebuilder:object:root=true
type UserPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UserPolicy `json:"items"`
}

// ReservationKind is the kind of resource a reservation holds room for.
// +kubebuilder:validation:Enum=Kernel;Cluster;Terminal
type ReservationKind string

// The kinds of reservations.
const (
	ReservationKernel   ReservationKind = "Kernel"
	ReservationCluster  ReservationKind = "Cluster"
	ReservationTerminal ReservationKind = "Terminal"
)

// Reservation is room a user's kernel or running cluster takes in their limits. It is
// written before the resource is created or started, so that starts through several API
// servers, and by kubectl, cannot together go past a limit.
type Reservation struct {
	// kind is Kernel or Cluster.
	// +required
	Kind ReservationKind `json:"kind"`

	// name is the Kernel's or Cluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kernelSpec is a kernel's KernelSpec.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	KernelSpec string `json:"kernelSpec,omitempty"`

	// engines is a cluster's engines.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Engines int32 `json:"engines,omitempty"`

	// cpu, memory and gpu are the requests it counts.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// +optional
	GPU *resource.Quantity `json:"gpu,omitempty"`

	// since is when the reservation was made.
	// +required
	Since metav1.Time `json:"since"`
}

// UserUsageSpec is the ledger of one user's reservations. nbkube keeps it; an admin reads it.
type UserUsageSpec struct {
	// user is whose usage this is.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="user is immutable"
	User Owner `json:"user"`

	// groups are the user's groups as the API server last saw them at a start; a Kernel made
	// with kubectl is held to the policies of these groups.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Groups []string `json:"groups,omitempty"`

	// reservations are the user's kernels and running clusters.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4096
	Reservations []Reservation `json:"reservations,omitempty"`
}

// UserUsageStatus sums the reservations up against the limits that apply, as "used/limit"
// ("used" alone where there is no limit), for `kubectl get userusages`.
type UserUsageStatus struct {
	// policies name the UserPolicies that govern the user.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Policies string `json:"policies,omitempty"`
	// +optional
	Kernels string `json:"kernels,omitempty"`
	// +optional
	Engines string `json:"engines,omitempty"`
	// +optional
	Terminals string `json:"terminals,omitempty"`
	// +optional
	CPU string `json:"cpu,omitempty"`
	// +optional
	Memory string `json:"memory,omitempty"`
	// +optional
	GPU string `json:"gpu,omitempty"`
}

// UserUsage is what one user runs, against their limits: a ledger of reservations that the
// API servers and controllers update with optimistic concurrency. Its name is
// UsageName(user).
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=uu,categories=nbkube
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Kernels",type=string,JSONPath=`.status.kernels`
// +kubebuilder:printcolumn:name="Engines",type=string,JSONPath=`.status.engines`
// +kubebuilder:printcolumn:name="Terminals",type=string,JSONPath=`.status.terminals`,priority=1
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.memory`
// +kubebuilder:printcolumn:name="GPU",type=string,JSONPath=`.status.gpu`,priority=1
// +kubebuilder:printcolumn:name="Policies",type=string,JSONPath=`.status.policies`
type UserUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the ledger.
	// +required
	Spec UserUsageSpec `json:"spec"`

	// status sums it up. It is written with the spec, in one update (no status subresource).
	// +optional
	Status UserUsageStatus `json:"status,omitempty"`
}

// UserUsageList is a list of UserUsages.
// +kubebuilder:object:root=true
type UserUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UserUsage `json:"items"`
}

// UsageName is the name of owner's UserUsage: the name itself when it is a valid object name
// (lowercase letters, digits, '-' and '.'; up to 253), else "u-" and 40 hexadecimal digits of
// its SHA-256, as OwnerLabelValue.
func UsageName(owner Owner) string {
	if len(validation.IsDNS1123Subdomain(string(owner))) == 0 && !ownerDigest.MatchString(string(owner)) {
		return string(owner)
	}
	return ownerDigestOf(owner)
}
