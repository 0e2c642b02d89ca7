package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterState is whether a cluster should run.
// +kubebuilder:validation:Enum=Running;Stopped
type ClusterState string

const (
	// ClusterRunning runs the controller and the engines.
	ClusterRunning ClusterState = "Running"
	// ClusterStopped runs nothing; the cluster stays listed and can be started again.
	ClusterStopped ClusterState = "Stopped"
)

// ClusterFramework is what a cluster runs.
// +kubebuilder:validation:Enum=ipyparallel;dask
type ClusterFramework string

const (
	// FrameworkIPyParallel runs an ipcontroller and ipengines (docs/ipyparallel.md).
	FrameworkIPyParallel ClusterFramework = "ipyparallel"
	// FrameworkDask runs a Dask scheduler and Dask workers (docs/dask.md).
	FrameworkDask ClusterFramework = "dask"
)

// ClusterParameters is the spec of a Cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.maxEngines) || self.framework == 'dask'",message="minEngines and maxEngines (adaptive scaling) are for dask clusters"
// +kubebuilder:validation:XValidation:rule="!has(self.minEngines) || has(self.maxEngines)",message="minEngines needs maxEngines"
// +kubebuilder:validation:XValidation:rule="!has(self.minEngines) || !has(self.maxEngines) || self.minEngines <= self.maxEngines",message="minEngines must not exceed maxEngines"
type ClusterParameters struct {
	// owner is the user the cluster belongs to.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="owner is immutable"
	Owner Owner `json:"owner"`

	// framework is what the cluster runs: ipyparallel (an ipcontroller and its engines) or
	// dask (a Dask scheduler and its workers, which engines then counts).
	// +optional
	// +kubebuilder:default=ipyparallel
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="framework is immutable"
	Framework ClusterFramework `json:"framework,omitempty"`

	// state says whether the cluster runs.
	// +optional
	// +kubebuilder:default=Running
	State ClusterState `json:"state,omitempty"`

	// engines is the number of engines (a dask cluster's workers) while the cluster runs,
	// IPython's n.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	Engines int32 `json:"engines,omitempty"`

	// minEngines and maxEngines turn on adaptive scaling of a dask cluster (maxEngines set):
	// the controller sets engines from the scheduler's own recommendation (Dask's
	// adaptive_target), within [minEngines, maxEngines] and the owner's engines limit, adding
	// workers at once and retiring them once the scheduler has wanted fewer for a while.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	MinEngines *int32 `json:"minEngines,omitempty"`

	// maxEngines: see minEngines.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	MaxEngines *int32 `json:"maxEngines,omitempty"`

	// image is the container image of the controller and engine pods; it must have
	// ipyparallel, or for a dask cluster distributed. Empty means the operator's default
	// cluster image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// engineResources are the compute resources of each engine.
	// +optional
	EngineResources corev1.ResourceRequirements `json:"engineResources,omitempty"`

	// engineTemplate places and extends the engines' pods as a KernelSpec's podTemplate
	// does its kernels' (GPU nodes, datasets). Volume names profile, tmp and cluster-secret
	// are nbkube's, as are mount paths /tmp and those at or under /ipython and
	// /var/run/nbkube. The ipcontroller's pod is placed as nbkube's defaults say.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.all(v, !(v.name in ['profile', 'tmp', 'cluster-secret']))",message="volume names profile, tmp and cluster-secret are nbkube's own"
	// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, m.mountPath != '/tmp' && !['/ipython', '/var/run/nbkube'].exists(p, m.mountPath == p || m.mountPath.startsWith(p + '/')))",message="mount paths /tmp, and those at or under /ipython or /var/run/nbkube are nbkube's own"
	EngineTemplate *PodTemplate `json:"engineTemplate,omitempty"`

	// idleTimeout stops a running cluster (sets state to Stopped) once its engines have had no
	// task for this long, e.g. "1h". Unset or "0s" never stops it.
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
}

// ClusterStatus reports the controller and the engines.
type ClusterStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: ControllerReady, Ready (controller and every engine ready), Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// readyEngines is the number of engines registered with the running ipcontroller (the
	// workers with the Dask scheduler).
	// +optional
	ReadyEngines int32 `json:"readyEngines"`

	// dashboardAddress is where a running dask cluster's scheduler serves HTTP (its pod's
	// address and port), to which the API server proxies its dashboard for the owner.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DashboardAddress string `json:"dashboardAddress,omitempty"`

	// tasks is the number of tasks a dask cluster's scheduler holds (waiting, running or
	// with results in memory).
	// +optional
	Tasks int64 `json:"tasks,omitempty"`

	// busyEngines is the number of registered engines with tasks queued or running.
	// +optional
	BusyEngines int32 `json:"busyEngines,omitempty"`

	// completedTasks is the number of tasks the engines have completed, as the ipcontroller
	// counts them; it changing is activity. A dask cluster's scheduler does not count them:
	// there tasks changing is activity.
	// +optional
	CompletedTasks int64 `json:"completedTasks,omitempty"`

	// lastActivity is when the cluster was last seen with a task queued, running or newly
	// completed, or when it started; idleTimeout counts from it.
	// +optional
	LastActivity *metav1.Time `json:"lastActivity,omitempty"`
}

// Cluster is a cluster of IPython parallel engines with their controller, or of Dask workers
// with their scheduler, run as plain pods: one controller (scheduler) pod behind a Service,
// and one pod per engine (worker). Its name is the profile of the cluster API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ipcluster,categories=nbkube
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.framework`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Engines",type=integer,JSONPath=`.spec.engines`
// +kubebuilder:printcolumn:name="Ready Engines",type=integer,JSONPath=`.status.readyEngines`
// +kubebuilder:printcolumn:name="Busy Engines",type=integer,JSONPath=`.status.busyEngines`,priority=1
// +kubebuilder:printcolumn:name="Last Activity",type=date,JSONPath=`.status.lastActivity`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the cluster that was asked for.
	// +required
	Spec ClusterParameters `json:"spec"`

	// status is what runs.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// IsDask tells whether the cluster runs Dask.
func (c *Cluster) IsDask() bool { return c.Spec.Framework == FrameworkDask }

// Adaptive tells whether the controller sets the cluster's engines from its scheduler's
// recommendation.
func (c *Cluster) Adaptive() bool { return c.IsDask() && c.Spec.MaxEngines != nil }

// ClusterList is a list of Clusters.
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}
