package v1alpha1

// EventReason is the reason of an event nbkube records on its resources. Events are part of
// what admins read (`kubectl get events`, `kubectl describe`) and filter on
// (--field-selector reason=...), so their reasons are listed here with the API rather than
// in the controllers.
//
// Besides these, a Kernel's or Cluster's events carry the reasons of its pods' events, which
// are re-emitted onto it (Pulling, Unhealthy, Killing, ...), and a Kernel's Warning event on
// failing carries the reason of its Failed condition.
type EventReason string

// Events of a Kernel.
const (
	// EventCreatedPod: the Kernel's pod was created with its owner's own claim as its home.
	EventCreatedPod EventReason = "CreatedPod"
	// EventHomeOnSharedVolume: with claims per user (the manager's --home-claim), the
	// Kernel's owner has none, so its pod mounts the home from the contents volume.
	EventHomeOnSharedVolume EventReason = "HomeOnSharedVolume"
	// EventReplacedPod: a restart request replaced the Kernel's pod, which could not restart
	// the kernel.
	EventReplacedPod EventReason = "ReplacedPod"
	// EventCulled: the culler deleted the Kernel (Normal when idle, Warning when dead); the
	// note says why, as the Culled condition does.
	EventCulled EventReason = "Culled"
)

// Events of a Session.
const (
	// EventCreatedKernel: the Session started its Kernel.
	EventCreatedKernel EventReason = "CreatedKernel"
	// EventDeletedKernel: the Session deleted a Kernel it started and no longer uses.
	EventDeletedKernel EventReason = "DeletedKernel"
	// EventKernelGone: the Session was deleted because its Kernel is gone.
	EventKernelGone EventReason = "KernelGone"
)

// Events of a Cluster.
const (
	// EventClusterRunning: an ipcontroller pod was started.
	EventClusterRunning EventReason = "Running"
	// EventClusterStopped: the Cluster was stopped and its pods deleted.
	EventClusterStopped EventReason = "Stopped"
	// EventControllerReplaced: a failed ipcontroller pod is replaced, and its engines with it.
	EventControllerReplaced EventReason = "ControllerReplaced"
	// EventEngineReplaced: a failed engine pod is replaced.
	EventEngineReplaced EventReason = "EngineReplaced"
	// EventAdapted: an adaptive dask cluster's engines were set from its scheduler's
	// recommendation.
	EventAdapted EventReason = "Adapted"
	// EventRetireFailed: a dask cluster's scheduler did not retire the workers about to be
	// stopped; they were stopped anyway.
	EventRetireFailed EventReason = "RetireFailed"
	// EventScaledEngines: engine pods were started or stopped to match spec.engines.
	EventScaledEngines EventReason = "ScaledEngines"
	// EventIdleStopped: the Cluster was stopped after spec.idleTimeout without a task.
	EventIdleStopped EventReason = "IdleStopped"
)
