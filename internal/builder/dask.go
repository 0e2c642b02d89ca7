package builder

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/daskcluster"
)

// A dask Cluster (docs/dask.md) is a scheduler pod behind a Service and one pod per worker,
// with TLS files of its own in the cluster's Secret (the ipyparallel cluster's Secret name):
// the scheduler, the workers and the owner's kernels present the one certificate the
// cluster's CA signed, and Dask accepts no peer without it.
const (
	// ComponentDaskScheduler is the LabelComponent value of a dask cluster's scheduler.
	ComponentDaskScheduler = "dask-scheduler"
	// ComponentDaskWorker is the LabelComponent value of a dask cluster's workers.
	ComponentDaskWorker = "dask-worker"

	// Keys of a dask cluster's Secret: its CA, its certificate and key.
	DaskCAFile   = "ca.crt"
	DaskCertFile = "tls.crt"
	DaskKeyFile  = "tls.key"

	// KernelDaskDir is where a kernel attached to a dask cluster finds the TLS files.
	KernelDaskDir = KernelClusterDir

	// EnvDaskSchedulerAddress is where Dask's Client() with no argument connects; a Secret key
	// of that name holds the scheduler's address once it is known.
	EnvDaskSchedulerAddress = "DASK_SCHEDULER_ADDRESS"
	envDaskRequireTLS       = "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"
	envDaskCAFile           = "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"
	envDaskClientCert       = "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"
	envDaskClientKey        = "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"
)

// daskClientEnv are the variables a dask cluster's Secret holds under their own names for
// the kernels attached to it: the scheduler's address and Dask's TLS settings of a client.
// An ipyparallel cluster's Secret has none, so a kernel takes them as optional.
var daskClientEnv = []string{EnvDaskSchedulerAddress, envDaskRequireTLS, envDaskCAFile, envDaskClientCert, envDaskClientKey}

// DaskSchedulerName is the name of a dask cluster's scheduler Service and the prefix of its
// scheduler pods' names.
func DaskSchedulerName(c *nbv1.Cluster) string { return c.Name + "-dask-scheduler" }

// DaskWorkersName is the prefix of a dask cluster's worker pods' names.
func DaskWorkersName(c *nbv1.Cluster) string { return c.Name + "-dask-worker" }

// DaskNetworkPolicyName is the name of the NetworkPolicy of a dask cluster's pods.
func DaskNetworkPolicyName(c *nbv1.Cluster) string { return c.Name + "-dask" }

// ControllerComponent and EngineComponent are the LabelComponent values of a cluster's
// controller (scheduler) and engine (worker) pods.
func ControllerComponent(c *nbv1.Cluster) string {
	if c.IsDask() {
		return ComponentDaskScheduler
	}
	return ComponentClusterController
}

// EngineComponent: see ControllerComponent.
func EngineComponent(c *nbv1.Cluster) string {
	if c.IsDask() {
		return ComponentDaskWorker
	}
	return ComponentClusterEngine
}

// DaskDashboardPrefix is the path under which a dask cluster's scheduler serves its HTTP
// routes, its dashboard among them: <base URL>dask/<cluster>, which the API server proxies
// to the scheduler unchanged.
func DaskDashboardPrefix(base, cluster string) string {
	if base == "" {
		base = "/"
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base + "dask/" + cluster
}

// DaskDashboardPrefix of the cluster with these options.
func (o Options) DaskDashboardPrefix(c *nbv1.Cluster) string {
	return DaskDashboardPrefix(o.DaskDashboardBase, c.Name)
}

// DaskSchedulerAddress is the scheduler's address for workers and clients, tls://host:8786,
// host as ClusterControllerAddress says ("" while there is none).
func DaskSchedulerAddress(c *nbv1.Cluster, o Options, schedulerPodIP string) string {
	host := fmt.Sprintf("%s.%s.svc", DaskSchedulerName(c), c.Namespace)
	if o.ClusterControllerByPodIP {
		host = schedulerPodIP
	}
	if host == "" {
		return ""
	}
	return "tls://" + net.JoinHostPort(host, strconv.Itoa(daskcluster.SchedulerPort))
}

// DaskSecret holds a dask cluster's TLS files and, once address is known, the settings of
// its clients.
func DaskSecret(c *nbv1.Cluster, creds daskcluster.Credentials, address string) *corev1.Secret {
	data := map[string][]byte{DaskCAFile: creds.CA, DaskCertFile: creds.Cert, DaskKeyFile: creds.Key}
	if address != "" {
		data[EnvDaskSchedulerAddress] = []byte(address)
		data[envDaskRequireTLS] = []byte("True")
		data[envDaskCAFile] = []byte(KernelDaskDir + "/" + DaskCAFile)
		data[envDaskClientCert] = []byte(KernelDaskDir + "/" + DaskCertFile)
		data[envDaskClientKey] = []byte(KernelDaskDir + "/" + DaskKeyFile)
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(c, clusterGVK, ClusterSecretName(c), ClusterLabels(c, ComponentDaskScheduler)),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// DaskCredentialsOf are the TLS files a dask cluster's Secret holds, false when it holds none.
func DaskCredentialsOf(s *corev1.Secret) (daskcluster.Credentials, bool) {
	creds := daskcluster.Credentials{CA: s.Data[DaskCAFile], Cert: s.Data[DaskCertFile], Key: s.Data[DaskKeyFile]}
	return creds, len(creds.CA) > 0 && len(creds.Cert) > 0 && len(creds.Key) > 0
}

// DaskSchedulerService exposes the scheduler to workers and kernels (8786) and its HTTP
// server to nbkube (8787). The pod's address is published before the pod is Ready: there is
// no other pod to send anyone to, workers and clients retry until the scheduler listens, and
// waiting for the readiness probe's next period (2 s) held every worker's registration back
// by up to that long.
func DaskSchedulerService(c *nbv1.Cluster) *corev1.Service {
	labels := ClusterLabels(c, ComponentDaskScheduler)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(c, clusterGVK, DaskSchedulerName(c), labels),
		Spec: corev1.ServiceSpec{Selector: labels, PublishNotReadyAddresses: true, Ports: []corev1.ServicePort{
			{Name: "scheduler", Port: daskcluster.SchedulerPort, TargetPort: intstr.FromInt32(daskcluster.SchedulerPort), Protocol: corev1.ProtocolTCP},
			{Name: "http", Port: daskcluster.HTTPPort, TargetPort: intstr.FromInt32(daskcluster.HTTPPort), Protocol: corev1.ProtocolTCP},
		}},
	}
}

// daskTLSArgs are the TLS options of dask-scheduler and dask-worker.
func daskTLSArgs() []string {
	return []string{
		"--tls-ca-file=" + ClusterSecretDir + "/" + DaskCAFile,
		"--tls-cert=" + ClusterSecretDir + "/" + DaskCertFile,
		"--tls-key=" + ClusterSecretDir + "/" + DaskKeyFile,
	}
}

// daskEnv is what both kinds of dask pods add to the cluster containers' env: Dask refuses
// any connection that is not TLS.
func daskEnv(c *corev1.Container) {
	c.Env = append(c.Env, corev1.EnvVar{Name: envDaskRequireTLS, Value: "True"})
}

// DaskSchedulerPod runs dask-scheduler on the pod's IP: TLS on 8786, and its HTTP server on
// 8787 with the routes nbkube asks (daskcluster.HTTPRoutes). Like an ipcontroller, a new
// scheduler knows no workers (they register again, but their results are lost): its
// restart policy is Never and the Cluster controller replaces it and its workers together.
func DaskSchedulerPod(c *nbv1.Cluster, o Options) *corev1.Pod {
	container := clusterContainer(c, o, ComponentDaskScheduler, append([]string{
		"dask-scheduler",
		"--protocol=tls",
		"--host=$(POD_IP)",
		"--port=" + strconv.Itoa(daskcluster.SchedulerPort),
		"--dashboard-address=$(POD_IP):" + strconv.Itoa(daskcluster.HTTPPort),
		"--dashboard-prefix=" + o.DaskDashboardPrefix(c),
	}, daskTLSArgs()...))
	daskEnv(&container)
	container.Env = append(container.Env, corev1.EnvVar{Name: "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES", Value: daskcluster.HTTPRoutes})
	container.WorkingDir = "/tmp"
	container.Ports = []corev1.ContainerPort{
		{Name: "scheduler", ContainerPort: daskcluster.SchedulerPort, Protocol: corev1.ProtocolTCP},
		{Name: "http", ContainerPort: daskcluster.HTTPPort, Protocol: corev1.ProtocolTCP},
	}
	container.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(daskcluster.SchedulerPort)}},
		PeriodSeconds: 2,
	}
	return clusterPod(c, o, DaskSchedulerName(c), ComponentDaskScheduler, container, []string{DaskCAFile, DaskCertFile, DaskKeyFile}, nil)
}

// DaskWorkerPod runs one dask-worker for the scheduler pod scheduler. The worker registers
// under its pod's name, which is how the Cluster controller tells which pods are registered
// and busy, and which to retire. The scheduler's address is the worker's argument, not a
// reference to the Secret that has it: a worker belongs to one scheduler pod, whose address
// the controller knows when it makes the worker, while a node may still hold the Secret as it
// was before the address was written (the local node reads it anew every 10 s).
func DaskWorkerPod(c *nbv1.Cluster, o Options, scheduler *corev1.Pod) *corev1.Pod {
	container := clusterContainer(c, o, ComponentDaskWorker, append([]string{
		"dask-worker",
		DaskSchedulerAddress(c, o, scheduler.Status.PodIP),
		"--name=$(POD_NAME)",
		"--no-nanny",
		"--protocol=tls",
		"--host=$(POD_IP)",
		"--worker-port=" + strconv.Itoa(daskcluster.WorkerPort),
		"--dashboard-address=$(POD_IP):0",
		"--local-directory=/tmp",
		// Workers are created once the scheduler's pod runs (in a cluster, before it answers;
		// on the local node, after): the wait covers the scheduler's start and a slow one of
		// the worker itself.
		"--death-timeout=60",
	}, daskTLSArgs()...))
	daskEnv(&container)
	container.WorkingDir = "/tmp"
	// Declared: the scheduler, other workers and the owner's kernels connect to it.
	container.Ports = []corev1.ContainerPort{{Name: "worker", ContainerPort: daskcluster.WorkerPort, Protocol: corev1.ProtocolTCP}}
	container.Resources = *c.Spec.EngineResources.DeepCopy()
	pod := clusterPod(c, o, DaskWorkersName(c), ComponentDaskWorker, container,
		[]string{DaskCAFile, DaskCertFile, DaskKeyFile}, map[string]string{AnnotationControllerPod: string(scheduler.UID)})
	applyPodTemplate(pod, c.Spec.EngineTemplate)
	return pod
}

// ClusterControllerPodOf is the cluster's controller pod: an ipcontroller, or a dask
// cluster's scheduler.
func ClusterControllerPodOf(c *nbv1.Cluster, o Options) *corev1.Pod {
	if c.IsDask() {
		return DaskSchedulerPod(c, o)
	}
	return ClusterControllerPod(c, o)
}

// ClusterEnginePodOf is one of the cluster's engine pods, for its controller pod: an ipengine,
// or a dask cluster's worker.
func ClusterEnginePodOf(c *nbv1.Cluster, o Options, controller *corev1.Pod) *corev1.Pod {
	if c.IsDask() {
		return DaskWorkerPod(c, o, controller)
	}
	return ClusterEnginePod(c, o, string(controller.UID))
}

// DaskNetworkPolicy lets into a dask cluster's scheduler and workers, on the ports Dask
// uses, only the cluster's own pods and its owner's kernels. Dask's TLS already refuses
// peers without the cluster's certificate; the policy keeps other users' kernels from
// reaching the ports at all. The manager's and the API server's requests to the scheduler's
// HTTP server come from the chart's policy of every dask scheduler.
func DaskNetworkPolicy(c *nbv1.Cluster) *networkingv1.NetworkPolicy {
	ofCluster := &metav1.LabelSelector{
		MatchLabels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelCluster: c.Name},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: nbv1.LabelComponent, Operator: metav1.LabelSelectorOpIn,
			Values: []string{ComponentDaskScheduler, ComponentDaskWorker}}},
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(c, clusterGVK, DaskNetworkPolicyName(c), ClusterLabels(c, ComponentDaskScheduler)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *ofCluster.DeepCopy(),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: ofCluster},
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
						nbv1.LabelManagedBy: nbv1.ManagedByValue,
						nbv1.LabelComponent: ComponentKernel,
						nbv1.LabelOwner:     nbv1.OwnerLabelValue(c.Spec.Owner),
					}}},
				},
				Ports: daskPorts(),
			}},
		},
	}
}

// daskPorts are the ports of Dask's own connections: the scheduler's and the workers'.
func daskPorts() []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(daskcluster.SchedulerPort))},
		{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(daskcluster.WorkerPort))},
	}
}

// ClusterNetworkPolicyOf is the cluster's own NetworkPolicy (ClusterNetworkPolicy or
// DaskNetworkPolicy).
func ClusterNetworkPolicyOf(c *nbv1.Cluster) *networkingv1.NetworkPolicy {
	if c.IsDask() {
		return DaskNetworkPolicy(c)
	}
	return ClusterNetworkPolicy(c)
}

// ClusterServiceOf is the Service in front of the cluster's controller (scheduler).
func ClusterServiceOf(c *nbv1.Cluster) *corev1.Service {
	if c.IsDask() {
		return DaskSchedulerService(c)
	}
	return ClusterControllerService(c)
}

// attachDask gives a kernel attached to cluster the settings and TLS files of a dask
// cluster, which an ipyparallel cluster's Secret does not have: every one is optional. The
// files come in the cluster volume of attachCluster, beside an ipyparallel cluster's file.
func attachDask(c *corev1.Container, v *corev1.SecretVolumeSource, cluster string) {
	for _, name := range daskClientEnv {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ClusterSecretNameOf(cluster)}, Key: name, Optional: ptr.To(true),
		}}})
	}
	v.Items = append(v.Items,
		corev1.KeyToPath{Key: DaskCAFile, Path: DaskCAFile}, corev1.KeyToPath{Key: DaskCertFile, Path: DaskCertFile}, corev1.KeyToPath{Key: DaskKeyFile, Path: DaskKeyFile})
}
