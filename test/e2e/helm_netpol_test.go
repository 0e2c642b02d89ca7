//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The cluster's NetworkPolicy enforcer (kube-router, hack/cluster.sh) applies a policy change
// within a sync; these bound the wait for one.
const (
	policyApplied = time.Minute
	// probeRefused is how long a connection that the policy refuses is tried: refused
	// connections fail at once, so a few attempts show it is not a passing fault.
	probeRefused = 3 * time.Second
)

// probeScript connects to host:port, retrying every half second for up to its third argument in
// seconds; it exits 0 once connected and 1, naming the last error, when it never did.
const probeScript = `import socket, sys, time
host, port, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + wait
while True:
    try:
        socket.create_connection((host, port), timeout=1).close()
        print("connected")
        sys.exit(0)
    except OSError as e:
        err = e
    if time.monotonic() >= deadline:
        print("not connected:", err)
        sys.exit(1)
    time.sleep(0.5)
`

// testHelmNetworkPolicies checks that the chart's NetworkPolicies are enforced, with the
// release's own pods: a pod of no nbkube component cannot reach a kernel's agent while the
// API server can, and the same pod reaches it once the kernels' policy is gone; likewise for
// the reStructuredText renderer, which itself reaches nothing, not even the API server's
// Service that the plain pod reaches; and for kernels, which reach the cluster's DNS but not
// the API server or the kube-apiserver. Connections are made from inside the pods, by ephemeral containers of the kernel
// image (it has Python), so they come from the pods' own addresses.
func testHelmNetworkPolicies(t *testing.T, env *helmEnv, kernelID string) {
	ctx := t.Context()
	c := env.client
	kernel := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: kernelID}, kernel); err != nil {
		t.Fatal(err)
	}
	agent := net.JoinHostPort(kernel.Status.PodIP, strconv.Itoa(agentapi.Port))
	plain := env.plainPod(t)
	apiserver := env.podOf(t, "apiserver")

	// Without an enforcer every check below would fail alike.
	if ok, out := env.probe(t, plain, agent, probeRefused); ok {
		t.Fatalf("a pod of no nbkube component reached the kernel's agent %s: %s", agent, out)
	}
	if ok, out := env.probe(t, apiserver, agent, policyApplied); !ok {
		t.Errorf("the API server pod did not reach the kernel's agent %s: %s", agent, out)
	}

	// The same connection with the kernels' policy gone: what refused it was the policy.
	policy := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-nbkube-kernels"}
	if err := c.Get(ctx, key, policy); err != nil {
		t.Fatal(err)
	}
	restore := policy.DeepCopy()
	restore.ObjectMeta = metav1.ObjectMeta{
		Namespace: policy.Namespace, Name: policy.Name, Labels: policy.Labels, Annotations: policy.Annotations,
	}
	if err := c.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	// Put back as helm made it, whatever happens here: the later steps (upgrade, uninstall)
	// own it.
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = c.Create(context.Background(), restore.DeepCopy())
		}
	})
	if ok, out := env.probe(t, plain, agent, policyApplied); !ok {
		t.Errorf("without the kernels' policy the plain pod still did not reach the kernel's agent %s: %s", agent, out)
	}
	if err := c.Create(ctx, restore.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	restored = true
	testenv.Eventually(t, "the restored kernels' policy to refuse the plain pod again", policyApplied, func() error {
		if ok, out := env.probe(t, plain, agent, 0); ok {
			return fmt.Errorf("%s", out)
		}
		return nil
	})

	// The renderer takes the API server's requests only, and its policy allows it no egress:
	// the Service that the plain pod reaches is out of its reach.
	renderer := env.podOf(t, "rst-renderer")
	rendering := net.JoinHostPort(renderer.Status.PodIP, strconv.Itoa(agentapi.Port))
	if ok, out := env.probe(t, apiserver, rendering, policyApplied); !ok {
		t.Errorf("the API server pod did not reach the renderer %s: %s", rendering, out)
	}
	if ok, out := env.probe(t, plain, rendering, probeRefused); ok {
		t.Errorf("a pod of no nbkube component reached the renderer %s: %s", rendering, out)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-nbkube"}, svc); err != nil {
		t.Fatal(err)
	}
	service := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	if ok, out := env.probe(t, plain, service, policyApplied); !ok {
		t.Fatalf("the plain pod did not reach the API server's Service %s: %s", service, out)
	}
	if ok, out := env.probe(t, renderer, service, probeRefused); ok {
		t.Errorf("the renderer reached the API server's Service %s: %s", service, out)
	}

	// A kernel runs its user's code: it reaches the cluster's DNS, but neither nbkube's API
	// server (its Service or its pod) nor the kube-apiserver, which the plain pod reaches.
	kubeAPI, dns := &corev1.Service{}, &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, kubeAPI); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, dns); err != nil {
		t.Fatal(err)
	}
	kubeAPIAddr := net.JoinHostPort(kubeAPI.Spec.ClusterIP, strconv.Itoa(int(kubeAPI.Spec.Ports[0].Port)))
	if ok, out := env.probe(t, plain, kubeAPIAddr, policyApplied); !ok {
		t.Fatalf("the plain pod did not reach the kube-apiserver %s: %s", kubeAPIAddr, out)
	}
	if ok, out := env.probe(t, kernel, net.JoinHostPort(dns.Spec.ClusterIP, "53"), policyApplied); !ok {
		t.Errorf("the kernel did not reach the cluster's DNS %s: %s", dns.Spec.ClusterIP, out)
	}
	for what, addr := range map[string]string{
		"the kube-apiserver":       kubeAPIAddr,
		"the API server's Service": service,
		"the API server's pod":     net.JoinHostPort(apiserver.Status.PodIP, "8888"),
	} {
		if ok, out := env.probe(t, kernel, addr, probeRefused); ok {
			t.Errorf("the kernel reached %s %s: %s", what, addr, out)
		}
	}
}

// plainPod starts a pod of no nbkube component in the release's namespace, which no policy's
// peers include, and removes it after the test.
func (e *helmEnv) plainPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: "netpol-plain", Labels: map[string]string{"app": "netpol-plain"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "sleep", Image: e.kernelImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"python3", "-c", "import time; time.sleep(3600)"},
			}},
		},
	}
	if err := e.client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	testenv.Eventually(t, "the plain pod to run", time.Minute, func() error {
		if err := e.client.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	return pod
}

// podOf is a running pod of the release's component.
func (e *helmEnv) podOf(t *testing.T, component string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := e.client.List(t.Context(), pods, client.InNamespace(helmNamespace),
		client.MatchingLabels{nbv1.LabelComponent: component}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p
		}
	}
	t.Fatalf("no running %s pod among %d", component, len(pods.Items))
	return nil
}

// probe tries to connect from inside pod to addr for up to wait, with an ephemeral container
// running probeScript; it reports whether it connected, and what the script said.
func (e *helmEnv) probe(t *testing.T, pod *corev1.Pod, addr string, wait time.Duration) (bool, string) {
	t.Helper()
	ctx := t.Context()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("probe-%d", len(pod.Spec.EphemeralContainers))
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: e.kernelImage, ImagePullPolicy: corev1.PullNever,
			Command:                  []string{"python3", "-c", probeScript, host, port, strconv.FormatFloat(wait.Seconds(), 'f', 1, 64)},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		},
	})
	if err := e.client.SubResource("ephemeralcontainers").Update(ctx, pod); err != nil {
		t.Fatalf("adding %s to pod %s: %v", name, pod.Name, err)
	}
	var done *corev1.ContainerStateTerminated
	testenv.Eventually(t, name+" in pod "+pod.Name+" to finish", wait+time.Minute, func() error {
		if err := e.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, s := range pod.Status.EphemeralContainerStatuses {
			if s.Name == name && s.State.Terminated != nil {
				done = s.State.Terminated
				return nil
			}
		}
		return fmt.Errorf("%s has not finished", name)
	})
	out := done.Message // the script's output when it failed
	if done.ExitCode == 0 {
		out = "connected"
	}
	t.Logf("from %s to %s: exit %d, %s", pod.Name, addr, done.ExitCode, strings.TrimSpace(out))
	return done.ExitCode == 0, out
}
