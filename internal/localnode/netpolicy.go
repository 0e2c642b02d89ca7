package localnode

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// policyView is what deciding whether one pod may open a TCP connection to another reads:
// every NetworkPolicy, and the labels of each namespace.
type policyView struct {
	policies   []*networkingv1.NetworkPolicy
	namespaces map[string]labels.Set
}

// endpointPod is one end of a connection between pods, or, with no pod, an address outside
// the pod network.
type endpointPod struct {
	pod *corev1.Pod
	ip  string
}

// allows tells whether src may connect to TCP port of dst, as a network that enforces
// NetworkPolicy decides: the egress policies that select src must let it out to dst, and the
// ingress policies that select dst must let it in; a pod no policy of a direction selects is
// not restricted in that direction.
func (v policyView) allows(src, dst endpointPod, port int32) bool {
	return v.admits(networkingv1.PolicyTypeEgress, src, dst, corev1.ProtocolTCP, port) &&
		v.admits(networkingv1.PolicyTypeIngress, dst, src, corev1.ProtocolTCP, port)
}

// admits tells whether the policies of direction that select subject admit its peer on port
// of protocol proto, port being dst's in either direction.
func (v policyView) admits(direction networkingv1.PolicyType, subject, peer endpointPod, proto corev1.Protocol, port int32) bool {
	selected := false
	dst := peer
	if direction == networkingv1.PolicyTypeIngress {
		dst = subject
	}
	for _, p := range v.policies {
		if p.Namespace != subject.pod.Namespace || !hasPolicyType(p, direction) || !selects(&p.Spec.PodSelector, subject.pod.Labels) {
			continue
		}
		selected = true
		if direction == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				if v.peersMatch(r.From, p.Namespace, peer) && portsMatch(r.Ports, dst.pod, proto, port) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Egress {
				if v.peersMatch(r.To, p.Namespace, peer) && portsMatch(r.Ports, dst.pod, proto, port) {
					return true
				}
			}
		}
	}
	return !selected
}

// hasPolicyType is the policy's policyTypes, defaulted as the API server documents: Ingress,
// and Egress when the policy has egress rules.
func hasPolicyType(p *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	types := p.Spec.PolicyTypes
	if len(types) == 0 {
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(p.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	for _, have := range types {
		if have == t {
			return true
		}
	}
	return false
}

// selects applies a label selector; one that does not parse selects nothing.
func selects(s *metav1.LabelSelector, set map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(set))
}

// peersMatch tells whether any of a rule's peers is peer; a rule without peers matches all.
func (v policyView) peersMatch(peers []networkingv1.NetworkPolicyPeer, policyNamespace string, peer endpointPod) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			if inBlock(p.IPBlock, peer.ip) {
				return true
			}
		case peer.pod == nil:
			// An address outside the pod network matches ipBlocks only.
		case p.NamespaceSelector != nil:
			if selects(p.NamespaceSelector, v.namespaces[peer.pod.Namespace]) &&
				(p.PodSelector == nil || selects(p.PodSelector, peer.pod.Labels)) {
				return true
			}
		case p.PodSelector != nil:
			if peer.pod.Namespace == policyNamespace && selects(p.PodSelector, peer.pod.Labels) {
				return true
			}
		}
	}
	return false
}

// inBlock tells whether ip lies in the block's CIDR and none of its exceptions.
func inBlock(b *networkingv1.IPBlock, ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	contains := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		return err == nil && p.Contains(addr)
	}
	if !contains(b.CIDR) {
		return false
	}
	for _, e := range b.Except {
		if contains(e) {
			return false
		}
	}
	return true
}

// portsMatch tells whether a rule's ports include port of dst with protocol proto (a port
// without one is TCP's, as in Kubernetes); a rule without ports matches every port of every
// protocol. A named port is the one of dst's containers that has that name.
func portsMatch(ports []networkingv1.NetworkPolicyPort, dst *corev1.Pod, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if ruleProto := ptr.Deref(p.Protocol, corev1.ProtocolTCP); ruleProto != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		first := p.Port.IntVal
		if p.Port.Type == intstr.String {
			first = namedPort(dst, p.Port.StrVal)
			if first == 0 {
				continue
			}
		}
		last := first
		if p.EndPort != nil && p.Port.Type == intstr.Int {
			last = *p.EndPort
		}
		if port >= first && port <= last {
			return true
		}
	}
	return false
}

// namedPort is the TCP port a container of pod names name, 0 when none does.
func namedPort(pod *corev1.Pod, name string) int32 {
	if pod == nil {
		return 0
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
				return p.ContainerPort
			}
		}
	}
	return 0
}
