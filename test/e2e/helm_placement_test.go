//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

// testHelmPodTemplate: a KernelSpec's pod template places its kernels (the real scheduler
// decides by its node selector) and mounts what it names; a template no node matches fails
// the start at once with the scheduler's reason.
func testHelmPodTemplate(t *testing.T, env *helmEnv, api *jupyterAPI) {
	ctx := t.Context()
	var nodes corev1.NodeList
	if err := env.client.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	node := nodes.Items[0].Name
	data := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: "datasets"},
		Data:       map[string]string{"readme.txt": "shared by the admin"},
	}
	if err := env.client.Create(ctx, data); err != nil {
		t.Fatal(err)
	}
	// Not t.Context(): it is cancelled before cleanups run.
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), data) })

	spec := func(name string, selector map[string]string) *nbv1.KernelSpec {
		return &nbv1.KernelSpec{
			ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: name},
			Spec: nbv1.KernelSpecSpec{
				DisplayName: name, Language: "python",
				Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
				PodTemplate: &nbv1.PodTemplate{
					Labels:       map[string]string{"team": "e2e"},
					NodeSelector: selector,
					Volumes: []corev1.Volume{{Name: "datasets", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: data.Name}}}}},
					VolumeMounts: []nbv1.VolumeMount{{Name: "datasets", MountPath: "/home/jovyan/datasets", ReadOnly: true}},
				},
			},
		}
	}
	env.createListed(t, api, spec("placed", map[string]string{corev1.LabelHostname: node}), "api/kernelspecs/placed")
	var k struct {
		ID string `json:"id"`
	}
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "placed"}).want(t, http.StatusCreated).decode(t, &k)
	t.Cleanup(func() { api.call(t, http.MethodDelete, "api/kernels/"+k.ID, nil) })
	pod := &corev1.Pod{}
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: k.ID}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != node || pod.Labels["team"] != "e2e" {
		t.Errorf("kernel pod on node %q with labels %v: want node %s, the template's label", pod.Spec.NodeName, pod.Labels, node)
	}
	ws := dialJupyterWS(t, api, "api/kernels/"+k.ID+"/channels", "")
	e := runCell(t, ws, "print(open('/home/jovyan/datasets/readme.txt').read())")
	if got := strings.TrimSpace(e.Stdout.String()); got != "shared by the admin" {
		t.Errorf("the kernel reads %q from the template's volume", got)
	}

	env.createListed(t, api, spec("nowhere", map[string]string{"nbkube-e2e/pool": "gpu"}), "api/kernelspecs/nowhere")
	start := time.Now()
	r := api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "nowhere"})
	if r.status < 400 {
		t.Fatalf("a kernel no node can run started: HTTP %d %s", r.status, r.body)
	}
	if msg := r.jupyterError(t).Message; !strings.Contains(msg, "no node can run the kernel") || !strings.Contains(msg, "selector") {
		t.Errorf("the error does not give the scheduler's reason: %s", r.body)
	}
	took := time.Since(start)
	if took > 30*time.Second {
		t.Errorf("the refusal took %s", took)
	}
	t.Logf("a template no node matches: HTTP %d after %.1fs: %s", r.status, took.Seconds(), r.jupyterError(t).Message)
}

// testHelmImagePuller: the release's image puller runs on the node, and each of its init
// containers found its image there and ran the agent's check in it.
func testHelmImagePuller(t *testing.T, env *helmEnv) {
	var pods corev1.PodList
	if err := env.client.List(t.Context(), &pods, client.InNamespace(helmNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "image-puller"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("image puller pods: %d (%v), want one on the one node", len(pods.Items), err)
	}
	p := pods.Items[0]
	if !podReady(&p) {
		t.Errorf("the image puller's pod is not ready: %+v", p.Status)
	}
	pulled := 0
	for _, s := range p.Status.InitContainerStatuses {
		if term := s.State.Terminated; term == nil || term.ExitCode != 0 {
			t.Errorf("init container %s (%s): %+v, want exited 0", s.Name, s.Image, s.State)
		}
		if strings.HasPrefix(s.Name, "pull-") {
			pulled++
		}
	}
	if pulled == 0 {
		t.Error("the image puller pulls nothing")
	}
	t.Logf("image puller: %d images checked on node %s", pulled, p.Spec.NodeName)
}
