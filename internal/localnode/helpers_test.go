package localnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nbkube/nbkube/internal/localnode"
	"github.com/nbkube/nbkube/internal/testenv"
)

// pyServer is an HTTP server on the address and port of its arguments that answers every GET
// with "hello from <address>".
const pyServer = `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from " + sys.argv[1]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
`

const serverPort = 28080

// startNode runs a node until the test ends or the returned function is called, which waits
// for the node to stop.
func startNode(t *testing.T, client kubernetes.Interface, cfg localnode.Config) (stop func()) {
	t.Helper()
	n, err := localnode.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), testr.NewWithOptions(t, testr.Options{Verbosity: 1})))
	done := make(chan error, 1)
	go func() { done <- n.Start(ctx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node %s: %v", cfg.NodeName, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// newNamespace creates a namespace for a subtest and waits for what kube-controller-manager puts
// in it and every pod needs: the default service account and the root CA ConfigMap.
func newNamespace(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(t.Name()[strings.LastIndex(t.Name(), "/")+1:])
	name = name[:min(len(name), 63)]
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the namespace's service account and root CA", 20*time.Second, func() error {
		if _, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := client.CoreV1().ConfigMaps(name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	return name
}

func basicPod(ns, name string, policy corev1.RestartPolicy, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers:                    []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: command}},
		},
	}
}

// serverPod runs pyServer on the pod's IP, which it learns from the downward API, with a
// readiness probe on its named port.
func serverPod(ns, name string) *corev1.Pod {
	p := basicPod(ns, name, corev1.RestartPolicyAlways, "python3", "-c", pyServer, "$(POD_IP)", strconv.Itoa(serverPort))
	c := &p.Spec.Containers[0]
	c.Image = "python:3.11-slim"
	c.Env = []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: serverPort}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	return p
}

func createPod(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// waitPod waits until the pod satisfies cond and returns it; it fails the test with the pod's
// last status otherwise.
func waitPod(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	testenv.Eventually(t, "pod "+pod.Namespace+"/"+pod.Name+" to be "+what, 30*time.Second, func() error {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = p
		if !cond(p) {
			return fmt.Errorf("last status: %+v", p.Status)
		}
		return nil
	})
	return last
}

func deletePod(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	if err := client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pod "+pod.Name+" to be gone", 30*time.Second, func() error {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("still there, phase %s", p.Status.Phase)
	})
}

func expectEvent(t *testing.T, client kubernetes.Interface, pod *corev1.Pod, reason string) {
	t.Helper()
	testenv.Eventually(t, "a "+reason+" event", 10*time.Second, func() error {
		events, err := client.CoreV1().Events(pod.Namespace).List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + pod.Name + ",reason=" + reason,
		})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Source.Component == "nbkube-local-node" && e.InvolvedObject.UID == pod.UID {
				return nil
			}
		}
		return fmt.Errorf("none from nbkube-local-node for pod %s (uid %s) among %d %s events", pod.Name, pod.UID, len(events.Items), reason)
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podRunning(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.Status.Phase == corev1.PodRunning && c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// pidOf reads the PID of the pod's first container from its containerID.
func pidOf(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	id := pod.Status.ContainerStatuses[0].ContainerID
	pid, err := strconv.Atoi(strings.TrimPrefix(id, "nbkube-local://"))
	if err != nil || !strings.HasPrefix(id, "nbkube-local://") {
		t.Fatalf("container ID %q carries no PID", id)
	}
	return pid
}

func httpGet(t *testing.T, ip string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(fmt.Sprintf("http://%s:%d/", ip, serverPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// servePackets answers each UDP datagram at addr with what answer makes of it (nothing when
// nil) until the test ends; it returns the socket.
func servePackets(t *testing.T, addr string, answer func([]byte) []byte) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if a := answer(buf[:n]); a != nil {
				_, _ = pc.WriteTo(a, from)
			}
		}
	}()
	return pc
}

// hostAddress is the machine's first IPv4 address besides loopback, "" when it has none.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// runProbe runs a Python script as pod app of ns, labelled app=<app>, with args, as user
// 1000, and returns the JSON object it wrote to /work/msg (its termination message).
func runProbe(t *testing.T, client kubernetes.Interface, ns, app, script string, args ...string) map[string]string {
	t.Helper()
	p := basicPod(ns, app, corev1.RestartPolicyNever, append([]string{"python3", "-c", script}, args...)...)
	p.Labels = map[string]string{"app": app}
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	c := &p.Spec.Containers[0]
	c.Image, c.TerminationMessagePath = "python:3.11-slim", "/work/msg"
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	c.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	done := waitPod(t, client, createPod(t, client, p), "ended", terminal)
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("%s: the probe failed: %+v", app, done.Status.ContainerStatuses[0].State.Terminated)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(done.Status.ContainerStatuses[0].State.Terminated.Message), &got); err != nil {
		t.Fatalf("%s: %v: %q", app, err, done.Status.ContainerStatuses[0].State.Terminated.Message)
	}
	return got
}
