package localnode_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nbkube/nbkube/internal/localnode"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestSandboxedNode runs pods in sandboxes (Config.Sandbox) against a real kube-apiserver
// and kube-controller-manager.
func TestSandboxedNode(t *testing.T) {
	cp := testenv.ControlPlane(t, true)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	startNode(t, client, localnode.Config{DataDir: t.TempDir(), Sandbox: true, CrashLoopBackOff: 200 * time.Millisecond,
		SandboxDNS: []string{startNameServer(t)}})

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

	// An exec probe runs where the container's processes run: it sees the sandbox's private
	// /tmp, which the host's /tmp is not.
	t.Run("ExecProbeRunsInTheSandbox", func(t *testing.T) {
		ns := newNamespace(t, client)
		marker := "nbkube-ready-" + ns
		pod := basicPod(ns, "exec-probe", corev1.RestartPolicyAlways, "sh", "-c", "touch /tmp/"+marker+"; exec sleep 600")
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test -f /tmp/" + marker + " && test $(id -u) = 1000"}}}}
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
		createPod(t, client, pod)
		waitPod(t, client, pod, "ready", podReady)
		if _, err := os.Stat(filepath.Join(os.TempDir(), marker)); err == nil {
			t.Errorf("the container's /tmp/%s is on the host", marker)
		}
	})

	t.Run("EgressFollowsThePodsPolicies", func(t *testing.T) { egressFollowsThePodsPolicies(t, client) })
	t.Run("RouteOutResistsItsPod", func(t *testing.T) { routeOutResistsItsPod(t, client) })
	t.Run("EachPodRunsAsAUserOfItsOwn", func(t *testing.T) { eachPodRunsAsAUserOfItsOwn(t, client) })
	t.Run("NamesResolveThroughTheNodesDNS", func(t *testing.T) { namesResolveThroughTheNodesDNS(t, client) })
}

// eachPodRunsAsAUserOfItsOwn: under root, two pods that share a volume (as a user's kernels
// share the home) run as two users of the machine, neither root nor each other, and still read
// and write the volume's files as theirs, which stay root's on the machine.
func eachPodRunsAsAUserOfItsOwn(t *testing.T, client kubernetes.Interface) {
	if os.Geteuid() != 0 {
		t.Skip("only root may run pods as users of their own")
	}
	ns := newNamespace(t, client)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "mine.txt"), []byte("ann's"), 0o600); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for _, name := range []string{"first", "second"} {
		marker := "nbkube-own-user-" + ns + "-" + name
		pod := basicPod(ns, name, corev1.RestartPolicyNever, "sh", "-c",
			`cat /home/jovyan/mine.txt > /home/jovyan/`+name+`.out && exec python3 -c "import time; time.sleep(600)" `+marker)
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](100)}
		pod.Spec.Volumes = []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: home}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/jovyan"}}
		createPod(t, client, pod)
		waitPod(t, client, pod, "running", podRunning)
		testenv.Eventually(t, name+"'s process", 30*time.Second, func() error {
			uid, err := hostUIDOf(marker)
			uids[name] = uid
			return err
		})
		out := filepath.Join(home, name+".out")
		testenv.Eventually(t, name+"'s copy", 30*time.Second, func() error {
			b, err := os.ReadFile(out)
			if err == nil && string(b) != "ann's" {
				err = fmt.Errorf("it reads %q", b)
			}
			return err
		})
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s wrote a file that is %d:%d on the machine, want root's", name, st.Uid, st.Gid)
		}
	}
	if uids["first"] == "0" || uids["second"] == "0" || uids["first"] == uids["second"] {
		t.Errorf("the pods run as users %v of the machine, want two of their own", uids)
	}
}

// hostUIDOf is the user of the machine of the process whose command line has marker.
func hostUIDOf(marker string) (string, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "cmdline")); err != nil || !strings.Contains(string(b), marker) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue
		}
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				return strings.Fields(v)[0], nil
			}
		}
	}
	return "", fmt.Errorf("no process has %s", marker)
}

// egressProbe reports, as JSON in the termination message, what a sandboxed process gets
// from the host's server at argv[1]:argv[2] through the proxy its environment names, through
// a CONNECT tunnel and through a plain socket, from the host's loopback server at
// 127.0.0.1:argv[3] through the proxy, and from the host's UDP echo server at
// argv[1]:argv[4].
const egressProbe = `
import http.client, json, os, sys, urllib.parse, urllib.request
host, port, loport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
out = {}
try:
    out["env"] = urllib.request.urlopen("http://%s:%d/" % (host, port), timeout=20).read().decode()
except urllib.error.HTTPError as e:
    out["env"] = "HTTP %d" % e.code
except OSError as e:
    out["env"] = "error %s" % e
def through_proxy(url):
    c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
    c.request("GET", url)
    r = c.getresponse()
    return "HTTP %d %s" % (r.status, r.read().decode().strip())
out["loopback"] = through_proxy("http://127.0.0.1:%d/" % loport)
c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
c.set_tunnel(host, port)
try:
    c.request("GET", "/")
    out["tunnel"] = c.getresponse().read().decode()
except OSError as e:
    out["tunnel"] = "error %s" % e
import socket
try:
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"GET / HTTP/1.0\r\nHost: outside\r\n\r\n")
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        data += d
    out["socket"] = data.decode().split("\r\n\r\n", 1)[-1]
except OSError as e:
    out["socket"] = "error"
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(3)
try:
    u.sendto(b"ping", (host, int(sys.argv[4])))
    out["udp"] = u.recv(100).decode()
except OSError as e:
    out["udp"] = "error"
open("/work/msg", "w").write(json.dumps(out))
`

// egressFollowsThePodsPolicies: a sandbox reaches the host's network only through the node's
// proxy, where its egress NetworkPolicies allow, and never the node's own loopback, where the
// control plane listens.
func egressFollowsThePodsPolicies(t *testing.T, client kubernetes.Interface) {
	hostIP := hostAddress(t)
	if hostIP == "" {
		t.Skip("the machine has no IPv4 address besides loopback to stand for the internet")
	}
	serve := func(addr, body string) *net.TCPAddr {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }),
			ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ln.Addr().(*net.TCPAddr)
	}
	outside := serve(net.JoinHostPort(hostIP, "0"), "hello from outside")
	controlPlane := serve("127.0.0.1:0", "control plane")
	echo := servePackets(t, net.JoinHostPort(hostIP, "0"), func(b []byte) []byte { return b })
	udpPort := echo.LocalAddr().(*net.UDPAddr).Port

	ns := newNamespace(t, client)
	egress := func(name, app string, rules ...networkingv1.NetworkPolicyEgressRule) {
		p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: rules}}
		if _, err := client.NetworkingV1().NetworkPolicies(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// "open" may go anywhere (a block of every address, loopback included); "closed" nowhere.
	egress("open", "open", networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}})
	egress("closed", "closed")
	// "tcp" may reach the outside server's TCP port only.
	egress("tcp", "tcp", networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: hostIP + "/32"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt(outside.Port))}},
	})
	probe := func(app string) map[string]string {
		return runProbe(t, client, ns, app, egressProbe, hostIP, strconv.Itoa(outside.Port), strconv.Itoa(controlPlane.Port),
			strconv.Itoa(udpPort))
	}
	open, closed, tcpOnly := probe("open"), probe("closed"), probe("tcp")
	// A plain socket and UDP go out through the sandbox's eth0 (routeout.go), as the
	// policies allow, protocol and port included; on a machine without /dev/net/tun, only
	// the proxy goes out.
	plain, udp := "hello from outside", "ping"
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Log("no /dev/net/tun: sandboxes have no route out here, only the proxy")
		plain, udp = "error", "error"
	}
	for what, want := range map[string]string{"env": "hello from outside", "tunnel": "hello from outside",
		"socket": plain, "udp": udp} {
		if open[what] != want {
			t.Errorf("allowed pod, %s: %q, want %q", what, open[what], want)
		}
	}
	for what, want := range map[string]string{"socket": plain, "udp": "error"} {
		if tcpOnly[what] != want {
			t.Errorf("pod allowed TCP to the port only, %s: %q, want %q", what, tcpOnly[what], want)
		}
	}
	if closed["socket"] != "error" || closed["udp"] != "error" {
		t.Errorf("pod without egress, plain socket and UDP: %v, want both refused", closed)
	}
	if !strings.HasPrefix(open["loopback"], "HTTP 403") {
		t.Errorf("allowed pod, the node's loopback through the proxy: %q, want a 403", open["loopback"])
	}
	if closed["env"] != "HTTP 403" || !strings.Contains(closed["tunnel"], "403") || !strings.HasPrefix(closed["loopback"], "HTTP 403") {
		t.Errorf("pod without egress: %v, want every way refused with 403", closed)
	}
}
