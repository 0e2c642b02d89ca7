package v1alpha1

import corev1 "k8s.io/api/core/v1"

// PodTemplate is what a KernelSpec adds to the pods of its kernels, or a Cluster to its
// engines' pods: where they run (node selector, tolerations, affinity, spread, priority,
// runtime class), what else they mount, how they are labelled, and an opt-in service account.
// nbkube's own parts of the pod (the agent, the security context, the user's home and
// contents, Secrets, ports, the environment it reads) are not fields here and cannot be
// overridden; what could collide with them (volume names, mount paths, label keys) is refused
// by the schema and again by the controller, which then reports why in a condition. Compute
// resources, GPUs and other extended resources included, are the resources beside the
// template.
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))",message="every volumeMount must name one of podTemplate.volumes"
// +kubebuilder:validation:XValidation:rule="!has(self.automountServiceAccountToken) || !self.automountServiceAccountToken || has(self.serviceAccountName)",message="automountServiceAccountToken needs a serviceAccountName: a kernel gets the token of an account its spec names, never one by default"
type PodTemplate struct {
	// labels are added to the pod's. Keys under nbkube.io/ (or a subdomain of it) and the app.kubernetes.io/
	// managed-by and component keys are nbkube's: network policies and quotas select pods
	// by them.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?nbkube[.]io/') && k != 'app.kubernetes.io/managed-by' && k != 'app.kubernetes.io/component')",message="label keys under nbkube.io/, app.kubernetes.io/managed-by and app.kubernetes.io/component are nbkube's own"
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the pod's. Keys under nbkube.io/ are nbkube's own.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?nbkube[.]io/'))",message="annotation keys under nbkube.io/ are nbkube's own"
	Annotations map[string]string `json:"annotations,omitempty"`

	// nodeSelector must match a node's labels for the pod to run there.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the pod run on nodes with matching taints, e.g. GPU nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity is the pod's node, pod and anti-pod affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// topologySpreadConstraints spread kernels across zones or nodes. Kernel pods carry the
	// labels nbkube.io/kernelspec (the spec's resource name) and nbkube.io/owner to select by.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// priorityClassName names the pods' PriorityClass.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// runtimeClassName names the RuntimeClass that runs the pods (gVisor, Kata, a GPU
	// runtime).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// serviceAccountName runs the pods as this ServiceAccount of the kernel's namespace
	// (for cloud workload identity, say). Its token is mounted only when
	// automountServiceAccountToken is true; kernels otherwise have no credentials for the
	// Kubernetes API.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// automountServiceAccountToken mounts the token of serviceAccountName into the kernel's
	// container. Default false.
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`

	// volumes are added to the pod's. Names nbkube uses itself are refused.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// volumeMounts are added to the container's (the kernel's, or the engine's); each names
	// one of volumes.
	// +optional
	// +listType=map
	// +listMapKey=mountPath
	// +kubebuilder:validation:MaxItems=32
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
}

// VolumeMount mounts a volume of the pod template into the pod's container.
type VolumeMount struct {
	// name is the volume's, one of podTemplate.volumes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// mountPath is where the volume appears. It is absolute and plain (no "." or ".." parts,
	// no trailing "/"), and not where nbkube mounts its own: see the podTemplate field of
	// KernelSpec and engineTemplate of Cluster.
	// +required
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(/[^/]+)+$') && !self.matches('/[.][.]?(/|$)')",message="a mountPath is absolute and plain: no . or .. parts, no trailing /"
	MountPath string `json:"mountPath"`

	// subPath mounts this path within the volume instead of its root.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	SubPath string `json:"subPath,omitempty"`

	// readOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Mount is the container's mount.
func (m VolumeMount) Mount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: m.ReadOnly}
}
