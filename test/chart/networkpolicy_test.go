package chart_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
)

func networkPolicies(t *testing.T, objs []*unstructured.Unstructured) map[string]*networkingv1.NetworkPolicy {
	t.Helper()
	out := map[string]*networkingv1.NetworkPolicy{}
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtimeFromUnstructured(o, &np); err != nil {
			t.Fatal(err)
		}
		out[np.Name] = &np
	}
	return out
}

func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "nb-nbkube-manager" {
			var d appsv1.Deployment
			if err := runtimeFromUnstructured(o, &d); err != nil {
				t.Fatal(err)
			}
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatal("no manager Deployment")
	return nil
}

func selects(t *testing.T, sel *metav1.LabelSelector, pod *corev1.Pod) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(pod.Labels))
}

// TestChart_KernelsAndEnginesReachOnlyDNSTheirClusterAndTheAllowedNet: the egress policy
// selects the pods the builders make for kernels, terminals and engines (and not the ipcontroller or
// nbkube's servers); it lets them reach the cluster DNS, the ipcontrollers' ports (each
// cluster's own policy, made by the manager, then admits only its engines and its owner's
// kernels) and, by default, no private, link-local or shared address: not the cloud's
// metadata server, the nodes or the kube-apiserver. The ipcontrollers' chart policy admits only
// the manager; the manager is told to make the clusters' policies.
func TestChart_KernelsAndEnginesReachOnlyDNSTheirClusterAndTheAllowedNet(t *testing.T) {
	objs := render(t, "nb")
	nps := networkPolicies(t, objs)
	egress := nps["nb-nbkube-kernel-egress"]
	if egress == nil {
		t.Fatalf("no kernel egress policy among %v", slices.Collect(mapKeys(nps)))
	}
	o := builder.DefaultOptions()
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "nb", UID: "u"}, Spec: nbv1.ClusterParameters{Owner: "ann", Engines: 1}}
	dask := c.DeepCopy()
	dask.Spec.Framework = nbv1.FrameworkDask
	k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: "nb", UID: "u"}, Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3"}}
	spec := &nbv1.KernelSpec{Spec: nbv1.KernelSpecSpec{Argv: []string{"python3"}}}
	term := &nbv1.Terminal{ObjectMeta: metav1.ObjectMeta{Name: "t1", Namespace: "nb", UID: "u"}, Spec: nbv1.TerminalParameters{Owner: "ann", KernelSpec: "python3"}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"kernel":       {builder.KernelPod(k, spec, o), true},
		"engine":       {builder.ClusterEnginePod(c, o, "e"), true},
		"terminal":     {builder.TerminalPod(term, spec, o), true},
		"ipcontroller": {builder.ClusterControllerPod(c, o), false},
		// A dask scheduler runs what a client sends it (run_on_scheduler), its workers the
		// tasks: both run users' code.
		"dask scheduler": {builder.DaskSchedulerPod(dask, o), true},
		"dask worker":    {builder.DaskWorkerPod(dask, o, &corev1.Pod{}), true},
	} {
		if got := selects(t, &egress.Spec.PodSelector, tc.pod); got != tc.want {
			t.Errorf("the egress policy selects the %s pod: %v, want %v", name, got, tc.want)
		}
	}
	if !slices.Equal(egress.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) || len(egress.Spec.Egress) != 4 {
		t.Fatalf("egress rules %+v", egress.Spec)
	}
	dns, ipc, daskRule, net := egress.Spec.Egress[0], egress.Spec.Egress[1], egress.Spec.Egress[2], egress.Spec.Egress[3]
	for _, p := range []*corev1.Pod{builder.DaskSchedulerPod(dask, o), builder.DaskWorkerPod(dask, o, &corev1.Pod{})} {
		if !selects(t, daskRule.To[0].PodSelector, p) {
			t.Errorf("the dask rule does not reach %s: %+v", p.GenerateName, daskRule)
		}
	}
	if len(daskRule.Ports) != 2 || daskRule.Ports[0].Port.IntValue() != 8786 || daskRule.Ports[1].Port.IntValue() != 8788 {
		t.Errorf("dask rule ports %+v", daskRule.Ports)
	}
	// The schedulers' chart policy admits the API server (dashboards) and the manager on 8787
	// only; the rest comes from each cluster's own policy.
	schedulers := nps["nb-nbkube-dask-schedulers"]
	if schedulers == nil || !selects(t, &schedulers.Spec.PodSelector, builder.DaskSchedulerPod(dask, o)) ||
		len(schedulers.Spec.Ingress) != 1 || len(schedulers.Spec.Ingress[0].From) != 2 ||
		len(schedulers.Spec.Ingress[0].Ports) != 1 || schedulers.Spec.Ingress[0].Ports[0].Port.IntValue() != 8787 {
		t.Errorf("dask schedulers' policy %+v", schedulers)
	}
	if workers := nps["nb-nbkube-dask-workers"]; workers == nil || !selects(t, &workers.Spec.PodSelector, builder.DaskWorkerPod(dask, o, &corev1.Pod{})) || len(workers.Spec.Ingress) != 0 {
		t.Errorf("dask workers' policy %+v", workers)
	}
	if dns.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" || len(dns.Ports) != 2 || dns.Ports[0].Port.IntValue() != 53 {
		t.Errorf("DNS rule %+v", dns)
	}
	if !selects(t, ipc.To[0].PodSelector, builder.ClusterControllerPod(c, o)) || ipc.Ports[0].Port.IntValue() != 10101 || *ipc.Ports[0].EndPort != 10115 {
		t.Errorf("ipcontroller rule %+v", ipc)
	}
	block := net.To[0].IPBlock
	if block == nil || block.CIDR != "0.0.0.0/0" {
		t.Fatalf("default egress %+v", net)
	}
	for _, closed := range []string{"169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"} {
		if !slices.Contains(block.Except, closed) {
			t.Errorf("the default egress does not close %s: %v", closed, block.Except)
		}
	}
	// Terminal agents, as kernel agents, take connections from nbkube's servers only.
	for name, pod := range map[string]*corev1.Pod{"kernels": builder.KernelPod(k, spec, o), "terminals": builder.TerminalPod(term, spec, o)} {
		np := nps["nb-nbkube-"+name]
		if np == nil || !selects(t, &np.Spec.PodSelector, pod) || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8777 {
			t.Errorf("the %s' ingress policy %+v", name, np)
			continue
		}
		for i, from := range []string{"apiserver", "manager"} {
			if got := np.Spec.Ingress[0].From[i].PodSelector.MatchLabels["app.kubernetes.io/component"]; got != from {
				t.Errorf("the %s' ingress policy admits %s, want %s", name, got, from)
			}
		}
	}
	ipcs := nps["nb-nbkube-ipcontrollers"]
	if ipcs == nil || len(ipcs.Spec.Ingress) != 1 || ipcs.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "manager" {
		t.Errorf("the ipcontrollers' chart policy admits more than the manager: %+v", ipcs)
	}
	if !slices.Contains(managerArgs(t, objs), "--cluster-network-policies=true") {
		t.Error("the manager is not told to make the clusters' policies")
	}

	// An admin's own egress rules replace the default; without policies, the manager makes none.
	objs = render(t, "nb", "networkPolicy.kernelEgress[0].to[0].ipBlock.cidr=203.0.113.0/24")
	if got := networkPolicies(t, objs)["nb-nbkube-kernel-egress"].Spec.Egress[3].To[0].IPBlock.CIDR; got != "203.0.113.0/24" {
		t.Errorf("kernelEgress override: %s", got)
	}
	objs = render(t, "nb", "networkPolicy.enabled=false")
	if n := len(networkPolicies(t, objs)); n != 0 || !slices.Contains(managerArgs(t, objs), "--cluster-network-policies=false") {
		t.Errorf("networkPolicy.enabled=false: %d policies, manager args %v", n, managerArgs(t, objs))
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
