//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/testenv"
)

// managerKillStarts is how many kernels start at once while the manager is killed.
const managerKillStarts = 6

// testHelmManagerKilled kills the manager's process with SIGKILL (the node is this machine, so
// its container's process is ours to signal) while kernels start through the API: it cannot
// release its leader lease, and its container's restart must wait the lease out before it
// reconciles again. Every start must complete, or fail with a Jupyter error that says why,
// within the API's start bound; the kernels that started answer; and once they are all shut
// down, no pod or Secret of theirs remains.
func testHelmManagerKilled(t *testing.T, env *helmEnv, api *jupyterAPI) {
	ctx := t.Context()
	c := env.client
	managers := func() []corev1.Pod {
		var pl corev1.PodList
		if err := c.List(ctx, &pl, client.InNamespace(helmNamespace), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
			t.Fatal(err)
		}
		return pl.Items
	}
	before := map[string]bool{}
	for _, id := range api.kernelIDs(t) {
		before[id] = true
	}

	type result struct {
		status  int
		id, msg string
		took    time.Duration
		err     error
	}
	results := make([]result, managerKillStarts)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range results {
		wg.Go(func() {
			req := api.request(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
			resp, err := api.hc.Do(req)
			r := &results[i]
			r.took = time.Since(began)
			if err != nil {
				r.err = err
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
			r.status = resp.StatusCode
			var m struct{ ID, Message, Reason string }
			r.err = json.Unmarshal(body, &m)
			r.id, r.msg = m.ID, m.Message+" ("+m.Reason+")"
		})
	}
	// The kill comes while the starts are being reconciled: once the first kernel pod exists.
	var made int
	testenv.Eventually(t, "a kernel pod of the starts", time.Minute, func() error {
		made = len(newKernelPods(t, env, before))
		if made == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	pods := managers()
	if len(pods) != 1 {
		t.Fatalf("%d manager pods, want 1", len(pods))
	}
	pod := pods[0]
	restartsBefore := restarts(&pod)
	pid := containerProcess(t, pod.UID, "manager")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Since(began)
	wg.Wait()

	var started, failed []string
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("a start answered no Jupyter model or error after %s: HTTP %d, %v", r.took.Round(time.Millisecond), r.status, r.err)
		case r.status == http.StatusCreated && r.id != "":
			started = append(started, r.id)
			t.Cleanup(func() { api.deleteQuietly("api/kernels/" + r.id) })
		case r.status >= 400 && r.msg != "":
			failed = append(failed, fmt.Sprintf("HTTP %d %s", r.status, r.msg))
		default:
			t.Errorf("a start answered HTTP %d without a kernel id or a message", r.status)
		}
	}
	var slowest time.Duration
	for _, r := range results {
		slowest = max(slowest, r.took)
	}
	t.Logf("figure: manager killed while kernels start: %d starts, %d kernel pods made before the kill at %.1fs; %d started, %d failed with a reason %v; the last answered at %.1fs",
		managerKillStarts, made, killed.Seconds(), len(started), len(failed), failed, slowest.Seconds())
	for _, id := range started {
		var k struct {
			State string `json:"execution_state"`
		}
		api.getJSON(t, "api/kernels/"+id, &k)
		if k.State == "dead" {
			t.Errorf("kernel %s started but is dead", id)
		}
	}
	testenv.Eventually(t, "the manager restarted, ready", 2*time.Minute, func() error {
		for _, p := range managers() {
			if p.UID == pod.UID && restarts(&p) > restartsBefore && podReady(&p) {
				return nil
			}
		}
		return fmt.Errorf("not yet")
	})

	// Shut down everything the starts made, through the API, then nothing of theirs remains.
	for _, id := range api.kernelIDs(t) {
		if !before[id] {
			api.call(t, http.MethodDelete, "api/kernels/"+id, nil).want(t, http.StatusNoContent)
		}
	}
	testenv.Eventually(t, "no pod or Secret of the starts' kernels", 2*time.Minute, func() error {
		if pods := newKernelPods(t, env, before); len(pods) > 0 {
			return fmt.Errorf("pods %v remain", pods)
		}
		var sl corev1.SecretList
		if err := c.List(ctx, &sl, client.InNamespace(helmNamespace), client.MatchingLabels{nbv1.LabelComponent: builder.ComponentKernel}); err != nil {
			return err
		}
		var left []string
		for _, s := range sl.Items {
			if !before[s.Labels[nbv1.LabelKernel]] {
				left = append(left, s.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("Secrets %v remain", left)
		}
		var kl nbv1.KernelList
		if err := c.List(ctx, &kl, client.InNamespace(helmNamespace)); err != nil {
			return err
		}
		for _, k := range kl.Items {
			if !before[k.Name] {
				return fmt.Errorf("Kernel %s remains", k.Name)
			}
		}
		return nil
	})
}

// newKernelPods are the kernel pods of kernels not in before.
func newKernelPods(t *testing.T, env *helmEnv, before map[string]bool) []string {
	t.Helper()
	var pl corev1.PodList
	if err := env.client.List(t.Context(), &pl, client.InNamespace(helmNamespace), client.MatchingLabels{nbv1.LabelComponent: builder.ComponentKernel}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pl.Items {
		if !before[p.Labels[nbv1.LabelKernel]] {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// containerProcess is the process ID of the container's main process, found on this machine,
// the cluster's node: a process whose command line starts with `nbkube <command>` and whose
// cgroup is the pod's (cgroupfs and systemd drivers name the pod's UID, the latter with
// underscores).
func containerProcess(t *testing.T, uid types.UID, command string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "nbkube" || args[1] != command {
			continue
		}
		cgroup, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if strings.Contains(string(cgroup), string(uid)) || strings.Contains(string(cgroup), strings.ReplaceAll(string(uid), "-", "_")) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("processes of `nbkube %s` in pod %s: %v, want one", command, uid, found)
	}
	return found[0]
}

// podReady says whether p's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
