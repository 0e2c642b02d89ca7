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
