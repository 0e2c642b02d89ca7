package localnode_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nbkube/nbkube/internal/localnode"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestSandboxedNode runs pods in sandboxes (Config.Sandbox) against a real kube-apiserver
// and kube-controller-manager.
func TestSandboxedNode(t *testing.T) {
	cp := testenv.ControlPlane(t, true)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	startNode(t, client, localnode.Config{DataDir: t.TempDir(), Sandbox: true, CrashLoopBackOff: 200 * time.Millisecond})

	// The node listens at the pod IP for the sandbox's ports from the start; a TCP probe must
	// reach the container's own socket, not that listener, or a server that does not listen
	// yet is Ready.
	t.Run("TCPProbeReachesTheContainersSocket", func(t *testing.T) {
		ns := newNamespace(t, client)
		const delay = 4 * time.Second
		pod := serverPod(ns, "late")
		c := &pod.Spec.Containers[0]
		c.Command = []string{"sh", "-c", "sleep " + strconv.Itoa(int(delay.Seconds())) + "; exec python3 -c \"$0\" \"$POD_IP\" " + strconv.Itoa(serverPort), strings.TrimSpace(pyServer)}
		c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}
		createPod(t, client, pod)
		running := waitPod(t, client, pod, "running", podRunning)
		started := running.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		ready := waitPod(t, client, pod, "ready", podReady)
		var at time.Time
		for _, cond := range ready.Status.Conditions {
			if cond.Type == corev1.PodReady {
				at = cond.LastTransitionTime.Time
			}
		}
		// Times are to the second: Ready can be no sooner than the delay less one second.
		if at.Sub(started) < delay-time.Second {
			t.Errorf("Ready %s after the container started, before its server listened (%s)", at.Sub(started), delay)
		}
		if got := httpGet(t, ready.Status.PodIP); got != "hello from "+ready.Status.PodIP {
			t.Errorf("GET through the pod IP: %q", got)
		}
	})
}
