package localnode

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

func policyPod(ns, ip string, lbl map[string]string, ports ...corev1.ContainerPort) endpointPod {
	return endpointPod{ip: ip, pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: lbl},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}},
	}}
}

func TestPolicyView_DecidesAsANetworkThatEnforcesNetworkPolicy(t *testing.T) {
	ns := map[string]labels.Set{"a": {"team": "blue"}, "b": {"team": "red"}}
	web := policyPod("a", "127.0.0.2", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 8080})
	client := policyPod("a", "127.0.0.3", map[string]string{"app": "client"})
	stranger := policyPod("b", "127.0.0.4", map[string]string{"app": "client"})
	ingress := func(rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Ingress: rules}}
	}
	fromClients := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}
	blueClients := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}},
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}
	anyNamespace := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}
	block := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "127.0.0.0/24", Except: []string{"127.0.0.4/32"}}}
	named := []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}}
	ranged := []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To[int32](8100)}}
	udp := []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(8080))}}

	for _, tc := range []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		src      endpointPod
		port     int32
		want     bool
	}{
		{name: "no policy", src: stranger, port: 8080, want: true},
		{name: "selected, no rule", policies: []*networkingv1.NetworkPolicy{ingress()}, src: client, port: 8080, want: false},
		{name: "rule without peers or ports", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{})}, src: stranger, port: 1, want: true},
		{name: "pod selector, same namespace", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{fromClients}})}, src: client, port: 8080, want: true},
		{name: "pod selector is the policy's namespace only", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{fromClients}})}, src: stranger, port: 8080, want: false},
		{name: "namespace and pod selector", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{blueClients}})}, src: stranger, port: 8080, want: false},
		{name: "any namespace", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{anyNamespace}})}, src: stranger, port: 8080, want: true},
		{name: "ip block", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{block}})}, src: client, port: 8080, want: true},
		{name: "ip block's exception", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{block}})}, src: stranger, port: 8080, want: false},
		{name: "named port", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{Ports: named})}, src: client, port: 8080, want: true},
		{name: "another port than the named one", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{Ports: named})}, src: client, port: 9090, want: false},
		{name: "port range", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{Ports: ranged})}, src: client, port: 8080, want: true},
		{name: "UDP only", policies: []*networkingv1.NetworkPolicy{ingress(networkingv1.NetworkPolicyIngressRule{Ports: udp})}, src: client, port: 8080, want: false},
		{name: "policies add up", policies: []*networkingv1.NetworkPolicy{ingress(), ingress(networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{fromClients}})}, src: client, port: 8080, want: true},
		{name: "egress of the source, denying", policies: []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}}, src: client, port: 8080, want: false},
		{name: "egress of the source, to the pod", policies: []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}}}, src: client, port: 8080, want: true},
	} {
		v := policyView{policies: tc.policies, namespaces: ns}
		if got := v.allows(tc.src, web, tc.port); got != tc.want {
			t.Errorf("%s: allows %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The policies of nbkube local: a kernel reaches its owner's ipcontroller, and no other pod; a
// terminal reaches no pod, and the internet as kernels do.
func TestLocalNetworkPolicies_LetKernelsReachTheirOwnersClustersOnly(t *testing.T) {
	owned := func(component, owner string, extra map[string]string) map[string]string {
		l := map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: component, nbv1.LabelOwner: nbv1.OwnerLabelValue(nbv1.Owner(owner))}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	annCluster := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "default"}, Spec: nbv1.ClusterParameters{Owner: "ann"}}
	policies := append(builder.LocalNetworkPolicies("default"), builder.ClusterNetworkPolicy(annCluster))
	for _, p := range policies {
		p.Namespace = "default"
	}
	v := policyView{policies: policies, namespaces: map[string]labels.Set{"default": {"kubernetes.io/metadata.name": "default"}}}
	annKernel := policyPod("default", "127.0.0.2", owned(builder.ComponentKernel, "ann", nil))
	benKernel := policyPod("default", "127.0.0.3", owned(builder.ComponentKernel, "ben", nil))
	controller := policyPod("default", "127.0.0.4", builder.ClusterLabels(annCluster, builder.ComponentClusterController))
	engine := policyPod("default", "127.0.0.5", builder.ClusterLabels(annCluster, builder.ComponentClusterEngine))
	// A terminal's labels as its builder makes them.
	annTerminal := policyPod("default", "127.0.0.7", builder.TerminalPod(&nbv1.Terminal{
		ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "default"}, Spec: nbv1.TerminalParameters{Owner: "ann", KernelSpec: "python3"},
	}, &nbv1.KernelSpec{}, builder.DefaultOptions()).Labels)
	for _, tc := range []struct {
		name     string
		src, dst endpointPod
		port     int32
		want     bool
	}{
		{"ann's kernel to her ipcontroller", annKernel, controller, 10101, true},
		{"ann's engine to her ipcontroller", engine, controller, 10110, true},
		{"ben's kernel to ann's ipcontroller", benKernel, controller, 10101, false},
		{"ann's kernel past the cluster's ports", annKernel, controller, 10116, false},
		{"ben's kernel to ann's agent", benKernel, annKernel, 8777, false},
		{"ann's engine to her kernel's agent", engine, annKernel, 8777, false},
		{"ann's kernel to her engine", annKernel, engine, 10101, false},
		{"ben's kernel to ann's terminal's agent", benKernel, annTerminal, 8777, false},
		{"ann's terminal to ben's kernel's agent", annTerminal, benKernel, 8777, false},
		{"ann's kernel to her terminal's agent", annKernel, annTerminal, 8777, false},
		// Only kernels and engines are let into an ipcontroller (ClusterNetworkPolicy).
		{"ann's terminal to her ipcontroller", annTerminal, controller, 10101, false},
	} {
		if got := v.allows(tc.src, tc.dst, tc.port); got != tc.want {
			t.Errorf("%s: allows %v, want %v", tc.name, got, tc.want)
		}
	}
	// Out of the pod network, through the node's egress proxy: the chart's default kernelEgress.
	renderer := policyPod("default", "127.0.0.6", map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: builder.ComponentRSTRenderer})
	for _, tc := range []struct {
		name string
		src  endpointPod
		ip   string
		want bool
	}{
		{"a kernel to a public address", annKernel, "151.101.0.223", true},
		{"an engine to a public address", engine, "151.101.0.223", true},
		{"a terminal to a public address", annTerminal, "151.101.0.223", true},
		{"a terminal to a private address", annTerminal, "10.1.2.3", false},
		{"a terminal to the cloud's metadata", annTerminal, "169.254.169.254", false},
		{"a kernel to a private address", annKernel, "10.1.2.3", false},
		{"a kernel to the cloud's metadata", annKernel, "169.254.169.254", false},
		{"a kernel to the node's loopback", annKernel, "127.0.0.1", false},
		{"the renderer to a public address", renderer, "151.101.0.223", false},
		{"an ipcontroller (no egress policy) to a private address", controller, "10.1.2.3", true},
	} {
		if got := v.allowsOut(tc.src, netip.MustParseAddr(tc.ip), corev1.ProtocolTCP, 443); got != tc.want {
			t.Errorf("%s: allowsOut %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Ports of a rule are of a protocol (TCP when it names none), as Kubernetes reads them; a
// rule without ports allows every port of every protocol.
func TestPortsMatch_ReadsTheProtocol(t *testing.T) {
	udp, tcp, sctp := corev1.ProtocolUDP, corev1.ProtocolTCP, corev1.ProtocolSCTP
	p53 := intstr.FromInt32(53)
	for _, tc := range []struct {
		name  string
		ports []networkingv1.NetworkPolicyPort
		proto corev1.Protocol
		port  int32
		want  bool
	}{
		{"no ports, UDP", nil, udp, 53, true},
		{"no ports, TCP", nil, tcp, 53, true},
		{"UDP 53 for UDP 53", []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &p53}}, udp, 53, true},
		{"UDP 53 for TCP 53", []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &p53}}, tcp, 53, false},
		{"no protocol (TCP) 53 for UDP 53", []networkingv1.NetworkPolicyPort{{Port: &p53}}, udp, 53, false},
		{"no protocol (TCP) 53 for TCP 53", []networkingv1.NetworkPolicyPort{{Port: &p53}}, tcp, 53, true},
		{"SCTP, any port, for UDP", []networkingv1.NetworkPolicyPort{{Protocol: &sctp}}, udp, 9, false},
		{"UDP, any port, for UDP", []networkingv1.NetworkPolicyPort{{Protocol: &udp}}, udp, 9, true},
	} {
		if got := portsMatch(tc.ports, nil, tc.proto, tc.port); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
