package localnode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
	corev1 "k8s.io/api/core/v1"

	"github.com/nbkube/nbkube/internal/podns"
)

// A sandbox's route out for every protocol: its eth0 (podns.RouteOut), a TUN interface with
// the default route, whose IP packets the node answers with a user-space network stack of
// the sandbox's own (gVisor's netstack, as rootless container networks do). A TCP connection
// or a UDP flow to an address outside the pod network is made from the host, as the pod's
// egress NetworkPolicies allow (its protocol and port included), and spliced to the
// sandbox's: a refused connection is reset, a refused datagram dropped, as a network that
// enforces the policies would. The node's loopback is not outside: a sandbox reaches the pods
// it may reach at their addresses on its own loopback (podnet.go). IPv4 only; ICMP (ping)
// has no way out.
const (
	// sandboxAddress is each sandbox's address on eth0, the source of what it sends. Each
	// sandbox has its own stack, so all may share it, as slirp4netns's guests do.
	sandboxAddress = "10.0.2.100"
	// routeOutMTU is eth0's MTU.
	routeOutMTU = 1500
	// udpFlowIdle ends a UDP flow after this long without a datagram either way, as
	// conntrack forgets one.
	udpFlowIdle = 2 * time.Minute
	// maxConnecting bounds the TCP connections a sandbox may have being made at once.
	maxConnecting = 256
	// maxFlows bounds the TCP connections and UDP flows a sandbox may have out at once: each
	// is a socket of nbkube's and buffers in its memory, and a sandbox must not take all of
	// either. Past it a connection is reset and a datagram dropped.
	maxFlows = 512
	// tcpBuffer bounds each direction's buffer of one TCP connection in the stack, so that a
	// sandbox's connections hold at most maxFlows × 2 × tcpBuffer of nbkube's memory
	// (256 MiB) however slow the far ends read.
	tcpBuffer = 256 << 10
)

// decideRouteOut sets whether sandboxes get a route out: root makes each one's TUN interface
// itself; an ordinary user's sandboxes make their own, from a /dev/net/tun that user may open
// (Debian's udev makes it 0666). Without one, the egress proxy is the only way out, and the
// log says why.
func (n *Node) decideRouteOut(logger logr.Logger) {
	if os.Geteuid() != 0 {
		if err := unix.Access("/dev/net/tun", unix.R_OK|unix.W_OK); err != nil {
			logger.Info("Sandboxes go out through the egress proxy only (HTTP and HTTPS): this user may not open /dev/net/tun", "error", err.Error())
			return
		}
	}
	n.routeOut = true
}

// sandboxRouteOut is the sandbox's side of the spec: the TUN device it opens.
func (w *podWorker) sandboxRouteOut() *podns.RouteOut {
	if !w.node.routeOut {
		return nil
	}
	return &podns.RouteOut{Device: "/dev/net/tun", Address: sandboxAddress, MTU: routeOutMTU}
}

// routeOutStack is a sandbox's network stack on the node.
type routeOutStack struct {
	tun   *os.File
	stack *stack.Stack
	// flows counts the connections and flows out (maxFlows).
	flows atomic.Int32
}

// take counts one more flow, unless there are maxFlows already.
func (r *routeOutStack) take() bool {
	if r.flows.Add(1) > maxFlows {
		r.flows.Add(-1)
		return false
	}
	return true
}

func (r *routeOutStack) done() { r.flows.Add(-1) }

// startRouteOut takes the sandbox's TUN device and answers it; a sandbox without one (the
// machine would not make it) has the egress proxy only, which the log says.
func (l *sandboxLink) startRouteOut(n *podNetwork) {
	tun, err := l.control.RouteOut(l.ctx)
	if err != nil {
		l.log.V(1).Info("The sandbox has no route out: only the egress proxy goes out", "error", err.Error())
		return
	}
	ep, err := fdbased.New(&fdbased.Options{FDs: []int{int(tun.Fd())}, MTU: routeOutMTU})
	if err != nil {
		tun.Close()
		l.log.Error(err, "Answering the sandbox's route out")
		return
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: tcpBuffer / 2, Max: tcpBuffer}
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: tcpBuffer / 2, Max: tcpBuffer}
	_ = s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	_ = s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	const nic = 1
	if terr := s.CreateNIC(nic, ep); terr != nil {
		s.Close()
		tun.Close()
		l.log.Error(fmt.Errorf("%s", terr), "Answering the sandbox's route out")
		return
	}
	// Every destination is the stack's to answer, from whatever address the sandbox sends.
	_ = s.SetPromiscuousMode(nic, true)
	_ = s.SetSpoofing(nic, true)
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: nic}})
	ro := &routeOutStack{tun: tun, stack: s}
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, tcp.NewForwarder(s, 0, maxConnecting, func(r *tcp.ForwarderRequest) {
		l.forwardTCP(n, ro, r)
	}).HandlePacket)
	s.SetTransportProtocolHandler(udp.ProtocolNumber, udp.NewForwarder(s, func(r *udp.ForwarderRequest) {
		l.forwardUDP(n, ro, r)
	}).HandlePacket)
	if !l.keep(func() { l.routeOut = ro }) {
		s.Close()
		tun.Close()
	}
}

// close ends the stack and its connections.
func (r *routeOutStack) close() {
	r.stack.Close()
	// The device stays open until the stack no longer reads it.
	r.stack.Wait()
	r.tun.Close()
}

// outside is where a connection of the sandbox goes: the address and port it asked for,
// when the pod's egress policies let it go there with proto; ok false otherwise.
func (l *sandboxLink) outside(n *podNetwork, id stack.TransportEndpointID, proto corev1.Protocol) (string, bool) {
	ip, ok := netip.AddrFromSlice(id.LocalAddress.AsSlice())
	if !ok {
		return "", false
	}
	ip = ip.Unmap()
	// Never the node itself, nor what only the node's own networks should reach.
	if ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() || ip == netip.MustParseAddr(sandboxAddress) {
		return "", false
	}
	view, err := n.view()
	if err != nil || !view.allowsOut(endpointPod{pod: l.pod, ip: l.ip}, ip, proto, int32(id.LocalPort)) {
		return "", false
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(id.LocalPort))), true
}

// forwardTCP connects from the host to where the sandbox's SYN goes and splices the two; the
// sandbox's handshake completes only once that connection is made, so a refusal is a reset
// as it would be from the far end.
func (l *sandboxLink) forwardTCP(n *podNetwork, ro *routeOutStack, r *tcp.ForwarderRequest) {
	to, ok := l.outside(n, r.ID(), corev1.ProtocolTCP)
	if !ok || !ro.take() {
		r.Complete(true)
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, egressDialTimeout)
	out, err := (&net.Dialer{}).DialContext(ctx, "tcp", to)
	cancel()
	if err != nil {
		ro.done()
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		ro.done()
		r.Complete(true)
		out.Close()
		return
	}
	r.Complete(false)
	in := gonet.NewTCPConn(&wq, ep)
	l.conns.Add(1)
	go func() {
		defer l.conns.Done()
		defer ro.done()
		splice(in, out)
		_ = in.Close()
		out.Close()
	}()
}

// forwardUDP relays the flow of the sandbox's datagram to where it goes, from a host socket
// of its own, both ways, until it has been idle for udpFlowIdle.
func (l *sandboxLink) forwardUDP(n *podNetwork, ro *routeOutStack, r *udp.ForwarderRequest) {
	to, ok := l.outside(n, r.ID(), corev1.ProtocolUDP)
	if !ok || !ro.take() {
		return
	}
	out, err := net.Dial("udp", to)
	if err != nil {
		ro.done()
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		ro.done()
		out.Close()
		return
	}
	in := gonet.NewUDPConn(&wq, ep)
	var once sync.Once
	end := func() {
		once.Do(func() {
			_ = in.Close()
			out.Close()
			ro.done()
		})
	}
	relay := func(dst, src net.Conn) {
		defer end()
		buf := make([]byte, 64*1024)
		for {
			_ = src.SetReadDeadline(time.Now().Add(udpFlowIdle))
			k, err := src.Read(buf)
			if err != nil {
				return
			}
			if _, err := dst.Write(buf[:k]); err != nil {
				return
			}
		}
	}
	l.conns.Add(2)
	go func() { defer l.conns.Done(); relay(out, in) }()
	go func() { defer l.conns.Done(); relay(in, out) }()
}
