package builder

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// The shape of a terminal pod, beside a kernel pod's: the same image, volumes, mounts and
// security, its agent in the terminal role (agentapi.CommandTerminal).
const (
	// TerminalContainer is the name of a terminal pod's main container.
	TerminalContainer = "terminal"
	// ComponentTerminal is the LabelComponent value of terminal pods and secrets.
	ComponentTerminal = "terminal"
)

var terminalGVK = nbv1.GroupVersion.WithKind("Terminal")

// TerminalLabels are the labels of a terminal's pod and secret.
func TerminalLabels(t *nbv1.Terminal) map[string]string {
	return map[string]string{
		nbv1.LabelManagedBy:  nbv1.ManagedByValue,
		nbv1.LabelComponent:  ComponentTerminal,
		nbv1.LabelTerminal:   t.Name,
		nbv1.LabelKernelSpec: t.Spec.KernelSpec,
	}
}

// TerminalSecret holds the terminal agent's token (agenttoken.Terminal), which the caller
// derives, as the API server does without reading the Secret. It is named as the Terminal.
func TerminalSecret(t *nbv1.Terminal, agentToken string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: objectMeta(t, terminalGVK, t.Name, TerminalLabels(t)),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		StringData: map[string]string{agentapi.SecretKeyToken: agentToken},
	}
}

// TerminalDir is the shell's working directory in the terminal's pod: its cwd under the
// mounted home (ContentsDir).
func TerminalDir(t *nbv1.Terminal) string {
	if t.Spec.Cwd == "" {
		return ContentsDir
	}
	return path.Join(ContentsDir, path.Clean(t.Spec.Cwd))
}

// TerminalPod is the pod that runs a terminal: a kernel pod of spec (its image, resources
// and pod template; its argv is not run) whose agent runs a shell on a pseudo-terminal in the
// owner's home instead of a kernel (`nbkube-agent terminal --dir DIR`; the agent picks the
// shell), so that a terminal reaches what the owner's kernels reach and nothing more: the
// same home, security context, labels for the network policies (LabelOwner) and placement.
func TerminalPod(t *nbv1.Terminal, spec *nbv1.KernelSpec, o Options) *corev1.Pod {
	image := spec.Spec.Image
	if image == "" {
		image = o.DefaultKernelImage
	}
	// The controller refuses a terminal without a valid home before building its pod; should
	// one get here anyway, it gets no contents rather than the whole volume.
	home, homeErr := HomeOf(t.Spec.Owner, t.Spec.Home, o)
	dir := TerminalDir(t)
	if homeErr != nil {
		dir = HomeDir
	}
	pod := &corev1.Pod{
		ObjectMeta: objectMeta(t, terminalGVK, t.Name, withOwner(TerminalLabels(t), t.Spec.Owner)),
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// A shell has no business with the Kubernetes API, nor with other services.
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			SecurityContext:               o.podSecurity(),
			Containers: []corev1.Container{{
				Name:            TerminalContainer,
				Image:           image,
				ImagePullPolicy: o.ImagePullPolicy,
				// The directory is an argument of its own: the local node translates whole
				// paths under a volume's mount to the host's.
				Command: []string{o.agentPath(), agentapi.CommandTerminal, "--dir", dir},
				// The home always exists (it is the mount); the agent starts the shell in the
				// cwd, and fails saying so when it does not exist, rather than have the runtime
				// make the directory in the user's home.
				WorkingDir: ContentsDir,
				Env:        terminalEnv(spec),
				Ports:      []corev1.ContainerPort{{Name: AgentPortName, ContainerPort: agentapi.Port, Protocol: corev1.ProtocolTCP}},
				Resources:  *spec.Spec.Resources.DeepCopy(),
				VolumeMounts: []corev1.VolumeMount{
					o.agentMount(),
					{Name: "kernel-secret", MountPath: SecretDir, ReadOnly: true},
					{Name: "home", MountPath: HomeDir},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "contents", MountPath: ContentsDir, SubPath: home},
				},
				// The agent listens before it starts the shell and answers readyz at once. The
				// first probe comes when the node is ready for it (see readinessDelay).
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: agentapi.PathReadyz, Port: intstr.FromString(AgentPortName)}},
					InitialDelaySeconds: o.readinessDelay(),
					PeriodSeconds:       10,
					TimeoutSeconds:      5,
				},
				// A hung agent makes the shell unreachable; with restartPolicy Never the pod
				// then fails and the terminal says so instead of hanging forever.
				LivenessProbe: &corev1.Probe{
					ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: agentapi.PathHealthz, Port: intstr.FromString(AgentPortName)}},
					InitialDelaySeconds: 5,
					PeriodSeconds:       10,
					TimeoutSeconds:      5,
					FailureThreshold:    6,
				},
				SecurityContext:          restrictedContainer(),
				TerminationMessagePath:   TerminationLog,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: []corev1.Volume{
				// The kernels' name: a KernelSpec's pod template may not use it (kernelReserved).
				{Name: "kernel-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName:  t.Name,
					DefaultMode: ptr.To[int32](0o440),
				}}},
				o.scratch("home"),
				o.scratch("tmp"),
				{Name: "contents", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: o.ContentsClaim,
				}}},
			},
		},
	}
	if homeErr != nil {
		dropContents(&pod.Spec)
	}
	o.requestScratch(&pod.Spec.Containers[0].Resources)
	o.addAgent(&pod.Spec)
	applyPodTemplate(pod, spec.Spec.PodTemplate)
	// A shell's state (its processes, what scrolled by) is the pod's memory, as a kernel's.
	pod.Annotations = addMissing(pod.Annotations, map[string]string{AnnotationSafeToEvict: "false"})
	return pod
}

// terminalEnv is the KernelSpec's env (the kernels' environment, a conda environment's PATH
// say), then what the agent needs, which the spec may not override.
func terminalEnv(spec *nbv1.KernelSpec) []corev1.EnvVar {
	return append(userEnv(5, spec.Spec.Env),
		corev1.EnvVar{Name: "HOME", Value: HomeDir},
		fieldEnv(agentapi.EnvPodIP, "status.podIP"),
		corev1.EnvVar{Name: agentapi.EnvAgentPort, Value: strconv.Itoa(agentapi.Port)},
		corev1.EnvVar{Name: agentapi.EnvSecretDir, Value: SecretDir},
		corev1.EnvVar{Name: agentapi.EnvTerminationLog, Value: TerminationLog},
	)
}
