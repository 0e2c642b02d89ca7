package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InterruptMode is how a kernel is interrupted, as in Jupyter's kernel.json.
// +kubebuilder:validation:Enum=signal;message
type InterruptMode string

const (
	// InterruptModeSignal sends SIGINT to the kernel process.
	InterruptModeSignal InterruptMode = "signal"
	// InterruptModeMessage sends an interrupt_request on the control channel.
	InterruptModeMessage InterruptMode = "message"
)

// KernelSpecSpec describes one kind of kernel: what /api/kernelspecs lists and what a kernel
// pod of this kind runs. It mirrors Jupyter's kernel.json plus what a pod needs.
// +kubebuilder:validation:XValidation:rule="self.argv.exists(a, a.contains('{connection_file}'))",message="argv must pass {connection_file} to the kernel"
type KernelSpecSpec struct {
	// kernelName is the spec's name in Jupyter's API: its key in /api/kernelspecs, the name
	// that starts a kernel of it, and those kernels' "name". Empty means the resource's name.
	// Jupyter names a spec after its directory, which may hold what a resource name cannot
	// ("sample 2", "my_kernel"), so the two are kept apart. Jupyter matches names
	// case-insensitively and lists them in lower case, hence no upper case here. Two
	// KernelSpecs of a namespace with one name: the older is served, the other hidden.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^/A-Z\x00-\x1f\x7f]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="kernelName cannot be . or .."
	KernelName string `json:"kernelName,omitempty"`

	// displayName is the name shown to users, kernel.json's display_name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	DisplayName string `json:"displayName"`

	// language is the kernel's language, e.g. "python".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Language string `json:"language"`

	// argv is the kernel's command line. "{connection_file}" is replaced by the path of the
	// connection file the nbkube agent writes.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Argv []string `json:"argv"`

	// image is the container image of kernel pods. Any image that can run argv works: the
	// nbkube agent is copied into the pod. Empty means the operator's default kernel image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// interruptMode is how kernels of this spec are interrupted.
	// +optional
	// +kubebuilder:default=signal
	InterruptMode InterruptMode `json:"interruptMode,omitempty"`

	// env is set in the kernel's environment, kernel.json's env.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Env map[string]string `json:"env,omitempty"`

	// metadata is kernel.json's free-form metadata, returned as is by /api/kernelspecs.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *apiextensionsv1.JSON `json:"metadata,omitempty"`

	// resources are the compute resources of the kernel container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// parameters are what a start may choose for its kernel, within bounds: "{name}" in argv
	// and env values, compute resources, the image. See KernelParameter.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Parameters []KernelParameter `json:"parameters,omitempty"`

	// podTemplate places and extends the pods of this spec's kernels: node selector,
	// tolerations, affinity, topology spread, priority and runtime class, extra volumes and
	// mounts, labels and annotations, an opt-in service account. Volume names agent-bin,
	// kernel-secret, home, tmp, contents and ipcluster are nbkube's, as are mount paths /tmp
	// and /home/jovyan and those at or under /home/jovyan/work (the user's contents),
	// /opt/nbkube and /var/run/nbkube. Under /home/jovyan is fine: e.g. /home/jovyan/datasets.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.all(v, !(v.name in ['agent-bin', 'kernel-secret', 'home', 'tmp', 'contents', 'ipcluster']))",message="volume names agent-bin, kernel-secret, home, tmp, contents and ipcluster are nbkube's own"
	// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, !(m.mountPath in ['/tmp', '/home/jovyan']) && !['/home/jovyan/work', '/opt/nbkube', '/var/run/nbkube'].exists(p, m.mountPath == p || m.mountPath.startsWith(p + '/')))",message="mount paths /tmp, /home/jovyan, and those at or under /home/jovyan/work, /opt/nbkube or /var/run/nbkube are nbkube's own"
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`

	// logo is the kernel's logo (logo-64x64.png, logo-32x32.png or logo-svg.svg in Jupyter).
	// +optional
	Logo *KernelLogo `json:"logo,omitempty"`

	// files are the spec's other files, those Jupyter serves from a kernel spec's directory
	// under /kernelspecs/<name>/: kernel.js and kernel.css for the front end, logos, and
	// whatever else they fetch. logo, when set, is served as well and wins over a file of the
	// same name.
	// +optional
	Files *KernelSpecFiles `json:"files,omitempty"`

	// culling overrides the operator's idle culling for kernels of this spec; fields left
	// unset take the operator's settings (--cull-idle-timeout, --cull-connected, --cull-busy).
	// +optional
	Culling *KernelCulling `json:"culling,omitempty"`

	// warmPool keeps kernels of this spec started ahead of need for the users who start
	// them, so that their next start takes one at once. See WarmPool.
	// +optional
	WarmPool *WarmPool `json:"warmPool,omitempty"`
}

// KernelCulling says when idle kernels are shut down: Jupyter Server's
// MappingKernelManager.cull_idle_timeout, cull_connected and cull_busy for one kind of kernel.
// A dead kernel is culled whenever culling is on.
type KernelCulling struct {
	// idleTimeout is how long a kernel may go without activity (a message from the kernel)
	// before it is shut down, e.g. "1h". "0s" turns culling off for kernels of this spec.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="idleTimeout must be a duration of 0s or more, such as 90m"
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// cullConnected culls idle kernels that still have clients connected to their channels.
	// +optional
	CullConnected *bool `json:"cullConnected,omitempty"`

	// cullBusy culls busy kernels too (a cell that runs for longer than idleTimeout without
	// any output).
	// +optional
	CullBusy *bool `json:"cullBusy,omitempty"`
}

// KernelLogo is a small image served under /kernelspecs/<name>/.
type KernelLogo struct {
	// fileName is the name it is served under, e.g. "logo-64x64.png".
	// +required
	// +kubebuilder:validation:Pattern=`^logo-[A-Za-z0-9x]+\.(png|svg)$`
	// +kubebuilder:validation:MaxLength=64
	FileName string `json:"fileName"`

	// data is the image itself.
	// +required
	// +kubebuilder:validation:MaxLength=65536
	Data []byte `json:"data"`
}

// KernelSpecFiles says where a kernel spec's files are.
type KernelSpecFiles struct {
	// configMapName names a ConfigMap in the KernelSpec's namespace: each key is a file name,
	// its value the file, in data (UTF-8 text) or binaryData (anything else). Files in
	// subdirectories of a Jupyter kernel spec cannot be keys, so only the top-level files of
	// a spec's directory can be served. A missing ConfigMap means no files.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ConfigMapName string `json:"configMapName"`
}

// KernelSpecStatus reports whether the spec is usable.
type KernelSpecStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when the spec is valid and can start kernels.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// warmPool counts the spec's warm kernels, when it has a warm pool.
	// +optional
	WarmPool *WarmPoolStatus `json:"warmPool,omitempty"`
}

// KernelSpec is a kind of kernel users can start, an entry of /api/kernelspecs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ks;kspec,categories=nbkube
// +kubebuilder:printcolumn:name="Kernel Name",type=string,JSONPath=`.spec.kernelName`,priority=1
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Language",type=string,JSONPath=`.spec.language`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.status.warmPool.ready`
// +kubebuilder:printcolumn:name="Warm Users",type=integer,JSONPath=`.status.warmPool.users`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KernelSpec struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the kernel.
	// +required
	Spec KernelSpecSpec `json:"spec"`

	// status reports validation.
	// +optional
	Status KernelSpecStatus `json:"status,omitempty"`
}

// KernelSpecList is a list of KernelSpecs.
// +kubebuilder:object:root=true
type KernelSpecList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KernelSpec `json:"items"`
}

// JupyterName is the spec's name in Jupyter's API: spec.kernelName, else the resource's name.
func (ks *KernelSpec) JupyterName() string {
	if ks.Spec.KernelName != "" {
		return ks.Spec.KernelName
	}
	return ks.Name
}
