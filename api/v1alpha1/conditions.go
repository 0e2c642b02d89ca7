package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Condition types of the kinds' status.conditions. They stay plain strings, as
// metav1.Condition.Type is: every reader passes them to the meta.*StatusCondition helpers,
// and a named type would only add a conversion at each of those calls.
const (
	// ConditionReady is True when the resource does what it is for: a kernel that answers, a
	// session whose kernel answers, a cluster whose controller and engines run, a valid spec.
	// Every kind has it.
	ConditionReady = "Ready"
	// ConditionFailed is True when the resource cannot get ready without a change: the reason
	// says why (ImagePullBackOff, CrashLoopBackOff, Unschedulable, ...). Clients stop waiting.
	// Kernels, Sessions and Clusters have it, only while it is True.
	ConditionFailed = "Failed"
	// ConditionControllerReady is True when a Cluster's ipcontroller pod runs and its hub
	// answers.
	ConditionControllerReady = "ControllerReady"
	// ConditionCulled is set on a Kernel or a Terminal just before the culler deletes it; its
	// reason is ReasonIdleTimeout, ReasonKernelDead or ReasonUnused (a Terminal's:
	// ReasonIdleTimeout).
	ConditionCulled = "Culled"
	// ConditionRestarted is True on a Kernel once it was restarted without anyone asking:
	// its reason says why the last time (ReasonKernelDied, ReasonPodDeleted), its message
	// how and when. Jupyter's clients only see "restarting" or "dead"; an admin reads here
	// what happened. It stays until the next such restart replaces it.
	ConditionRestarted = "Restarted"
)

// ConditionReason is the reason of a condition nbkube sets: what `kubectl get -o wide` and
// `kubectl describe` show, and what clients read when a resource fails. Its own type keeps
// nbkube's reasons apart from other strings: a reason passed through from the kubelet (a
// container's waiting or termination reason) is converted where it enters, visibly.
type ConditionReason string

// ReasonReconcileError is the reason of the Ready condition of a Kernel, Session or Cluster
// whose reconcile failed at a step (an API request refused or failed): the message is the
// error. The controller retries with back-off; the rest of the status stays as last observed.
const ReasonReconcileError ConditionReason = "ReconcileError"

// Reasons of a Kernel's Ready and Failed conditions, besides ReasonReconcileError and the
// container waiting and termination reasons of its pod, which are passed through
// (ContainerCreating, ErrImagePull, ImagePullBackOff, CrashLoopBackOff, OOMKilled, Evicted,
// ...). A Session mirrors them from its Kernel.
const (
	ReasonKernelSpecNotFound ConditionReason = "KernelSpecNotFound"
	ReasonKernelSpecInvalid  ConditionReason = "KernelSpecInvalid"
	// ReasonParametersInvalid: the Kernel's launch parameters are not what its KernelSpec
	// allows (a Kernel made or edited without the API server's check).
	ReasonParametersInvalid ConditionReason = "ParametersInvalid"
	// ReasonHomeInvalid: the owner's name renders no valid home (see the manager's
	// --user-home), so the kernel cannot mount one.
	ReasonHomeInvalid    ConditionReason = "HomeInvalid"
	ReasonPodConflict    ConditionReason = "PodConflict"
	ReasonSecretConflict ConditionReason = "SecretConflict"
	ReasonPodCreating    ConditionReason = "PodCreating"
	ReasonPodPending     ConditionReason = "PodPending"
	ReasonPodNotReady    ConditionReason = "PodNotReady"
	ReasonPodTerminating ConditionReason = "PodTerminating"
	ReasonPodFailed      ConditionReason = "PodFailed"
	ReasonKernelExited   ConditionReason = "KernelExited"
	ReasonUnschedulable  ConditionReason = corev1.PodReasonUnschedulable
	ReasonAgentReady     ConditionReason = "AgentReady"
	// ReasonQuotaExceeded: starting the kernel (or a cluster's engines) would take its owner
	// past a limit of their UserPolicies; the message names the limit and the usage. The
	// controller looks again every minute and when the owner's usage changes.
	ReasonQuotaExceeded ConditionReason = "QuotaExceeded"
	// ReasonKernelSpecNotAllowed: the owner's UserPolicies do not allow the kernel's spec.
	ReasonKernelSpecNotAllowed ConditionReason = "KernelSpecNotAllowed"
)

// Reasons of a Kernel's Restarted condition.
const (
	// ReasonKernelDied: the kernel process exited or was killed; the agent started it again
	// in the same pod, without its variables. The message gives the exit code or signal.
	ReasonKernelDied ConditionReason = "KernelDied"
	// ReasonPodDeleted: the kernel's pod was deleted by someone other than nbkube (an admin,
	// an eviction, a node drain); the kernel runs again in a new pod under the same id,
	// without its variables.
	ReasonPodDeleted ConditionReason = "PodDeleted"
)

// Reasons of a Kernel's Culled condition.
const (
	ReasonIdleTimeout ConditionReason = "IdleTimeout"
	ReasonKernelDead  ConditionReason = "KernelDead"
	// ReasonUnused: no client connected within the manager's --cull-unused-timeout.
	ReasonUnused ConditionReason = "Unused"
)

// ReasonShellExited is the reason of the Ready condition of a Terminal whose shell exited (its
// user typed exit): phase Ended. A Terminal's other reasons are a Kernel's: AgentReady when
// it runs, the pod's states while it starts or when it failed (PodPending, ErrImagePull,
// ImagePullBackOff, Unschedulable, OOMKilled, Evicted, PodFailed, ...), PodDeleted when its
// pod was deleted from outside (a terminal's shell cannot come back), QuotaExceeded; and
// its Culled condition's is ReasonIdleTimeout.
const ReasonShellExited ConditionReason = "ShellExited"

// Reasons of a Session's Ready and Failed conditions besides those mirrored from its Kernel
// and ReasonReconcileError.
const (
	ReasonKernelNotFound      ConditionReason = "KernelNotFound"
	ReasonKernelOfAnotherUser ConditionReason = "KernelOfAnotherUser"
	ReasonKernelCreating      ConditionReason = "KernelCreating"
)

// Reasons of a Cluster's ControllerReady, Ready and Failed conditions, besides
// ReasonReconcileError and the reasons of a pod that cannot run, as for a Kernel
// (ReasonUnschedulable, ImagePullBackOff, ...).
const (
	ReasonClusterRunning      ConditionReason = "Running"
	ReasonClusterStopped      ConditionReason = "Stopped"
	ReasonControllerStarting  ConditionReason = "ControllerStarting"
	ReasonEnginesStarting     ConditionReason = "EnginesStarting"
	ReasonControllerReady     ConditionReason = "ControllerReady"
	ReasonHubUnreachable      ConditionReason = "HubUnreachable"
	ReasonControllerPodFailed ConditionReason = "ControllerPodFailed"
	// ReasonFailedCreate: the API server refused a pod (quota, admission); retrying at once
	// would not help.
	ReasonFailedCreate ConditionReason = "FailedCreate"
)

// Reasons of a KernelSpec's Ready condition.
const (
	ReasonSpecValid   ConditionReason = "Valid"
	ReasonSpecInvalid ConditionReason = "Invalid"
)
