package builder

import (
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// The shape of a kernel pod; what the agent inside reads of it is in agentapi.
const (
	// AgentPortName names agentapi.Port in the pod spec.
	AgentPortName = "agent"
	// AgentBinDir is the emptyDir the init container copies the nbkube binary into.
	AgentBinDir = "/opt/nbkube/bin"
	// SecretDir is where the kernel's Secret is mounted.
	SecretDir = "/var/run/nbkube/kernel"
	// HomeDir is the kernel's HOME, writable while the root filesystem is not.
	HomeDir = "/home/jovyan"
	// ContentsDir is where the contents volume is mounted: the notebooks, the kernel's
	// working directory tree. The path is the one Jupyter's docker-stacks images use.
	ContentsDir = HomeDir + "/work"
	// KernelContainer is the name of the kernel pod's main container.
	KernelContainer = "kernel"
	// InstallAgentContainer is the name of the init container that copies the agent.
	InstallAgentContainer = "install-agent"

	// ComponentKernel is the LabelComponent value of kernel pods and secrets.
	ComponentKernel = "kernel"
)

// AnnotationSafeToEvict tells the cluster autoscaler whether it may evict a pod to take its
// node away. A kernel's state is the memory of its process, which no other pod can take over,
// so kernel pods say "false" unless their spec's pod template says otherwise (for kernels
// whose loss is cheap). Idle culling is what frees nodes of kernels nobody uses.
const AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

// TerminationLog is the kernel container's terminationMessagePath: in the writable /tmp,
// where the local node finds it too.
const TerminationLog = "/tmp/termination-log"

// AgentBinary is the path of the agent in kernel pods: the small nbkube-agent binary, which
// `nbkube install` copies from beside the nbkube binary of the operator's image.
var AgentBinary = path.Join(AgentBinDir, agentapi.BinaryName)

// KernelLabels are the labels of a kernel's pod and secret.
func KernelLabels(k *nbv1.Kernel) map[string]string {
	return map[string]string{
		nbv1.LabelManagedBy:  nbv1.ManagedByValue,
		nbv1.LabelComponent:  ComponentKernel,
		nbv1.LabelKernel:     k.Name,
		nbv1.LabelKernelSpec: k.Spec.KernelSpec,
	}
}

// KernelSecret holds the kernel's HMAC key and the agent's token. Both come from the caller
// so that the builder stays deterministic; they never change for the kernel's lifetime.
func KernelSecret(k *nbv1.Kernel, hmacKey, agentToken string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: objectMeta(k, kernelGVK, k.Name, KernelLabels(k)),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		StringData: map[string]string{agentapi.SecretKeyHMAC: hmacKey, agentapi.SecretKeyToken: agentToken},
	}
}

// KernelPod is the pod that runs a kernel: an init container copies the agent out of the
// operator image into an emptyDir, so any image with a Jupyter kernel in it can be a
// kernel image; the main container runs `nbkube-agent -- <argv>` with the contents volume
// as the working directory tree.
func KernelPod(k *nbv1.Kernel, spec *nbv1.KernelSpec, o Options) *corev1.Pod {
	image := spec.Spec.Image
	if image == "" {
		image = o.DefaultKernelImage
	}
	interrupt := spec.Spec.InterruptMode
	if interrupt == "" {
		interrupt = nbv1.InterruptModeSignal
	}
	workDir := path.Join(ContentsDir, kernelPath(k))
	// The controller refuses a kernel without a valid home before building its pod; should
	// one get here anyway, it gets no contents rather than the whole volume.
	home, homeErr := KernelHome(k, o)
	pod := agentPod(objectMeta(k, kernelGVK, k.Name, withOwner(KernelLabels(k), k.Spec.Owner)), o, home, homeErr, corev1.Container{
		Name:       KernelContainer,
		Image:      image,
		Command:    agentCommand(o),
		Args:       slices.Clone(spec.Spec.Argv),
		WorkingDir: workDir,
		Env:        kernelEnv(k, spec, interrupt),
		Resources:  *spec.Spec.Resources.DeepCopy(),
		// The agent holds the probe until the kernel answers (up to 25 s), so the pod is
		// ready the moment the kernel is, and a kernel that takes a while to start does not
		// leave failed probes (event writes): twenty kernels starting at once on two cores
		// take 10-15 s. The first probe comes when the node is ready for it (see
		// readinessDelay). Later probes come at Kubernetes' default period: each is a
		// connection and a request for the node and the agent, and nothing waits on them
		// (the API server asks the agent itself).
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: agentapi.PathReadyz + "?" + agentapi.QueryWait + "=25s", Port: intstr.FromString(AgentPortName)}},
			InitialDelaySeconds: o.readinessDelay(),
			PeriodSeconds:       10,
			TimeoutSeconds:      30,
			FailureThreshold:    1,
		},
	}, k.Name)
	attachCluster(pod, k.Spec.Cluster)
	applyPodTemplate(pod, spec.Spec.PodTemplate)
	pod.Annotations = addMissing(pod.Annotations, map[string]string{AnnotationSafeToEvict: "false"})
	return pod
}

// agentPod is the pod of a kernel or a terminal, around main, its container: an agent of the
// operator's image (o.addAgent) serves it, with the agent's Secret secretName, a scratch HOME
// and /tmp, and home (a subPath of the contents volume; no contents when homeErr) at
// ContentsDir. It runs once (restartPolicy Never), with the kernels' security context, and
// without the Kubernetes API or other services.
func agentPod(meta metav1.ObjectMeta, o Options, home string, homeErr error, main corev1.Container, secretName string) *corev1.Pod {
	main.ImagePullPolicy = o.ImagePullPolicy
	main.Ports = []corev1.ContainerPort{{Name: AgentPortName, ContainerPort: agentapi.Port, Protocol: corev1.ProtocolTCP}}
	main.VolumeMounts = []corev1.VolumeMount{
		o.agentMount(),
		{Name: "kernel-secret", MountPath: SecretDir, ReadOnly: true},
		{Name: "home", MountPath: HomeDir},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "contents", MountPath: ContentsDir, SubPath: home},
	}
	// A hung agent makes the kernel or shell unreachable; with restartPolicy Never the pod
	// then fails and the resource says so instead of hanging forever.
	main.LivenessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: agentapi.PathHealthz, Port: intstr.FromString(AgentPortName)}},
		// The agent listens within milliseconds, but a probe at the very start would fail
		// and leave a misleading warning event.
		InitialDelaySeconds: 5,
		PeriodSeconds:       10,
		TimeoutSeconds:      5,
		FailureThreshold:    6,
	}
	main.SecurityContext = restrictedContainer()
	main.TerminationMessagePath = TerminationLog
	main.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	pod := &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			SecurityContext:               o.podSecurity(),
			Containers:                    []corev1.Container{main},
			Volumes: []corev1.Volume{
				{Name: "kernel-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: secretName,
					// Group-readable: the files belong to root and the pod's fsGroup.
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
	return pod
}

// kernelEnv is the KernelSpec's env, then the Kernel's, then what the agent needs, which
// neither may override. Keys are sorted so that the pod spec is stable.
func kernelEnv(k *nbv1.Kernel, spec *nbv1.KernelSpec, interrupt nbv1.InterruptMode) []corev1.EnvVar {
	return append(userEnv(9, spec.Spec.Env, k.Spec.Env),
		corev1.EnvVar{Name: "HOME", Value: HomeDir},
		corev1.EnvVar{Name: agentapi.EnvKernelID, Value: k.Name},
		fieldEnv(agentapi.EnvNamespace, "metadata.namespace"),
		fieldEnv(agentapi.EnvPodIP, "status.podIP"),
		corev1.EnvVar{Name: agentapi.EnvAgentPort, Value: strconv.Itoa(agentapi.Port)},
		corev1.EnvVar{Name: agentapi.EnvSecretDir, Value: SecretDir},
		corev1.EnvVar{Name: agentapi.EnvInterruptMode, Value: string(interrupt)},
		corev1.EnvVar{Name: agentapi.EnvTerminationLog, Value: TerminationLog},
		// Where the pod's working directory is below ContentsDir, for the agent to find
		// the notebooks of the kernel's sessions.
		corev1.EnvVar{Name: agentapi.EnvKernelPath, Value: kernelPath(k)},
	)
}

// kernelPath is the kernel's working directory relative to ContentsDir ("" for ContentsDir).
func kernelPath(k *nbv1.Kernel) string {
	if k.Spec.Path == "" {
		return ""
	}
	return path.Clean(k.Spec.Path)
}

// userEnv is the environment of the maps, a later one's value winning, less what the agent's
// container sets itself (the agent's variables and HOME), sorted so that the pod spec is
// stable, with room for extra more.
func userEnv(extra int, envs ...map[string]string) []corev1.EnvVar {
	user := map[string]string{}
	for _, e := range envs {
		maps.Copy(user, e)
	}
	env := make([]corev1.EnvVar, 0, len(user)+extra)
	for _, name := range slices.Sorted(maps.Keys(user)) {
		if strings.HasPrefix(name, agentapi.EnvPrefix) || name == "HOME" {
			continue
		}
		env = append(env, corev1.EnvVar{Name: name, Value: user[name]})
	}
	return env
}

// fieldEnv is a variable of the pod's downward API.
func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// attachCluster gives a kernel pod the client connection file of the kernel's cluster, or a
// dask cluster's settings and TLS files. The volumes are optional: the file exists only once
// the cluster's address is known, and the kubelet adds it to the volume when it does.
func attachCluster(pod *corev1.Pod, cluster string) {
	if cluster == "" {
		return
	}
	c := &pod.Spec.Containers[0]
	c.Env = append(c.Env,
		corev1.EnvVar{Name: agentapi.EnvClusterProfile, Value: cluster},
		corev1.EnvVar{Name: agentapi.EnvClusterFile, Value: KernelClusterDir + "/" + ClusterClientFile})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "ipcluster", MountPath: KernelClusterDir, ReadOnly: true})
	secret := &corev1.SecretVolumeSource{
		SecretName:  ClusterSecretNameOf(cluster),
		Items:       []corev1.KeyToPath{{Key: ClusterClientFile, Path: ClusterClientFile}},
		DefaultMode: ptr.To[int32](0o440),
		Optional:    ptr.To(true),
	}
	attachDask(c, secret, cluster)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "ipcluster", VolumeSource: corev1.VolumeSource{Secret: secret}})
}

// readinessDelay is the initial delay of the kernel container's readiness probe. A kubelet
// probes first when it sees the container running, which is after the agent listens (it
// does before anything else, within milliseconds of its start); a probe that the kubelet
// skips for an initial delay waits a whole period for the next, and a warm pool's kernel was
// Ready 10.8 s after its start instead of 1.6 s. nbkube local's node probes the moment it
// has started the process, before the agent can listen: there a second's delay spares the
// failed probe and its event.
func (o Options) readinessDelay() int32 {
	if o.AgentHostDir != "" {
		return 1
	}
	return 0
}

// agentCommand is the kernel container's command up to the kernel's argv: the agent and its
// flags.
func agentCommand(o Options) []string {
	cmd := []string{o.agentPath()}
	if budget := o.AgentMemoryBudget.Value(); budget > 0 {
		cmd = append(cmd, "--memory-budget="+strconv.FormatInt(budget, 10))
	}
	return append(cmd, "--")
}
