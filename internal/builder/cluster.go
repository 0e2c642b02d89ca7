package builder

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

const (
	// ComponentClusterController is the LabelComponent value of a cluster's ipcontroller.
	ComponentClusterController = "ipcontroller"
	// ComponentClusterEngine is the LabelComponent value of a cluster's engines.
	ComponentClusterEngine = "ipengine"

	// ClusterFirstPort and ClusterPorts are the fixed pool of ports ipcontroller binds, so
	// that one Service can expose them (by default it picks random ports).
	ClusterFirstPort = 10101
	ClusterPorts     = 20
	// ClusterProfileDir is the IPython profile directory in cluster pods.
	ClusterProfileDir = "/ipython/profile"
	// ClusterSecretKey is the Secret key of the cluster's message-signing key.
	ClusterSecretKey = "key"
)

// ClusterControllerName is the name of a cluster's controller Deployment and Service.
func ClusterControllerName(c *nbv1.Cluster) string { return c.Name + "-ipcontroller" }

// ClusterEnginesName is the name of a cluster's engines Deployment.
func ClusterEnginesName(c *nbv1.Cluster) string { return c.Name + "-ipengine" }

// ClusterSecretName is the name of the Secret with a cluster's key.
func ClusterSecretName(c *nbv1.Cluster) string { return c.Name + "-ipcluster" }

// ClusterLabels are the labels of a cluster's objects of one component.
func ClusterLabels(c *nbv1.Cluster, component string) map[string]string {
	return map[string]string{
		nbv1.LabelManagedBy: nbv1.ManagedByValue,
		nbv1.LabelComponent: component,
		nbv1.LabelCluster:   c.Name,
	}
}

// ClusterSecret holds the cluster's message-signing key, made by the caller.
func ClusterSecret(c *nbv1.Cluster, key string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(c, clusterGVK, ClusterSecretName(c), ClusterLabels(c, ComponentClusterController)),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		StringData: map[string]string{ClusterSecretKey: key},
	}
}

// ClusterControllerService exposes the controller's port pool to engines and kernels.
func ClusterControllerService(c *nbv1.Cluster) *corev1.Service {
	labels := ClusterLabels(c, ComponentClusterController)
	ports := make([]corev1.ServicePort, ClusterPorts)
	for i := range ports {
		port := int32(ClusterFirstPort + i)
		ports[i] = corev1.ServicePort{Name: fmt.Sprintf("p%d", port), Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(c, clusterGVK, ClusterControllerName(c), labels),
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: ports},
	}
}

// ClusterControllerDeployment runs ipcontroller: one replica while the cluster runs.
func ClusterControllerDeployment(c *nbv1.Cluster, o Options) *appsv1.Deployment {
	replicas := int32(0)
	if running(c) {
		replicas = 1
	}
	container := clusterContainer(c, o, ComponentClusterController, []string{
		"ipcontroller",
		"--ip=0.0.0.0",
		"--location=" + ClusterControllerName(c),
		fmt.Sprintf("--ports=%d-%d", ClusterFirstPort, ClusterFirstPort+ClusterPorts-1),
		"--profile-dir=" + ClusterProfileDir,
	})
	container.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(ClusterFirstPort)}},
		PeriodSeconds: 2,
	}
	return clusterDeployment(c, o, ClusterControllerName(c), ComponentClusterController, replicas, container)
}

// ClusterEnginesDeployment runs the engines: spec.engines replicas while the cluster runs.
func ClusterEnginesDeployment(c *nbv1.Cluster, o Options) *appsv1.Deployment {
	replicas := int32(0)
	if running(c) {
		replicas = c.Spec.Engines
	}
	container := clusterContainer(c, o, ComponentClusterEngine, []string{
		"ipengine",
		"--profile-dir=" + ClusterProfileDir,
		"--location=" + ClusterControllerName(c),
	})
	container.Resources = *c.Spec.EngineResources.DeepCopy()
	return clusterDeployment(c, o, ClusterEnginesName(c), ComponentClusterEngine, replicas, container)
}

func running(c *nbv1.Cluster) bool { return c.Spec.State != nbv1.ClusterStopped }

func clusterContainer(c *nbv1.Cluster, o Options, name string, command []string) corev1.Container {
	image := c.Spec.Image
	if image == "" {
		image = o.DefaultClusterImage
	}
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: o.ImagePullPolicy,
		Command:         command,
		Env:             []corev1.EnvVar{{Name: "HOME", Value: "/tmp"}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "profile", MountPath: ClusterProfileDir},
			{Name: "cluster-secret", MountPath: "/var/run/nbkube/cluster", ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
		},
		SecurityContext:          restrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

func clusterDeployment(c *nbv1.Cluster, o Options, name, component string, replicas int32, container corev1.Container) *appsv1.Deployment {
	labels := ClusterLabels(c, component)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta(c, clusterGVK, name, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              o.podSecurity(),
					Containers:                   []corev1.Container{container},
					Volumes: []corev1.Volume{
						emptyDir("profile"),
						emptyDir("tmp"),
						{Name: "cluster-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: ClusterSecretName(c), DefaultMode: ptr.To[int32](0o440),
						}}},
					},
				},
			},
		},
	}
}
