package localnode_test

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// routeOutAttack is what a user's kernel would try through its sandbox's eth0, each result as
// JSON in the termination message: the node's own loopback and the node's address, the cloud's
// metadata address, the sandbox's own eth0 address, a raw socket, its routes, and, for the
// flooder, more UDP flows than a sandbox may have (argv: host, TCP port, loopback port, UDP
// port, mode).
const routeOutAttack = `
import json, os, socket, subprocess, sys
host, port, loport, udpport, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
out = {}
def tcp(addr, p):
    try:
        socket.create_connection((addr, p), timeout=5).close()
        return "connected"
    except OSError as e:
        return "refused" if isinstance(e, ConnectionRefusedError) else "error"
if mode == "attack":
    out["loopback"] = tcp("127.0.0.1", loport)
    out["node"] = tcp(host, port)
    out["metadata"] = tcp("169.254.169.254", 80)
    out["self"] = tcp("10.0.2.100", port)
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        out["raw"] = "opened"
    except PermissionError:
        out["raw"] = "denied"
    for name, args in (("route", ["ip", "route", "del", "default"]), ("link", ["ip", "link", "set", "eth0", "down"])):
        try:
            out[name] = "changed" if subprocess.run(args, capture_output=True).returncode == 0 else "denied"
        except FileNotFoundError:
            out[name] = "no ip"
    out["still"] = tcp(host, port)
else:
    socks = []
    for i in range(600):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(0.01)
        s.sendto(b"x", (host, udpport))
        socks.append(s)
    import select, time
    waiting, answered, end = set(socks), 0, time.time() + 3
    while waiting and time.time() < end:
        ready, _, _ = select.select(list(waiting)[:1000], [], [], 0.2)
        for s in ready:
            s.recv(10)
            answered += 1
            waiting.discard(s)
    out["answered"] = str(answered)
open("/work/msg", "w").write(json.dumps(out))
`

// routeOutResistsItsPod: what a pod's code tries through its eth0 beyond its policies gets
// nowhere, and it cannot change its interface or routes; a flood of UDP flows stops at the
// bound (512) instead of taking the node's descriptors.
func routeOutResistsItsPod(t *testing.T, client kubernetes.Interface) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun: sandboxes have no route out here")
	}
	hostIP := ""
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			hostIP = n.IP.String()
			break
		}
	}
	if hostIP == "" {
		t.Skip("the machine has no IPv4 address besides loopback to stand for the node's network")
	}
	node, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	go func() {
		for {
			c, err := node.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	loopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loopback.Close() })
	echo, err := net.ListenPacket("udp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo(buf[:n], from)
		}
	}()

	ns := newNamespace(t, client)
	policy := func(name, app string, block *networkingv1.IPBlock) {
		p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: block}}}}}}
		if _, err := client.NetworkingV1().NetworkPolicies(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The attacker has the chart's default kernelEgress, public addresses only, and the
	// node's address stands for the node's private network (it is one of the machine's, which
	// may be of a documentation or public range).
	except := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"}
	if !netip.MustParseAddr(hostIP).IsPrivate() {
		except = append(except, hostIP+"/32")
	}
	policy("kernel-egress", "attacker", &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: except})
	policy("open", "flooder", &networkingv1.IPBlock{CIDR: "0.0.0.0/0"})
	run := func(app, mode string) map[string]string {
		p := basicPod(ns, app, corev1.RestartPolicyNever, "python3", "-c", routeOutAttack, hostIP,
			strconv.Itoa(node.Addr().(*net.TCPAddr).Port), strconv.Itoa(loopback.Addr().(*net.TCPAddr).Port),
			strconv.Itoa(echo.LocalAddr().(*net.UDPAddr).Port), mode)
		p.Labels = map[string]string{"app": app}
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
		p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		c := &p.Spec.Containers[0]
		c.Image, c.TerminationMessagePath = "python:3.11-slim", "/work/msg"
		c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		c.VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
		done := waitPod(t, client, createPod(t, client, p), "ended", terminal)
		if done.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("%s: the script failed: %+v", app, done.Status.ContainerStatuses[0].State.Terminated)
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(done.Status.ContainerStatuses[0].State.Terminated.Message), &got); err != nil {
			t.Fatalf("%s: %v: %q", app, err, done.Status.ContainerStatuses[0].State.Terminated.Message)
		}
		return got
	}
	got := run("attacker", "attack")
	t.Logf("what the attacker got: %v", got)
	for what, want := range map[string]string{
		// The sandbox's own loopback, where nothing listens: never the node's.
		"loopback": "refused",
		// The node's private address, the metadata address and eth0's own: reset by the node.
		"node": "refused", "metadata": "refused", "self": "refused",
		"raw": "denied", "still": "refused",
	} {
		if got[what] != want {
			t.Errorf("%s: %q, want %q (all: %v)", what, got[what], want, got)
		}
	}
	for _, what := range []string{"route", "link"} {
		if got[what] != "denied" && got[what] != "no ip" {
			t.Errorf("the pod changed its %s: %v", what, got)
		}
	}
	if got := run("flooder", "flood")["answered"]; got != "512" {
		t.Errorf("600 UDP flows at once: %s answered, want the bound, 512", got)
	}
}
