package builder

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/ipcluster"
)

// InternetExcepts are the ranges the chart's default kernelEgress keeps kernels and engines
// out of (charts/nbkube/values.yaml): private, link-local (cloud metadata), shared and loopback,
// where nodes, the control plane, nbkube's servers and other users' pods are.
var InternetExcepts = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"}

// ClusterNetworkPolicyName is the name of the NetworkPolicy of a cluster's ipcontroller.
func ClusterNetworkPolicyName(c *nbv1.Cluster) string { return c.Name + "-ipcontroller" }

// ClusterNetworkPolicy lets into a cluster's ipcontroller, on the ports engines and clients
// use, only the cluster's own engines and its owner's kernels: another user's kernel cannot
// reach the engines that run the owner's code. Other rules (the manager's hub queries) come
// from the chart's policy of every ipcontroller, which admits nothing else; policies add up.
func ClusterNetworkPolicy(c *nbv1.Cluster) *networkingv1.NetworkPolicy {
	controller := ClusterLabels(c, ComponentClusterController)
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(c, clusterGVK, ClusterNetworkPolicyName(c), ClusterLabels(c, ComponentClusterController)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: controller},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: ClusterLabels(c, ComponentClusterEngine)}},
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
						nbv1.LabelManagedBy: nbv1.ManagedByValue,
						nbv1.LabelComponent: ComponentKernel,
						nbv1.LabelOwner:     nbv1.OwnerLabelValue(c.Spec.Owner),
					}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(intstr.FromInt32(ipcluster.RegistrationPort)),
					EndPort:  ptr.To(ipcluster.ServicePorts()[len(ipcluster.ServicePorts())-1]),
				}},
			}},
		},
	}
}

// LocalNetworkPolicies are the chart's NetworkPolicies (charts/nbkube/templates/
// networkpolicy.yaml) for a local node that enforces them between its sandboxes, where the
// API server and the manager are not pods but processes of the node, which policies do not
// restrict: kernel and terminal agents, ipengines and the reStructuredText renderer take no
// connection from a pod, ipcontrollers and dask schedulers and workers only those their
// cluster's own policy admits (ClusterNetworkPolicy, DaskNetworkPolicy), and kernels,
// terminals, engines and dask workers connect to ipcontrollers and to dask schedulers and
// workers (whose own policies let in their cluster's pods and owner's kernels only) and, as the chart's default kernelEgress
// allows, to the internet but not to private, link-local, shared or loopback addresses (through
// the node's egress proxy, which resolves names itself: no DNS rule).
func LocalNetworkPolicies(namespace string) []*networkingv1.NetworkPolicy {
	policy := func(name string, types []networkingv1.PolicyType, selector metav1.LabelSelector) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: "nbkube-" + name, Namespace: namespace,
				Labels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue}},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: selector, PolicyTypes: types},
		}
	}
	component := func(c string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue, nbv1.LabelComponent: c}}
	}
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egress := policy("kernel-egress", []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, metav1.LabelSelector{
		MatchLabels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: nbv1.LabelComponent, Operator: metav1.LabelSelectorOpIn,
			Values: []string{ComponentKernel, ComponentClusterEngine, ComponentTerminal, ComponentDaskScheduler, ComponentDaskWorker}}},
	})
	controllers := component(ComponentClusterController)
	dask := metav1.LabelSelector{
		MatchLabels: map[string]string{nbv1.LabelManagedBy: nbv1.ManagedByValue},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: nbv1.LabelComponent, Operator: metav1.LabelSelectorOpIn,
			Values: []string{ComponentDaskScheduler, ComponentDaskWorker}}},
	}
	egress.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{{PodSelector: &controllers}},
		Ports: []networkingv1.NetworkPolicyPort{{
			Protocol: ptr.To(corev1.ProtocolTCP),
			Port:     ptr.To(intstr.FromInt32(ipcluster.RegistrationPort)),
			EndPort:  ptr.To(ipcluster.ServicePorts()[len(ipcluster.ServicePorts())-1]),
		}},
	}, {
		To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &dask}},
		Ports: daskPorts(),
	}, {
		To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: InternetExcepts}}},
	}}
	return []*networkingv1.NetworkPolicy{
		policy("kernels", ingress, component(ComponentKernel)),
		policy("terminals", ingress, component(ComponentTerminal)),
		policy("rst-renderer", []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, component(ComponentRSTRenderer)),
		policy("ipcontrollers", ingress, controllers),
		policy("ipengines", ingress, component(ComponentClusterEngine)),
		policy("dask-schedulers", ingress, component(ComponentDaskScheduler)),
		policy("dask-workers", ingress, component(ComponentDaskWorker)),
		egress,
	}
}
