package localnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nbkube/nbkube/internal/podns"
)

// podNetwork is the pod network of a node that sandboxes: each sandbox has only loopback, and
// the node carries the connections a pod network would route, as one that enforces
// NetworkPolicy would.
//
//   - Into a sandbox: the node listens at the pod IP, on the host, on each port a container
//     declares and each port a Service that selects the pod targets, and brings what connects
//     there into the sandbox (podns.Control.Dial). That is how the API server, the manager and
//     the probes, which are not pods, reach a pod; policies do not restrict them, as they do
//     not restrict a kubelet.
//   - Between pods: inside each sandbox, the node listens at the other pods' IPs (loopback
//     addresses, which a sandbox's own loopback also has) on the ports of theirs that the
//     NetworkPolicies let this pod reach, and connects what arrives to the pod IP on the host.
//     Nothing else of the host's network is reachable from a sandbox directly: not the control
//     plane, not nbkube's servers, not the internet.
//   - Out of the pod network: an HTTP proxy inside each sandbox, which connects where the
//     pod's egress policies allow (egress.go).
//
// It is resynced whenever a sandbox starts or ends and whenever a NetworkPolicy, Service or
// Namespace changes.
type podNetwork struct {
	log        logr.Logger
	policies   networkinglisters.NetworkPolicyLister
	services   corelisters.ServiceLister
	namespaces corelisters.NamespaceLister
	// dnsServers are where the sandboxes' DNS relays (dns.go).
	dnsServers []string

	mu    sync.Mutex
	links map[*sandboxLink]bool
	// syncing serialises resyncs.
	syncing sync.Mutex
	kick    chan struct{}
}

// newPodNetwork is the network of a node whose sandboxes' DNS relays to dnsServers.
func newPodNetwork(dnsServers []string) *podNetwork {
	return &podNetwork{links: map[*sandboxLink]bool{}, kick: make(chan struct{}, 1), dnsServers: dnsServers}
}

// sandboxLink is one sandboxed container's place in the pod network.
type sandboxLink struct {
	pod       *corev1.Pod
	ip        string
	container string
	control   *podns.Control
	ctx       context.Context
	log       logr.Logger
	conns     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// in are the node's listeners at the pod IP, by port; out the listeners inside the
	// sandbox, by the address they listen at.
	in  map[int32]net.Listener
	out map[string]net.Listener
	// egress is the egress proxy's listener inside the sandbox (egress.go).
	egress net.Listener
	// dns and dnsTCP are the DNS relay's sockets inside the sandbox (dns.go).
	dns    net.PacketConn
	dnsTCP net.Listener
	// routeOut answers the sandbox's eth0 (routeout.go), when it has one.
	routeOut *routeOutStack
}

// attach links a sandboxed container into the network: its declared ports are reachable at
// the pod IP when it returns, and the other pods it may reach are reachable from inside.
func (n *podNetwork) attach(ctx context.Context, pod *corev1.Pod, ip string, c *corev1.Container, control *podns.Control, log logr.Logger) (*sandboxLink, error) {
	l := &sandboxLink{pod: pod, ip: ip, container: c.Name, control: control, ctx: ctx, log: log,
		in: map[int32]net.Listener{}, out: map[string]net.Listener{}}
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			if err := l.listenIn(p.ContainerPort); err != nil {
				l.close()
				return nil, err
			}
		}
	}
	if err := l.listenEgress(n); err != nil {
		l.close()
		return nil, err
	}
	if err := l.listenDNS(n.dnsServers); err != nil {
		l.close()
		return nil, fmt.Errorf("serving the sandbox's DNS: %w", err)
	}
	l.startRouteOut(n)
	n.mu.Lock()
	n.links[l] = true
	n.mu.Unlock()
	// Before the pod's first connections, as far as it can be: they are made as it starts.
	n.sync()
	return l, nil
}

// detach closes the link's listeners; connections in progress end with the sandbox.
func (n *podNetwork) detach(l *sandboxLink) {
	n.mu.Lock()
	delete(n.links, l)
	n.mu.Unlock()
	l.close()
	n.changed()
}

// changed asks for a resync.
func (n *podNetwork) changed() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// run resyncs on every change until ctx ends.
func (n *podNetwork) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
			n.sync()
		}
	}
}

// handler resyncs the network on every change of the objects an informer watches.
func (n *podNetwork) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.changed() },
		UpdateFunc: func(any, any) { n.changed() },
		DeleteFunc: func(any) { n.changed() },
	}
}

// podEnds groups the links by pod.
type podEnd struct {
	endpointPod
	links  []*sandboxLink
	served []int32
}

// sync makes every link's listeners what the pods, Services and policies ask for now.
func (n *podNetwork) sync() {
	n.syncing.Lock()
	defer n.syncing.Unlock()
	n.mu.Lock()
	links := make([]*sandboxLink, 0, len(n.links))
	for l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	if len(links) == 0 || n.policies == nil {
		return
	}
	view, err := n.view()
	if err != nil {
		n.log.Error(err, "Reading the network policies")
		return
	}
	pods := map[types.UID]*podEnd{}
	var order []types.UID
	for _, l := range links {
		e := pods[l.pod.UID]
		if e == nil {
			e = &podEnd{endpointPod: endpointPod{pod: l.pod, ip: l.ip}}
			pods[l.pod.UID] = e
			order = append(order, l.pod.UID)
		}
		e.links = append(e.links, l)
	}
	for _, uid := range order {
		e := pods[uid]
		e.served = n.servedPorts(e.pod)
		slices.SortFunc(e.links, func(a, b *sandboxLink) int {
			return containerIndex(e.pod, a.container) - containerIndex(e.pod, b.container)
		})
	}
	for _, uid := range order {
		src := pods[uid]
		for i, l := range src.links {
			var in []int32
			if i == 0 {
				// Ports that Services target and no container declares: the first container's.
				for _, p := range src.served {
					if !declaredBy(src.pod, p) {
						in = append(in, p)
					}
				}
			}
			out := map[string]bool{}
			for _, other := range order {
				dst := pods[other]
				if other == uid || dst.ip == src.ip {
					continue
				}
				for _, p := range dst.served {
					if view.allows(src.endpointPod, dst.endpointPod, p) {
						out[net.JoinHostPort(dst.ip, strconv.Itoa(int(p)))] = true
					}
				}
			}
			l.reconcile(in, out, src.pod)
		}
	}
}

func (n *podNetwork) view() (policyView, error) {
	policies, err := n.policies.List(labels.Everything())
	if err != nil {
		return policyView{}, err
	}
	namespaces, err := n.namespaces.List(labels.Everything())
	if err != nil {
		return policyView{}, err
	}
	v := policyView{policies: policies, namespaces: map[string]labels.Set{}}
	for _, ns := range namespaces {
		v.namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	return v, nil
}

// servedPorts are the TCP ports a pod serves: those its containers declare and those the
// Services that select it target.
func (n *podNetwork) servedPorts(pod *corev1.Pod) []int32 {
	var ports []int32
	add := func(p int32) {
		if p > 0 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				add(p.ContainerPort)
			}
		}
	}
	services, err := n.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return ports
	}
	for _, s := range services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				continue
			}
			switch {
			case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
				add(namedPort(pod, sp.TargetPort.StrVal))
			case sp.TargetPort.IntVal != 0:
				add(sp.TargetPort.IntVal)
			default:
				add(sp.Port)
			}
		}
	}
	return ports
}

func containerIndex(pod *corev1.Pod, name string) int {
	return slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
}

func declaredBy(pod *corev1.Pod, port int32) bool {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort == port {
				return true
			}
		}
	}
	return false
}

// reconcile adds the extra ports in and the addresses out the link lacks, and closes those it
// no longer has; the ports its container declares stay.
func (l *sandboxLink) reconcile(in []int32, out map[string]bool, pod *corev1.Pod) {
	for _, p := range in {
		l.mu.Lock()
		_, have := l.in[p]
		l.mu.Unlock()
		if !have {
			if err := l.listenIn(p); err != nil {
				l.log.V(1).Info("Forwarding a Service's port into the pod", "port", p, "error", err.Error())
			}
		}
	}
	l.mu.Lock()
	for p, ln := range l.in {
		if !slices.Contains(in, p) && !declaredBy(pod, p) {
			ln.Close()
			delete(l.in, p)
		}
	}
	var missing []string
	for addr := range out {
		if _, have := l.out[addr]; !have {
			missing = append(missing, addr)
		}
	}
	for addr, ln := range l.out {
		if !out[addr] {
			ln.Close()
			delete(l.out, addr)
		}
	}
	l.mu.Unlock()
	for _, addr := range missing {
		if err := l.listenOut(addr); err != nil && !errors.Is(err, podns.ErrEnded) {
			l.log.V(1).Info("Routing a pod's connections to another pod", "address", addr, "error", err.Error())
		}
	}
}

// listenIn listens at the pod IP on the host and brings each connection into the sandbox.
func (l *sandboxLink) listenIn(port int32) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(l.ip, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("forwarding port %d: %w", port, err)
	}
	if !l.keep(func() { l.in[port] = ln }) {
		ln.Close()
		return podns.ErrEnded
	}
	go l.serve(ln, func() (net.Conn, error) { return l.control.Dial(l.ctx, int(port)) })
	return nil
}

// listenOut listens at another pod's address inside the sandbox and connects each
// connection to it on the host.
func (l *sandboxLink) listenOut(addr string) error {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	ln, err := l.control.Listen(l.ctx, host, p)
	if err != nil {
		return err
	}
	if !l.keep(func() { l.out[addr] = ln }) {
		ln.Close()
		return podns.ErrEnded
	}
	var d net.Dialer
	go l.serve(ln, func() (net.Conn, error) { return d.DialContext(l.ctx, "tcp", addr) })
	return nil
}

// keep records a listener unless the link was closed.
func (l *sandboxLink) keep(record func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	record()
	return true
}

func (l *sandboxLink) serve(ln net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		l.conns.Go(func() {
			defer in.Close()
			out, err := dial()
			if err != nil {
				if !errors.Is(err, podns.ErrEnded) {
					l.log.V(1).Info("Forwarding a connection", "to", in.LocalAddr().String(), "error", err.Error())
				}
				return
			}
			defer out.Close()
			splice(in, out)
		})
	}
}

func (l *sandboxLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if r := l.routeOut; r != nil {
		l.routeOut = nil
		// Its stack's end waits for none of the link's locks.
		go r.close()
	}
	for _, ln := range l.in {
		ln.Close()
	}
	for _, ln := range l.out {
		ln.Close()
	}
	if l.egress != nil {
		l.egress.Close()
	}
	if l.dns != nil {
		l.dns.Close()
		l.dnsTCP.Close()
	}
	l.in, l.out = map[int32]net.Listener{}, map[string]net.Listener{}
}

// watch makes the network read NetworkPolicies, Services and Namespaces from objects, and
// resync when they change.
func (n *podNetwork) watch(objects informers.SharedInformerFactory) error {
	policies, services, namespaces := objects.Networking().V1().NetworkPolicies(), objects.Core().V1().Services(), objects.Core().V1().Namespaces()
	for _, inf := range []cache.SharedIndexInformer{policies.Informer(), services.Informer(), namespaces.Informer()} {
		if _, err := inf.AddEventHandler(n.handler()); err != nil {
			return err
		}
	}
	n.policies, n.services, n.namespaces = policies.Lister(), services.Lister(), namespaces.Lister()
	return nil
}
