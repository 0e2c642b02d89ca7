package builder

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// The reStructuredText renderer: docutils, a large Python parser fed with any user's input,
// runs where kernels run (in the kernel image, under the kernels' security context, with no
// service account token, no volume but its token and an emptyDir), never in the API server,
// which holds every user's token and the contents volume.
const (
	// ComponentRSTRenderer is the LabelComponent value of the renderer's Deployment, pods
	// and Secret; the API server finds the ready pods by it.
	ComponentRSTRenderer = "rst-renderer"
	// RSTRendererName names the renderer's Deployment and Secret.
	RSTRendererName = "nbkube-rst-renderer"
	// RSTRendererContainer is the name of the renderer pods' main container.
	RSTRendererContainer = "renderer"
	// AnnotationRSTSecret on the renderer's pod template is the UID of the Secret its token
	// comes from: a Secret made anew (with a new token) rolls the pods, which read it at start.
	AnnotationRSTSecret = "nbkube.io/rst-renderer-secret"
)

// RSTRendererOptions shape the renderer's Deployment.
type RSTRendererOptions struct {
	// Image runs the renderer; DefaultKernelImage when empty. It needs python3 with docutils.
	Image string
	// Replicas of the renderer.
	Replicas int32
	// Python are the interpreters the renderer tries, in order, for one with docutils.
	Python []string
	// Resources of the renderer's container.
	Resources corev1.ResourceRequirements
}

// DefaultRSTRendererOptions are one replica of python3, with room for docutils' worst
// documents and no more.
func DefaultRSTRendererOptions() RSTRendererOptions {
	return RSTRendererOptions{
		Replicas: 1,
		Python:   []string{"python3"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
	}
}

// RSTRendererLabels are the labels of the renderer's objects; they select its pods too.
func RSTRendererLabels() map[string]string {
	return map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: ComponentRSTRenderer}
}

// rstRendererMeta names and labels a renderer object; owner, when not nil, is the Deployment
// of the manager that made it, so that the renderer goes with the installation.
func rstRendererMeta(namespace string, owner *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: RSTRendererName, Namespace: namespace, Labels: RSTRendererLabels()}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

// RSTRendererSecret holds the renderer's token, which only the API server reads; the caller
// makes it, so that the builder stays deterministic.
func RSTRendererSecret(namespace, token string, owner *metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: rstRendererMeta(namespace, owner),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		StringData: map[string]string{agentapi.SecretKeyToken: token},
	}
}

// RSTRendererDeployment runs `nbkube-agent render-rst` in the renderer image: the agent comes
// from the operator image as in kernel pods, the token from the Secret whose UID is secretUID.
func RSTRendererDeployment(namespace string, secretUID string, o Options, owner *metav1.OwnerReference) *appsv1.Deployment {
	r := o.RSTRenderer
	image := r.Image
	if image == "" {
		image = o.DefaultKernelImage
	}
	args := []string{agentapi.CommandRenderRST}
	for _, p := range r.Python {
		args = append(args, "--python", p)
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(AgentPortName)}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		}
	}
	spec := corev1.PodSpec{
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](15),
		SecurityContext:               o.podSecurity(),
		Containers: []corev1.Container{{
			Name:            RSTRendererContainer,
			Image:           image,
			ImagePullPolicy: o.ImagePullPolicy,
			Command:         []string{o.agentPath()},
			Args:            args,
			Env: []corev1.EnvVar{
				{Name: "HOME", Value: "/tmp"},
				field(agentapi.EnvNamespace, "metadata.namespace"),
				field(agentapi.EnvPodIP, "status.podIP"),
				{Name: agentapi.EnvAgentPort, Value: strconv.Itoa(agentapi.Port)},
				{Name: agentapi.EnvSecretDir, Value: SecretDir},
				{Name: agentapi.EnvTerminationLog, Value: TerminationLog},
			},
			Ports:     []corev1.ContainerPort{{Name: AgentPortName, ContainerPort: agentapi.Port, Protocol: corev1.ProtocolTCP}},
			Resources: *r.Resources.DeepCopy(),
			VolumeMounts: []corev1.VolumeMount{
				o.agentMount(),
				{Name: "renderer-secret", MountPath: SecretDir, ReadOnly: true},
				{Name: "tmp", MountPath: "/tmp"},
			},
			ReadinessProbe:           probe(agentapi.PathReadyz),
			LivenessProbe:            probe(agentapi.PathHealthz),
			SecurityContext:          restrictedContainer(),
			TerminationMessagePath:   TerminationLog,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
		Volumes: []corev1.Volume{
			{Name: "renderer-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  RSTRendererName,
				DefaultMode: ptr.To[int32](0o440),
			}}},
			emptyDir("tmp"),
		},
	}
	o.addAgent(&spec)
	return &appsv1.Deployment{
		ObjectMeta: rstRendererMeta(namespace, owner),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(r.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: RSTRendererLabels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      RSTRendererLabels(),
					Annotations: map[string]string{AnnotationRSTSecret: secretUID},
				},
				Spec: spec,
			},
		},
	}
}
