package builder

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func TestDaskPods_TLSPortsAndTheSchedulersAddress(t *testing.T) {
	c := testCluster(2)
	c.Spec.Framework = nbv1.FrameworkDask
	o := DefaultOptions()
	o.DaskDashboardBase = "/hub/"
	sched := DaskSchedulerPod(c, o)
	args := sched.Spec.Containers[0].Command
	for _, want := range []string{"dask-scheduler", "--protocol=tls", "--host=$(POD_IP)", "--port=8786",
		"--dashboard-address=$(POD_IP):8787", "--dashboard-prefix=/hub/dask/" + c.Name, "--tls-ca-file=" + ClusterSecretDir + "/ca.crt"} {
		if !slices.Contains(args, want) {
			t.Errorf("scheduler command %v lacks %s", args, want)
		}
	}
	if sched.Labels[nbv1.LabelComponent] != ComponentDaskScheduler || sched.Labels[nbv1.LabelOwner] == "" ||
		!strings.HasPrefix(sched.GenerateName, c.Name+"-dask-scheduler-") || sched.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("scheduler pod %+v", sched.ObjectMeta)
	}

	// Under the local node (by pod IP), the worker's scheduler is its scheduler pod's address;
	// in a cluster, the Service's.
	scheduler := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "s-uid"}, Status: corev1.PodStatus{PodIP: "10.1.2.3"}}
	o.ClusterControllerByPodIP = true
	w := DaskWorkerPod(c, o, scheduler)
	wc := w.Spec.Containers[0]
	if wc.Command[1] != "tls://10.1.2.3:8786" || w.Annotations[AnnotationControllerPod] != "s-uid" ||
		!slices.Contains(wc.Command, "--name=$(POD_NAME)") || !slices.Contains(wc.Command, "--worker-port=8788") {
		t.Errorf("worker %v annotations %v", wc.Command, w.Annotations)
	}
	if len(wc.Ports) != 1 || wc.Ports[0].ContainerPort != 8788 {
		t.Errorf("worker ports %v: the node must know to carry 8788", wc.Ports)
	}
	o.ClusterControllerByPodIP = false
	if got := DaskWorkerPod(c, o, scheduler).Spec.Containers[0].Command[1]; got != "tls://"+c.Name+"-dask-scheduler."+c.Namespace+".svc:8786" {
		t.Errorf("worker's scheduler in a cluster: %s", got)
	}
	for _, p := range []*corev1.Pod{sched, w} {
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] != "True" {
			t.Errorf("%s does not require TLS: %v", p.GenerateName, env)
		}
		if vs := p.Spec.Volumes; !slices.ContainsFunc(vs, func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == c.Name+"-ipcluster" && len(v.Secret.Items) == 3
		}) || slices.ContainsFunc(vs, func(v corev1.Volume) bool { return v.Name == "profile" }) {
			t.Errorf("%s volumes %v: want the TLS files and no IPython profile", p.GenerateName, vs)
		}
	}
	if routes := envValue(sched, "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES"); !strings.Contains(routes, "distributed.http.scheduler.api") || strings.Contains(routes, "proxy") {
		t.Errorf("scheduler's HTTP routes %q: want the API, not the proxy", routes)
	}
}

func envValue(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
