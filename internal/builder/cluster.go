package builder

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

const (
	// ComponentClusterController is the LabelComponent value of a cluster's ipcontroller.
	ComponentClusterController = "ipcontroller"
	// ComponentClusterEngine is the LabelComponent value of a cluster's engines.
	ComponentClusterEngine = "ipengine"

	// ClusterProfileDir is the IPython profile directory in cluster pods.
	ClusterProfileDir = "/ipython/profile"
	// ClusterSecretDir is where cluster pods mount the cluster's Secret.
	ClusterSecretDir = "/var/run/nbkube/cluster"
	// ClusterSecretKey is the Secret key of the cluster's message-signing key.
	ClusterSecretKey = "key"
	// ClusterEngineFile and ClusterClientFile are the Secret keys (and file names) of the
	// connection files engines and clients use: they name the address that reaches the
	// ipcontroller.
	ClusterEngineFile = "ipcontroller-engine.json"
	ClusterClientFile = "ipcontroller-client.json"
	// ClusterControllerEngineFile and ClusterControllerClientFile are the ipcontroller's own
	// copies: the same ports and key with the interface tcp://0.0.0.0, which its pod replaces
	// with the pod IP before it starts, to bind only there (on the local node every pod shares
	// the host's network, so two clusters could not both bind 0.0.0.0).
	ClusterControllerEngineFile = "controller-engine.json"
	ClusterControllerClientFile = "controller-client.json"

	// AnnotationControllerPod on an engine pod is the UID of the ipcontroller pod it was made
	// for. ipengine registers once and never again, so engines of an ipcontroller that is gone
	// are replaced with the controller.
	AnnotationControllerPod = "nbkube.io/ipcontroller-pod"

	// KernelClusterDir is where a kernel attached to a cluster finds the client connection file.
	KernelClusterDir = "/var/run/nbkube/ipcluster"

	// clusterBindInterface is the interface of the ipcontroller's copies, replaced at start.
	clusterBindInterface = "tcp://0.0.0.0"
)

// ClusterControllerName is the name of a cluster's controller Service and the prefix of its
// controller pods' names.
func ClusterControllerName(c *nbv1.Cluster) string { return c.Name + "-ipcontroller" }

// ClusterEnginesName is the prefix of a cluster's engine pods' names.
func ClusterEnginesName(c *nbv1.Cluster) string { return c.Name + "-ipengine" }

// ClusterSecretName is the name of the Secret with a cluster's key and connection files.
func ClusterSecretName(c *nbv1.Cluster) string { return ClusterSecretNameOf(c.Name) }

// ClusterSecretNameOf is the name of the Secret of the cluster named cluster.
func ClusterSecretNameOf(cluster string) string { return cluster + "-ipcluster" }

// ClusterLabels are the labels of a cluster's objects of one component.
func ClusterLabels(c *nbv1.Cluster, component string) map[string]string {
	return map[string]string{
		nbv1.LabelManagedBy: nbv1.ManagedByValue,
		nbv1.LabelComponent: component,
		nbv1.LabelCluster:   c.Name,
	}
}

// ClusterControllerAddress is the host engines and clients connect to: the ipcontroller's
// Service, or with Options.ClusterControllerByPodIP its pod's IP, which is "" while the pod
// has none.
func ClusterControllerAddress(c *nbv1.Cluster, o Options, controllerPodIP string) string {
	if o.ClusterControllerByPodIP {
		return controllerPodIP
	}
	return fmt.Sprintf("%s.%s.svc", ClusterControllerName(c), c.Namespace)
}

// ClusterSecret holds the cluster's key and the connection files made from it: the
// ipcontroller's copies always, the engines' and clients' once address (see
// ClusterControllerAddress) is known.
func ClusterSecret(c *nbv1.Cluster, key, address string) (*corev1.Secret, error) {
	data := map[string][]byte{ClusterSecretKey: []byte(key)}
	type file struct {
		name  string
		make  func(ipcluster.Connection) ([]byte, error)
		iface string
	}
	files := []file{
		{ClusterControllerEngineFile, ipcluster.EngineFile, clusterBindInterface},
		{ClusterControllerClientFile, ipcluster.ClientFile, clusterBindInterface},
	}
	if address != "" {
		files = append(files, file{ClusterEngineFile, ipcluster.EngineFile, "tcp://" + address},
			file{ClusterClientFile, ipcluster.ClientFile, "tcp://" + address})
	}
	for _, f := range files {
		b, err := f.make(ipcluster.Connection{Key: key, Interface: f.iface, Location: ClusterControllerName(c)})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %s: %w", c.Name, f.name, err)
		}
		data[f.name] = b
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(c, clusterGVK, ClusterSecretName(c), ClusterLabels(c, ComponentClusterController)),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}, nil
}

// ClusterControllerService exposes the ipcontroller's ports to engines and kernels. Its
// address is published before the pod is Ready (see DaskSchedulerService).
func ClusterControllerService(c *nbv1.Cluster) *corev1.Service {
	labels := ClusterLabels(c, ComponentClusterController)
	var ports []corev1.ServicePort
	for _, port := range ipcluster.ServicePorts() {
		ports = append(ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", port), Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(c, clusterGVK, ClusterControllerName(c), labels),
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: ports, PublishNotReadyAddresses: true},
	}
}

// controllerScript writes the ipcontroller's connection files with the pod's own IP as the
// interface and runs ipcontroller on them. --reuse makes it take key and ports from the
// files; without --ports its internal ports are random, as two clusters on the local node
// would otherwise collide on 127.0.0.1. Paths come as arguments, where the local node can
// rewrite them.
const controllerScript = `set -eu
umask 077
mkdir -p "$1/security"
sed "s|` + clusterBindInterface + `|tcp://$3|" "$2/` + ClusterControllerEngineFile + `" > "$1/security/ipcontroller-engine.json"
sed "s|` + clusterBindInterface + `|tcp://$3|" "$2/` + ClusterControllerClientFile + `" > "$1/security/ipcontroller-client.json"
exec ipcontroller --reuse --ip="$3" --profile-dir="$1"`

// ClusterControllerPod runs ipcontroller. Its restart policy is Never: a new ipcontroller
// is a new hub that knows no engines, so the Cluster controller replaces a failed pod and its
// engines together.
func ClusterControllerPod(c *nbv1.Cluster, o Options) *corev1.Pod {
	container := clusterContainer(c, o, ComponentClusterController,
		[]string{"sh", "-c", controllerScript, "ipcontroller", ClusterProfileDir, ClusterSecretDir, "$(POD_IP)"})
	container.Ports = []corev1.ContainerPort{{Name: "registration", ContainerPort: ipcluster.RegistrationPort, Protocol: corev1.ProtocolTCP}}
	container.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(ipcluster.RegistrationPort)}},
		PeriodSeconds: 2,
	}
	return withProfile(clusterPod(c, o, ClusterControllerName(c), ComponentClusterController, container,
		[]string{ClusterControllerEngineFile, ClusterControllerClientFile}, nil), o)
}

// withProfile gives an ipyparallel pod the scratch IPython profile directory its process
// writes to.
func withProfile(pod *corev1.Pod, o Options) *corev1.Pod {
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append([]corev1.VolumeMount{{Name: "profile", MountPath: ClusterProfileDir}}, c.VolumeMounts...)
	pod.Spec.Volumes = append([]corev1.Volume{o.scratch("profile")}, pod.Spec.Volumes...)
	return pod
}

// ClusterEnginePod runs one ipengine for the ipcontroller pod controllerUID. The engine
// registers under its pod's name (--ident), which is how the Cluster controller tells which
// pods are registered and busy.
func ClusterEnginePod(c *nbv1.Cluster, o Options, controllerUID string) *corev1.Pod {
	container := clusterContainer(c, o, ComponentClusterEngine, []string{
		"ipengine",
		"--file=" + ClusterSecretDir + "/" + ClusterEngineFile,
		"--ident=$(POD_NAME)",
		"--profile-dir=" + ClusterProfileDir,
		// The ipcontroller answers before its engines are created; a longer wait only
		// covers a slow start of the engine itself.
		"--timeout=30",
	})
	container.Resources = *c.Spec.EngineResources.DeepCopy()
	pod := withProfile(clusterPod(c, o, ClusterEnginesName(c), ComponentClusterEngine, container,
		[]string{ClusterEngineFile}, map[string]string{AnnotationControllerPod: controllerUID}), o)
	applyPodTemplate(pod, c.Spec.EngineTemplate)
	return pod
}

func clusterContainer(c *nbv1.Cluster, o Options, name string, command []string) corev1.Container {
	image := c.Spec.Image
	if image == "" {
		image = o.DefaultClusterImage
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: o.ImagePullPolicy,
		Command:         command,
		Env: []corev1.EnvVar{
			{Name: "HOME", Value: "/tmp"},
			field("POD_NAME", "metadata.name"),
			field("POD_IP", "status.podIP"),
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "cluster-secret", MountPath: ClusterSecretDir, ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
		},
		SecurityContext:          restrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// clusterPod is a pod of the cluster that mounts the files it needs (only those) of the
// cluster's Secret.
func clusterPod(c *nbv1.Cluster, o Options, prefix, component string, container corev1.Container, files []string, annotations map[string]string) *corev1.Pod {
	items := make([]corev1.KeyToPath, len(files))
	for i, f := range files {
		items[i] = corev1.KeyToPath{Key: f, Path: f}
	}
	container.Resources = *container.Resources.DeepCopy()
	o.requestScratch(&container.Resources)
	meta := objectMeta(c, clusterGVK, "", withOwner(ClusterLabels(c, component), c.Spec.Owner))
	meta.GenerateName = prefix + "-"
	meta.Annotations = annotations
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              o.podSecurity(),
			Containers:                   []corev1.Container{container},
			Volumes: []corev1.Volume{
				o.scratch("tmp"),
				{Name: "cluster-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: ClusterSecretName(c), Items: items, DefaultMode: ptr.To[int32](0o440),
				}}},
			},
		},
	}
}
