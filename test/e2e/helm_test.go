//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// The real-cluster suite: `make test-e2e` brings up a single-node cluster (hack/cluster.sh),
// imports the images and runs this with the environment below.
const (
	helmNamespace    = "nbkube-e2e"
	helmRelease      = "nb"
	contentsClass    = "nbkube-e2e-contents"
	clusterStartWait = 3 * time.Minute
)

// helmEnv is what make test-e2e passes in.
type helmEnv struct {
	helm, image, kernelImage, contentsDir string
	client                                client.Client
}

func newHelmEnv(t *testing.T) *helmEnv {
	t.Helper()
	e := &helmEnv{
		helm: os.Getenv("NBKUBE_HELM"), image: os.Getenv("NBKUBE_IMAGE"),
		kernelImage: os.Getenv("NBKUBE_KERNEL_IMAGE"), contentsDir: os.Getenv("NBKUBE_E2E_CONTENTS_DIR"),
	}
	if e.helm == "" || e.image == "" || e.kernelImage == "" || e.contentsDir == "" || os.Getenv("KUBECONFIG") == "" {
		t.Fatal("run with make test-e2e: it sets KUBECONFIG, NBKUBE_HELM, NBKUBE_IMAGE, NBKUBE_KERNEL_IMAGE and NBKUBE_E2E_CONTENTS_DIR")
	}
	e.client = kubeClient(t, os.Getenv("KUBECONFIG"))
	return e
}

// createListed creates obj as an admin would with kubectl and waits until the API server's
// cache has it, so that route answers.
func (e *helmEnv) createListed(t *testing.T, api *jupyterAPI, obj client.Object, route string) {
	t.Helper()
	if err := e.client.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the API server lists "+route, 30*time.Second, func() error {
		if r := api.call(t, http.MethodGet, route, nil); r.status != http.StatusOK {
			return fmt.Errorf("HTTP %d", r.status)
		}
		return nil
	})
}

func (e *helmEnv) run(t *testing.T, name string, args ...string) {
	t.Helper()
	start := time.Now()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s: %.1fs", filepath.Base(name), args[0], time.Since(start).Seconds())
}

// splitImage turns repo:tag into the chart's two values.
func splitImage(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	return ref[:i], ref[i+1:]
}

func (e *helmEnv) helmArgs(verb string, extra ...string) []string {
	return e.helmArgsOf(helmRelease, helmNamespace, verb, extra...)
}

// helmArgsOf are the arguments of helm verb for the release in namespace, with this run's
// images and contents class.
func (e *helmEnv) helmArgsOf(release, namespace, verb string, extra ...string) []string {
	repo, tag := splitImage(e.image)
	krepo, ktag := splitImage(e.kernelImage)
	args := []string{verb, release, "../../charts/nbkube", "--namespace", namespace, "--wait", "--timeout", "5m",
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "kernelImage.repository=" + krepo, "--set", "kernelImage.tag=" + ktag,
		"--set", "contents.storageClass=" + contentsClass, "--set", "contents.size=1Gi"}
	return append(args, extra...)
}

// TestHelm_InARealCluster installs the chart into a real single-node cluster and uses it as a
// data scientist and an admin would, in order: contents on the volume, a session with a
// kernel container, interrupt, restart, the Jupyter client suite, the network policies
// enforced, the API server killed during a cell, a kernel whose image does not exist, a
// kernel pod killed, an ipyparallel cluster, upgrade, uninstall.
func TestHelm_InARealCluster(t *testing.T) {
	env := newHelmEnv(t)
	ctx := t.Context()
	c := env.client

	env.contentsVolume(t, contentsClass, env.contentsDir)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: helmNamespace}}); err != nil {
		t.Fatal(err)
	}

	env.run(t, env.helm, env.helmArgs("install", "--create-namespace")...)
	api := env.api(t)

	t.Run("contents on the volume", func(t *testing.T) { testHelmContents(t, env, api) })
	t.Run("reStructuredText in a renderer pod", func(t *testing.T) { testHelmRST(t, env, api) })
	var kernelID string
	t.Run("session with a kernel container", func(t *testing.T) { kernelID = testHelmSession(t, env, api) })
	if t.Failed() {
		t.FailNow()
	}
	t.Run("terminal in a pod", func(t *testing.T) { testHelmTerminal(t, env, api) })
	// The Jupyter client suite TestKernels_ThroughLocal runs against nbkube local, here
	// through the release's Service (either API server replica answers).
	t.Run("Jupyter client suite", func(t *testing.T) { jupyterClientSuite(t, env) })
	t.Run("network policies enforced", func(t *testing.T) { testHelmNetworkPolicies(t, env, kernelID) })
	t.Run("API server killed during a cell", func(t *testing.T) { testHelmAPIServerKilled(t, env, api, kernelID) })
	t.Run("image that does not exist", func(t *testing.T) { testHelmMissingImage(t, env, api) })
	t.Run("kernel spec's pod template", func(t *testing.T) { testHelmPodTemplate(t, env, api) })
	t.Run("image puller", func(t *testing.T) { testHelmImagePuller(t, env) })
	t.Run("kernel pod killed", func(t *testing.T) { testHelmKernelPodKilled(t, env, api, kernelID) })
	t.Run("manager killed while kernels start", func(t *testing.T) { testHelmManagerKilled(t, env, api) })
	t.Run("ipyparallel cluster", func(t *testing.T) { testHelmCluster(t, env, api) })
	t.Run("dask cluster", func(t *testing.T) { testHelmDask(t, env, api) })
	t.Run("quotas under concurrent starts through both replicas", func(t *testing.T) { testHelmQuotas(t, env, api) })
	t.Run("upgrade keeps kernels and token", func(t *testing.T) { testHelmUpgrade(t, env, api, kernelID) })
	t.Run("uninstall leaves nothing", func(t *testing.T) { testHelmUninstall(t, env) })
}

// contentsVolume makes the volume of a release's notebooks, of storage class class, in dir:
// a hostPath PersistentVolume (this cluster has no provisioner), owned by the kernels' user
// as a real storage class would make it.
func (e *helmEnv) contentsVolume(t *testing.T, class, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 1000, 100); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if err := e.client.Create(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Delete(context.Background(), pv) })
}

// api reaches the installed API server through its Service's cluster IP (kube-proxy routes
// it from the node too), with the token from the Secret the chart made.
func (e *helmEnv) api(t testing.TB) *jupyterAPI {
	t.Helper()
	api := newJupyterAPI(e.serviceURL(t, helmRelease, helmNamespace), e.token(t), 5*time.Minute)
	waitAPI(t, api)
	return api
}

// token is the API's token, from the Secret the chart made.
func (e *helmEnv) token(t testing.TB) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := e.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-nbkube-auth"}, secret); err != nil {
		t.Fatal(err)
	}
	return string(secret.Data["token"])
}

// serviceURL is the base URL of the release's API server Service.
func (e *helmEnv) serviceURL(t testing.TB, release, namespace string) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := e.client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: release + "-nbkube"}, svc); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// waitAPIServers waits until exactly n API server pods exist, none of them in old, all ready:
// a replica on its way out still serves for a moment (its preStop sleep).
func (e *helmEnv) waitAPIServers(t *testing.T, n int, old map[types.UID]bool) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d new API server pods", n), 2*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := e.client.List(t.Context(), pods, client.InNamespace(helmNamespace), client.MatchingLabels{"app.kubernetes.io/component": "apiserver"}); err != nil {
			return err
		}
		ready := 0
		for _, p := range pods.Items {
			if old[p.UID] {
				return fmt.Errorf("pod %s is still there", p.Name)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if len(pods.Items) != n || ready != n {
			return fmt.Errorf("%d API server pods, %d ready", len(pods.Items), ready)
		}
		return nil
	})
}

// waitAPI waits until the Service answers GET /api/status with the token. Connections kept
// alive to replicas that are gone are dropped first: a browser would retry on a new one too.
func waitAPI(t testing.TB, api *jupyterAPI) {
	t.Helper()
	api.hc.CloseIdleConnections()
	testenv.Eventually(t, "the API server answers through its Service", 2*time.Minute, func() error { return api.answers(t) })
}

func testHelmContents(t *testing.T, env *helmEnv, api *jupyterAPI) {
	api.call(t, http.MethodPut, "api/contents/e2e", map[string]string{"type": "directory"}).want(t, http.StatusCreated)
	api.call(t, http.MethodPut, "api/contents/e2e/hello.txt", map[string]string{
		"type": "file", "format": "text", "content": "written through the API\n",
	}).want(t, http.StatusCreated)
	var model struct {
		Content string `json:"content"`
		Path    string `json:"path"`
	}
	api.call(t, http.MethodGet, "api/contents/e2e/hello.txt", nil).want(t, http.StatusOK).decode(t, &model)
	if model.Content != "written through the API\n" || model.Path != "e2e/hello.txt" {
		t.Errorf("read back %+v", model)
	}
	// The file is on the volume, written by the API server's user (the kernels' too).
	st, err := os.Stat(filepath.Join(env.contentsDir, "e2e", "hello.txt"))
	if err != nil {
		t.Fatalf("the file is not on the volume: %v", err)
	}
	if uid := fileOwner(st); uid != 1000 {
		t.Errorf("file owned by uid %d, want the kernels' 1000", uid)
	}
}

// testHelmSession starts a notebook's session: a kernel container in its own pod, working in
// the notebook's directory on the shared volume. It returns the kernel's id.
func testHelmSession(t *testing.T, env *helmEnv, api *jupyterAPI) string {
	start := time.Now()
	var s sessionModel
	api.call(t, http.MethodPost, "api/sessions", map[string]any{
		"path": "e2e/analysis.ipynb", "type": "notebook", "name": "analysis.ipynb", "kernel": map[string]string{"name": "python3"},
	}).want(t, http.StatusCreated).decode(t, &s)
	t.Logf("session with a new kernel: %.1fs", time.Since(start).Seconds())
	if s.Kernel == nil {
		t.Fatalf("session %+v has no kernel", s)
	}
	pod := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: s.Kernel.ID}, pod); err != nil {
		t.Fatalf("the kernel's pod: %v", err)
	}
	if img := pod.Spec.Containers[0].Image; img != env.kernelImage {
		t.Errorf("kernel container image %s, want %s", img, env.kernelImage)
	}

	ws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", "")
	e := runCell(t, ws, "import os\nprint(os.getcwd(), os.getuid(), open('hello.txt').read().strip())")
	if got, want := strings.TrimSpace(e.Stdout.String()), "/home/jovyan/work/e2e 1000 written through the API"; got != want {
		t.Errorf("the kernel sees %q, want %q", got, want)
	}
	runCell(t, ws, "open('from-kernel.txt', 'w').write('kernel output')")
	var model struct {
		Content string `json:"content"`
	}
	api.call(t, http.MethodGet, "api/contents/e2e/from-kernel.txt", nil).want(t, http.StatusOK).decode(t, &model)
	if model.Content != "kernel output" {
		t.Errorf("a file the kernel wrote reads %q through the API", model.Content)
	}

	// Interrupt a sleeping cell.
	sleeping := jpclient.NewExecution(ws.execute("import time; time.sleep(120)"))
	time.Sleep(time.Second)
	api.call(t, http.MethodPost, "api/kernels/"+s.Kernel.ID+"/interrupt", nil).want(t, http.StatusNoContent)
	ws.await(sleeping, 30*time.Second, "the interrupted cell", (*jpclient.Execution).Finished)
	if sleeping.ErrorName() != "KeyboardInterrupt" {
		t.Errorf("interrupted cell: %s", sleeping)
	}

	// Restart: same kernel, same pod, a new process that forgot the old one's variables.
	runCell(t, ws, "x = 41")
	api.call(t, http.MethodPost, "api/kernels/"+s.Kernel.ID+"/restart", nil).want(t, http.StatusOK)
	after := runCell(t, ws, "print('x' in globals())")
	if got := strings.TrimSpace(after.Stdout.String()); got != "False" {
		t.Errorf("after a restart the kernel still has x: %q", got)
	}
	again := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKeyFromObject(pod), again); err != nil || again.UID != pod.UID {
		t.Errorf("restart replaced the pod (%v)", err)
	}
	return s.Kernel.ID
}

// testHelmAPIServerKilled kills every API server process with SIGKILL in the middle of a cell
// (the node is this machine): the cell's outputs are written into its notebook on the volume
// meanwhile, and a client that reconnects through the Service with its session id, once the
// containers have restarted, gets all of the output it missed, none twice.
func testHelmAPIServerKilled(t *testing.T, env *helmEnv, api *jupyterAPI, kernelID string) {
	sessionID := "e2e-" + randomID()
	// The cell is one of the session's notebook, run as JupyterLab runs it: with every API
	// server gone, the kernel's agent writes its outputs into the notebook on the volume.
	code := "import time\nfor i in range(8):\n    print(i, flush=True)\n    time.sleep(1)"
	api.call(t, http.MethodPut, "api/contents/e2e/analysis.ipynb", map[string]any{"type": "notebook", "format": "json",
		"content": map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{}, "cells": []any{
			map[string]any{"cell_type": "code", "id": "killed", "metadata": map[string]any{}, "execution_count": nil, "outputs": []any{}, "source": code},
		}}}).want(t, http.StatusCreated)
	ws := dialJupyterWS(t, api, "api/kernels/"+kernelID+"/channels", sessionID)
	id, err := ws.SendCell("killed", code)
	if err != nil {
		t.Fatal(err)
	}
	first := jpclient.NewExecution(id)
	ws.await(first, cellTimeout, "the first output", func(e *jpclient.Execution) bool { return e.Stdout.Len() > 0 })
	msgID := first.MsgID

	pods := &corev1.PodList{}
	if err := env.client.List(t.Context(), pods, client.InNamespace(helmNamespace), client.MatchingLabels{"app.kubernetes.io/component": "apiserver"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d API server pods, want 2", len(pods.Items))
	}
	before := map[types.UID]int32{}
	for i := range pods.Items {
		p := &pods.Items[i]
		before[p.UID] = restarts(p)
		if err := syscall.Kill(containerProcess(t, p.UID, "apiserver"), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	ws.drain(nil, 30*time.Second)
	testHelmOutputsWrittenWithoutAPIServers(t, env, "e2e/analysis.ipynb", "killed")
	testenv.Eventually(t, "both API servers restarted, ready", 2*time.Minute, func() error {
		var now corev1.PodList
		if err := env.client.List(t.Context(), &now, client.InNamespace(helmNamespace), client.MatchingLabels{"app.kubernetes.io/component": "apiserver"}); err != nil {
			return err
		}
		for i := range now.Items {
			p := &now.Items[i]
			if n, ok := before[p.UID]; !ok || restarts(p) <= n || !podReady(p) {
				return fmt.Errorf("pod %s: %d restarts, ready %v", p.Name, restarts(p), podReady(p))
			}
		}
		return nil
	})
	waitAPI(t, api)
	t.Logf("API answers again %.1fs after its pods were killed", time.Since(killed).Seconds())

	back := dialJupyterWS(t, api, "api/kernels/"+kernelID+"/channels", sessionID)
	e := jpclient.NewExecution(msgID)
	back.await(e, cellTimeout, "the replayed cell", (*jpclient.Execution).Finished)
	if e.Status() != "ok" || !strings.HasSuffix(e.Stdout.String(), "5\n6\n7\n") {
		t.Errorf("after the reconnect: %s, want the rest of 0..7 and an ok reply", e)
	}
	if e.Stdout.String() != "0\n1\n2\n3\n4\n5\n6\n7\n" && !strings.HasPrefix("0\n1\n2\n3\n4\n5\n6\n7\n", first.Stdout.String()) {
		t.Errorf("before %q, after %q: output lost or repeated", first.Stdout.String(), e.Stdout.String())
	}
	t.Logf("figure: API server killed during a cell: %d lines before the kill, %d after the reconnect (replayed and new), of 8; the reply came %.1fs after the kill",
		strings.Count(first.Stdout.String(), "\n"), strings.Count(e.Stdout.String(), "\n"), time.Since(killed).Seconds())
}

// testHelmOutputsWrittenWithoutAPIServers reads the notebook on the volume (not through the API,
// whose servers are coming back) until the cell of id has all of its run: 0..7 and its
// execution count, written within a second of the kernel's last message.
func testHelmOutputsWrittenWithoutAPIServers(t *testing.T, env *helmEnv, nbPath, id string) {
	t.Helper()
	p := filepath.Join(env.contentsDir, nbPath)
	var cell struct {
		ID             string `json:"id"`
		ExecutionCount *int   `json:"execution_count"`
		Outputs        []struct {
			Text []string `json:"text"`
		} `json:"outputs"`
		Metadata struct {
			Execution map[string]string `json:"execution"`
		} `json:"metadata"`
	}
	var mtime time.Time
	testenv.Eventually(t, "the cell's outputs in the notebook on the volume", 2*time.Minute, func() error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var nb struct {
			Cells []json.RawMessage `json:"cells"`
		}
		if err := json.Unmarshal(data, &nb); err != nil {
			return fmt.Errorf("notebook %s: %w", data, err)
		}
		if len(nb.Cells) != 1 {
			return fmt.Errorf("notebook %s: want one cell", data)
		}
		if err := json.Unmarshal(nb.Cells[0], &cell); err != nil {
			return err
		}
		if cell.ID != id {
			return fmt.Errorf("cell %s, want %s", nb.Cells[0], id)
		}
		// The run's end (the kernel's idle status, its last message) is written too.
		if cell.ExecutionCount == nil || len(cell.Outputs) != 1 || strings.Join(cell.Outputs[0].Text, "") != "0\n1\n2\n3\n4\n5\n6\n7\n" ||
			cell.Metadata.Execution["iopub.status.idle"] == "" {
			return fmt.Errorf("cell %s", nb.Cells[0])
		}
		mtime = fi.ModTime()
		return nil
	})
	idle, err := time.Parse(time.RFC3339Nano, cell.Metadata.Execution["iopub.status.idle"])
	if err != nil {
		t.Fatalf("timing record %v: %v", cell.Metadata.Execution, err)
	}
	if late := mtime.Sub(idle); late > time.Second {
		t.Errorf("written %s after the kernel's last message, want within 1 s", late)
	}
	t.Logf("figure: every API server killed during a cell: its outputs written into the notebook %s after the kernel's last message", mtime.Sub(idle).Round(time.Millisecond))
}

// testHelmMissingImage: a kernel whose image cannot be pulled fails fast, with the reason. The
// image is named on a loopback registry that refuses, so that no lookup or connection leaves
// the machine.
func testHelmMissingImage(t *testing.T, env *helmEnv, api *jupyterAPI) {
	spec := &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: "missing-image"},
		Spec: nbv1.KernelSpecSpec{
			DisplayName: "Missing image", Language: "python", Image: "127.0.0.1:1/nbkube/does-not-exist:1",
			Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		},
	}
	// Left in place: helm uninstall must remove kernel specs made with kubectl too.
	env.createListed(t, api, spec, "api/kernelspecs/missing-image")
	start := time.Now()
	r := api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "missing-image"})
	took := time.Since(start)
	if r.status < 400 {
		t.Fatalf("a kernel with a missing image started: HTTP %d %s", r.status, r.body)
	}
	e := r.jupyterError(t)
	if !strings.Contains(strings.ToLower(e.Message), "image") {
		t.Errorf("the error does not say the image is the problem: %s", r.body)
	}
	if took > 30*time.Second {
		t.Errorf("the failure took %s", took)
	}
	t.Logf("missing image: HTTP %d after %.1fs: %s", r.status, took.Seconds(), e.Message)
}

// testHelmKernelPodKilled deletes a kernel's pod: the API reports the kernel dead, and the
// kernel comes back in a new pod, as Jupyter restarts a kernel that died.
func testHelmKernelPodKilled(t *testing.T, env *helmEnv, api *jupyterAPI, kernelID string) {
	old := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: kernelID}, old); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	var states []string
	testenv.Eventually(t, "the kernel reported dead, then back", 3*time.Minute, func() error {
		var k struct {
			State string `json:"execution_state"`
		}
		api.call(t, http.MethodGet, "api/kernels/"+kernelID, nil).want(t, http.StatusOK).decode(t, &k)
		if len(states) == 0 || states[len(states)-1] != k.State {
			states = append(states, k.State)
		}
		if !slices.Contains(states, "dead") || k.State != "idle" {
			return fmt.Errorf("states seen %v", states)
		}
		return nil
	})
	now := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: kernelID}, now); err != nil || now.UID == old.UID {
		t.Errorf("no new kernel pod (%v)", err)
	}
	t.Logf("states after the kernel pod was deleted: %v", states)
}

// testHelmCluster: an admin makes a cluster; a user starts it with 2 engines and uses them
// from a kernel attached to it, through the ipcontroller's Service.
func testHelmCluster(t *testing.T, env *helmEnv, api *jupyterAPI) {
	cl := &nbv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: "par"},
		Spec:       nbv1.ClusterParameters{Owner: "admin", State: nbv1.ClusterStopped, Engines: 1},
	}
	env.createListed(t, api, cl, "api/clusters/par")
	start := time.Now()
	api.call(t, http.MethodPost, "api/clusters/par/start?n=2", nil).want(t, http.StatusOK)
	testenv.Eventually(t, "2 engines registered", clusterStartWait, func() error {
		var m clusterModel
		api.call(t, http.MethodGet, "api/clusters/par", nil).want(t, http.StatusOK).decode(t, &m)
		if m.EnginesReady != 2 {
			return fmt.Errorf("%+v", m)
		}
		return nil
	})
	t.Logf("cluster with 2 engines ready in %.1fs", time.Since(start).Seconds())

	var s sessionModel
	api.call(t, http.MethodPost, "api/sessions", map[string]any{
		"path": "e2e/parallel.ipynb", "type": "notebook", "name": "parallel.ipynb",
		"kernel": map[string]string{"name": "python3"}, "cluster": "par",
	}).want(t, http.StatusCreated).decode(t, &s)
	ws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", "")
	if got, e := mapOnEngines(t, ws, 2); got != "2 [0, 1, 4, 9]" {
		t.Errorf("from the kernel: %q (stderr %q)", got, e.Stderr.String())
	}
	api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent)
}

// testHelmDask: a user makes a dask cluster of 2 workers through the API and maps over them
// from a kernel attached to it with Client() and no argument, through the scheduler's
// Service and under the cluster's NetworkPolicy; the API server proxies the scheduler's
// dashboard routes (the chart's policy lets it in on 8787).
func testHelmDask(t *testing.T, env *helmEnv, api *jupyterAPI) {
	start := time.Now()
	api.call(t, http.MethodPost, "api/clusters", map[string]any{"profile": "dpar", "n": 2, "framework": "dask"}).want(t, http.StatusCreated)
	t.Cleanup(func() { api.deleteQuietly("api/clusters/dpar") })
	var s sessionModel
	api.call(t, http.MethodPost, "api/sessions", map[string]any{
		"path": "e2e/dask.ipynb", "type": "notebook", "name": "dask.ipynb",
		"kernel": map[string]string{"name": "python3"}, "cluster": "dpar",
	}).want(t, http.StatusCreated).decode(t, &s)
	defer func() { api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent) }()
	// Both replicas' caches know the kernel once it is Ready.
	waitKernelReady(t, env.client, helmNamespace, s.Kernel.ID)
	ws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", "")
	defer ws.close()
	e := runCell(t, ws, `import os, socket, time
from dask.distributed import Client
for attempt in range(90):
    try:
        client = Client(timeout=10)
        client.wait_for_workers(2, timeout=120)
        break
    except OSError:
        time.sleep(2)
print(len(set(client.gather(client.map(lambda i: socket.gethostname(), range(20), pure=False)))), os.environ["DASK_SCHEDULER_ADDRESS"])`)
	want := "2 tls://dpar-dask-scheduler." + helmNamespace + ".svc:8786"
	if got := strings.TrimSpace(e.Stdout.String()); got != want {
		t.Errorf("from the kernel: %q, want %q (stderr %q)", got, want, e.Stderr.String())
	}
	t.Logf("dask cluster created, kernel started and 2 workers mapped over in %.1fs", time.Since(start).Seconds())
	var counts struct {
		Workers int `json:"workers"`
	}
	api.call(t, http.MethodGet, "dask/dpar/json/counts.json", nil).want(t, http.StatusOK).decode(t, &counts)
	if counts.Workers != 2 {
		t.Errorf("the scheduler's counts through the proxy: %+v", counts)
	}
}

// testHelmUpgrade changes the release: the API server's replicas drop to 1 and it rolls; the
// kernel pod and the token stay.
func testHelmUpgrade(t *testing.T, env *helmEnv, api *jupyterAPI, kernelID string) {
	before := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: kernelID}, before); err != nil {
		t.Fatal(err)
	}
	// The release's default, manager.agentDelivery Auto, found that every node of this cluster
	// (kubelet 1.36, containerd 2.4) mounts image volumes.
	usesImageVolume(t, env, before)
	env.run(t, env.helm, env.helmArgs("upgrade", "--set", "apiserver.replicas=1", "--set", "apiserver.iopubMsgRateLimit=500",
		"--set", "manager.agentDelivery=InitContainer")...)
	dep := &appsv1.Deployment{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-nbkube-apiserver"}, dep); err != nil {
		t.Fatal(err)
	}
	if *dep.Spec.Replicas != 1 || !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--iopub-msg-rate-limit=500") {
		t.Errorf("upgrade did not apply: replicas %d, args %v", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Args)
	}
	env.waitAPIServers(t, 1, nil) // the rollout is over once the old replicas are gone
	waitAPI(t, api)               // the same token still works
	after := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKeyFromObject(before), after); err != nil || after.UID != before.UID {
		t.Errorf("the upgrade replaced the kernel pod (%v)", err)
	}
	ws := dialJupyterWS(t, api, "api/kernels/"+kernelID+"/channels", "")
	if got := strings.TrimSpace(runCell(t, ws, "print(6 * 7)").Stdout.String()); got != "42" {
		t.Errorf("after the upgrade: %q", got)
	}
	testHelmAgentByInitContainer(t, env, api)
}

// testHelmUninstall removes the release: no pods, secrets, custom resources or other objects
// of it are left; only the contents claim stays (contents.keep), and then goes when deleted.
func testHelmUninstall(t *testing.T, env *helmEnv) {
	env.run(t, env.helm, "uninstall", helmRelease, "--namespace", helmNamespace, "--wait", "--timeout", "5m")
	ctx := t.Context()
	in := client.InNamespace(helmNamespace)
	testenv.Eventually(t, "nothing left of the release", 2*time.Minute, func() error {
		var left []string
		lists := map[string]client.ObjectList{
			"pods": &corev1.PodList{}, "secrets": &corev1.SecretList{}, "services": &corev1.ServiceList{},
			"kernels": &nbv1.KernelList{}, "sessions": &nbv1.SessionList{}, "clusters": &nbv1.ClusterList{},
			"kernelspecs": &nbv1.KernelSpecList{}, "userusages": &nbv1.UserUsageList{}, "deployments": &appsv1.DeploymentList{},
			"roles": &rbacv1.RoleList{}, "rolebindings": &rbacv1.RoleBindingList{},
			"serviceaccounts": &corev1.ServiceAccountList{}, "configmaps": &corev1.ConfigMapList{}, "daemonsets": &appsv1.DaemonSetList{},
		}
		for kind, list := range lists {
			if err := env.client.List(ctx, list, in); err != nil {
				return err
			}
			items, _ := metaItems(list)
			for _, name := range items {
				// Every namespace has these two.
				if (kind == "serviceaccounts" && name == "default") || (kind == "configmaps" && name == "kube-root-ca.crt") {
					continue
				}
				left = append(left, kind+"/"+name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left behind: %v", left)
		}
		return nil
	})
	pvc := &corev1.PersistentVolumeClaim{}
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-nbkube-contents"}, pvc); err != nil {
		t.Errorf("the contents claim is gone, though contents.keep is true: %v", err)
	} else if err := env.client.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// metaItems names the items of a list.
func metaItems(list client.ObjectList) ([]string, error) {
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if m, err := apimeta.Accessor(o); err == nil {
			names = append(names, m.GetName())
		}
	}
	return names, nil
}

// fileOwner is the uid owning a file.
func fileOwner(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
