//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// usesImageVolume says pod takes the agent from an image volume of the operator's image, and
// not by init container.
func usesImageVolume(t *testing.T, env *helmEnv, pod *corev1.Pod) {
	t.Helper()
	if len(pod.Spec.InitContainers) != 0 {
		t.Errorf("pod %s: init containers %v, want none", pod.Name, pod.Spec.InitContainers)
	}
	if v := pod.Spec.Volumes[0]; v.Name != "agent-bin" || v.Image == nil || v.Image.Reference != env.image {
		t.Errorf("pod %s: agent volume %+v, want the image %s", pod.Name, v, env.image)
	}
}

// testHelmAgentByInitContainer starts a kernel after the upgrade to manager.agentDelivery
// InitContainer (the release's default, Auto, took the agent from an image volume on this
// cluster): its pod copies the agent with an init container into an emptyDir, and the agent
// starts, interrupts and restarts the kernel.
func testHelmAgentByInitContainer(t *testing.T, env *helmEnv, api *jupyterAPI) {
	// Until the old manager has gone, it may still be the one that makes the kernel's pod.
	testenv.Eventually(t, "only upgraded managers", 2*time.Minute, func() error {
		var list corev1.PodList
		if err := env.client.List(t.Context(), &list, client.InNamespace(helmNamespace),
			client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
			return err
		}
		for _, p := range list.Items {
			if !slices.Contains(p.Spec.Containers[0].Args, "--agent-delivery=InitContainer") {
				return fmt.Errorf("manager pod %s is of the release before", p.Name)
			}
		}
		if len(list.Items) == 0 {
			return errors.New("no manager pod")
		}
		return nil
	})
	var k struct {
		ID string `json:"id"`
	}
	start := time.Now()
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &k)
	t.Logf("kernel with the agent copied by an init container started in %.1fs", time.Since(start).Seconds())
	defer api.call(t, http.MethodDelete, "api/kernels/"+k.ID, nil)
	pod := &corev1.Pod{}
	if err := env.client.Get(t.Context(), client.ObjectKey{Namespace: helmNamespace, Name: k.ID}, pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Image != env.image {
		t.Errorf("init containers %+v, want one of the image %s", pod.Spec.InitContainers, env.image)
	}
	if v := pod.Spec.Volumes[0]; v.Name != "agent-bin" || v.EmptyDir == nil {
		t.Errorf("agent volume %+v, want an emptyDir", v)
	}
	ws := dialJupyterWS(t, api, "api/kernels/"+k.ID+"/channels", "")
	runCell(t, ws, "x = 1")
	sleeping := jpclient.NewExecution(ws.execute("import time; time.sleep(120)"))
	time.Sleep(time.Second)
	api.call(t, http.MethodPost, "api/kernels/"+k.ID+"/interrupt", nil).want(t, http.StatusNoContent)
	ws.await(sleeping, 30*time.Second, "the interrupted cell", (*jpclient.Execution).Finished)
	if sleeping.ErrorName() != "KeyboardInterrupt" {
		t.Errorf("interrupted cell: %s", sleeping)
	}
	api.call(t, http.MethodPost, "api/kernels/"+k.ID+"/restart", nil).want(t, http.StatusOK)
	if got := strings.TrimSpace(runCell(t, ws, "print('x' in globals())").Stdout.String()); got != "False" {
		t.Errorf("after a restart the kernel still has x: %q", got)
	}
}
