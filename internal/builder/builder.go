// Package builder makes the objects nbkube's controllers own (a kernel's pod and secret; a
// cluster's ipcontroller and engine pods, service and secret; the reStructuredText
// renderer's Deployment and secret) from the custom resources and the operator's options.
// Builders are pure: no client, no clock, no randomness of their own, so they are
// table-tested and the controllers only decide when to create or apply what they return.
package builder

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/homes"
)

// Options are the operator-wide settings the builders need; cmd/ fills them from flags.
type Options struct {
	// AgentImage is the operator's own image: kernel pods take the agent out of it.
	AgentImage string
	// AgentBinary is the path of the nbkube-agent binary inside AgentImage; the kernel pod's
	// init container runs `<AgentBinary> install` to copy it into the pod, or runs it from
	// the image mounted as a volume (AgentDelivery).
	AgentBinary string
	// AgentDelivery is how kernel pods get the agent out of AgentImage; empty, and AgentAuto
	// until the controllers decide it, are AgentInitContainer. AgentHostDir overrides it.
	AgentDelivery AgentDelivery
	// AgentHostDir, when set, is a directory of the node that holds nbkube-agent: kernel pods
	// mount it read-only (hostPath) instead of copying the agent out of AgentImage with an init
	// container. Only `nbkube local` sets it, where pods are processes of this host anyway
	// and the copy would only add a process, a status update and an event to every kernel
	// start.
	AgentHostDir string
	// DefaultKernelImage runs kernels whose KernelSpec names no image.
	DefaultKernelImage string
	// DefaultClusterImage runs clusters that name no image; it must have ipyparallel.
	DefaultClusterImage string
	// ImagePullPolicy of every container; empty leaves Kubernetes' default.
	ImagePullPolicy corev1.PullPolicy
	// ContentsClaim is the PersistentVolumeClaim holding the notebooks.
	ContentsClaim string
	// UserHome places each owner's home on the contents volume: a kernel whose spec names no
	// home mounts its owner's (KernelHome). Off (the whole volume) when zero.
	UserHome homes.Template
	// HomeClaims names each user's own PersistentVolumeClaim: a kernel whose home is its
	// owner's mounts that claim, where the admin has made it, instead of the home's subPath
	// of ContentsClaim (OwnClaim, UseClaim). Off when zero.
	HomeClaims homes.Claims
	// DaskDashboardBase is the base URL of the API server that proxies dask clusters'
	// dashboards: each scheduler serves its HTTP routes under DaskDashboardPrefix, the path
	// the API server proxies as is ("/" when empty).
	DaskDashboardBase string
	// ClusterControllerByPodIP makes engines and kernels reach a cluster's ipcontroller at its
	// pod IP instead of through its Service: the local node has no Services.
	ClusterControllerByPodIP bool
	// RunAsUser and RunAsGroup are the identity of kernel and cluster processes; the group
	// also owns the volumes (fsGroup).
	RunAsUser, RunAsGroup int64
	// RSTRenderer shapes the reStructuredText renderer's pods.
	RSTRenderer RSTRendererOptions
	// ScratchSize bounds each scratch volume (the home and /tmp emptyDirs) of kernel and
	// cluster pods: the kubelet evicts a pod that writes more, so one user's runaway writes
	// cannot fill a node's disk under everyone's pods. Zero leaves them unbounded.
	ScratchSize resource.Quantity
	// ScratchRequest is the ephemeral storage that kernel and cluster containers request when
	// their resources name none, so that the scheduler counts their scratch space.
	ScratchRequest resource.Quantity
	// AgentMemoryBudget bounds what each kernel pod's agent holds for clients (replay
	// buffers, queued output, messages held while the kernel starts) in the kernel's
	// container, whose memory limit the kernel shares. Zero leaves the agent's default.
	AgentMemoryBudget resource.Quantity
}

// DefaultOptions are the settings used when a flag is not given.
func DefaultOptions() Options {
	return Options{
		AgentImage:          "ghcr.io/nbkube/nbkube:latest",
		AgentBinary:         "/usr/local/bin/nbkube-agent",
		AgentDelivery:       AgentAuto,
		DefaultKernelImage:  "ghcr.io/nbkube/kernel-python:latest",
		DefaultClusterImage: "ghcr.io/nbkube/kernel-python:latest",
		ContentsClaim:       "nbkube-contents",
		RunAsUser:           1000,
		RunAsGroup:          100,
		RSTRenderer:         DefaultRSTRendererOptions(),
		ScratchSize:         resource.MustParse("1Gi"),
		ScratchRequest:      resource.MustParse("64Mi"),
	}
}

var (
	kernelGVK  = nbv1.GroupVersion.WithKind("Kernel")
	clusterGVK = nbv1.GroupVersion.WithKind("Cluster")
)

// objectMeta is the metadata of an owned object: named and namespaced like its owner unless
// told otherwise, labelled, and controlled by the owner, the one place owner references are
// set, so that deleting a custom resource collects everything made for it.
func objectMeta(owner metav1.Object, gvk schema.GroupVersionKind, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       owner.GetNamespace(),
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
	}
}

// restrictedContainer is the container security context of the "restricted" Pod Security
// Standard, plus a read-only root filesystem: what a kernel writes goes to its volumes.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func (o Options) podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(o.RunAsUser),
		RunAsGroup:     ptr.To(o.RunAsGroup),
		FSGroup:        ptr.To(o.RunAsGroup),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// withOwner adds the owner's label to a pod's labels. Only pods carry it, for network
// policies: the selectors that find nbkube's objects leave it out, so that they also find
// objects made before it existed.
func withOwner(labels map[string]string, owner nbv1.Owner) map[string]string {
	labels[nbv1.LabelOwner] = nbv1.OwnerLabelValue(owner)
	return labels
}

// scratch is a scratch emptyDir of a kernel or cluster pod, bounded by ScratchSize.
func (o Options) scratch(name string) corev1.Volume {
	v := emptyDir(name)
	if !o.ScratchSize.IsZero() {
		v.EmptyDir.SizeLimit = ptr.To(o.ScratchSize.DeepCopy())
	}
	return v
}

// requestScratch makes r request ScratchRequest of ephemeral storage unless it names an
// ephemeral-storage request or limit of its own (a limit alone is the request too).
func (o Options) requestScratch(r *corev1.ResourceRequirements) {
	if o.ScratchRequest.IsZero() {
		return
	}
	if _, ok := r.Requests[corev1.ResourceEphemeralStorage]; ok {
		return
	}
	if _, ok := r.Limits[corev1.ResourceEphemeralStorage]; ok {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	r.Requests[corev1.ResourceEphemeralStorage] = o.ScratchRequest.DeepCopy()
}

// AgentDelivery is how kernel pods get the agent binary out of the operator's image.
type AgentDelivery string

const (
	// AgentInitContainer copies the agent into an emptyDir with an init container, which
	// works on every cluster. It costs a container's start and the kubelet's notice that it
	// ended (its relist runs every second) before the kernel's container starts: 0.6-0.8 s
	// of a cold start on the test cluster.
	AgentInitContainer AgentDelivery = "InitContainer"
	// AgentImageVolume mounts the operator's image read-only as an image volume and runs the
	// agent from there: no init container. Needs Kubernetes' ImageVolume (on by default
	// since 1.35, always on since 1.36) and a runtime that mounts image volumes (containerd
	// 2.1+, CRI-O 1.31+); elsewhere the kernel's container fails to start.
	AgentImageVolume AgentDelivery = "ImageVolume"
	// AgentAuto is AgentImageVolume where every node can mount image volumes, else
	// AgentInitContainer: the controllers decide (controllers.AgentDeliveries) and give the
	// builder one of the two; the builder takes AgentAuto itself as AgentInitContainer.
	AgentAuto AgentDelivery = "Auto"
)

// ParseAgentDelivery reads a flag's value.
func ParseAgentDelivery(s string) (AgentDelivery, error) {
	switch d := AgentDelivery(s); d {
	case AgentInitContainer, AgentImageVolume, AgentAuto:
		return d, nil
	}
	return "", fmt.Errorf("agent delivery %q is none of %s, %s and %s", s, AgentAuto, AgentInitContainer, AgentImageVolume)
}

// AgentImageDir is where an image volume of the operator's image is mounted (AgentImageVolume).
const AgentImageDir = "/opt/nbkube/image"

// agentFromImage says the pods run the agent from an image volume of AgentImage.
func (o Options) agentFromImage() bool {
	return o.AgentHostDir == "" && o.AgentDelivery == AgentImageVolume
}

// agentPath is the agent binary's path in the pods' containers.
func (o Options) agentPath() string {
	if o.agentFromImage() {
		return path.Join(AgentImageDir, o.AgentBinary)
	}
	return AgentBinary
}

// agentMount is where the agent's container finds the agent binary, read-only.
func (o Options) agentMount() corev1.VolumeMount {
	m := corev1.VolumeMount{Name: "agent-bin", MountPath: AgentBinDir, ReadOnly: true}
	if o.agentFromImage() {
		m.MountPath = AgentImageDir
	}
	return m
}

// addAgent gives a pod that runs the agent its binary in the first volume: the operator's
// image mounted as a volume (AgentImageVolume), or an emptyDir that an init container copies
// it into, or, where the node is this machine (nbkube local), the host's directory that
// holds it.
func (o Options) addAgent(spec *corev1.PodSpec) {
	if o.AgentHostDir != "" {
		spec.Volumes = append([]corev1.Volume{{Name: "agent-bin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: o.AgentHostDir, Type: ptr.To(corev1.HostPathDirectory),
		}}}}, spec.Volumes...)
		return
	}
	if o.agentFromImage() {
		spec.Volumes = append([]corev1.Volume{{Name: "agent-bin", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference: o.AgentImage, PullPolicy: o.ImagePullPolicy,
		}}}}, spec.Volumes...)
		return
	}
	spec.Volumes = append([]corev1.Volume{emptyDir("agent-bin")}, spec.Volumes...)
	spec.InitContainers = append([]corev1.Container{{
		Name:            InstallAgentContainer,
		Image:           o.AgentImage,
		ImagePullPolicy: o.ImagePullPolicy,
		Command:         []string{o.AgentBinary, agentapi.CommandInstall, AgentBinary},
		VolumeMounts:    []corev1.VolumeMount{{Name: "agent-bin", MountPath: AgentBinDir}},
		SecurityContext: restrictedContainer(),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
		}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}, spec.InitContainers...)
}
