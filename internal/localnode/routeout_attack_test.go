package localnode_test

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
    # Datagrams sent in a burst may be dropped on the way (the TUN device's queue): each
    # socket sends again until answered, for a few rounds. Flows past the bound never are.
    import select, time
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(600)]
    answered = set()
    for _ in range(6):
        for i, s in enumerate(socks):
            if s not in answered:
                s.sendto(b"x", (host, udpport))
                if i % 50 == 49:
                    time.sleep(0.01)
        end = time.time() + 1
        while time.time() < end:
            ready, _, _ = select.select([s for s in socks if s not in answered][:1000], [], [], 0.1)
            for s in ready:
                s.recv(10)
                answered.add(s)
    out["answered"] = str(len(answered))
open("/work/msg", "w").write(json.dumps(out))
`

// routeOutResistsItsPod: what a pod's code tries through its eth0 beyond its policies gets
// nowhere, and it cannot change its interface or routes; a flood of UDP flows stops at the
// bound (512) instead of taking the node's descriptors.
func routeOutResistsItsPod(t *testing.T, client kubernetes.Interface) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun: sandboxes have no route out here")
	}
	hostIP := hostAddress(t)
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
	echo := servePackets(t, net.JoinHostPort(hostIP, "0"), func(b []byte) []byte { return b })

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
		return runProbe(t, client, ns, app, routeOutAttack, hostIP, strconv.Itoa(node.Addr().(*net.TCPAddr).Port),
			strconv.Itoa(loopback.Addr().(*net.TCPAddr).Port), strconv.Itoa(echo.LocalAddr().(*net.UDPAddr).Port), mode)
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
