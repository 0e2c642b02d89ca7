package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// readyWarm waits until the spec's pool has a ready warm kernel and returns its name.
func readyWarm(t *testing.T, c client.Client, spec string) string {
	t.Helper()
	var name string
	testenv.Eventually(t, "a ready warm kernel of "+spec, 2*time.Minute, func() error {
		var l nbv1.KernelList
		if err := c.List(context.Background(), &l, client.InNamespace("default"), client.MatchingLabels{nbv1.LabelWarm: "true"}); err != nil {
			return err
		}
		for _, k := range l.Items {
			for _, cond := range k.Status.Conditions {
				if k.Spec.KernelSpec == spec && cond.Type == nbv1.ConditionReady && cond.Status == metav1.ConditionTrue {
					name = k.Name
					return nil
				}
			}
		}
		return fmt.Errorf("%d warm kernels, none ready", len(l.Items))
	})
	return name
}

// A spec with a warm pool: the first start is cold and fills the pool; the next start, and
// a session's kernel in a subdirectory, take warm kernels that answer at once, in the
// notebook's directory (where a restart keeps them), with nothing run that the user sees.
// Warm kernels are nobody's in the API until claimed.
func TestLocal_WarmPoolServesStartsAfterTheFirst(t *testing.T) {
	root := t.TempDir()
	inst := startLocal(t, t.TempDir(), root)
	spec := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "warm"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Warm", Language: "python",
			Argv:     []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
			WarmPool: &nbv1.WarmPool{Size: 1}}}
	if err := inst.client.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	api := inst.api(t)

	start := func() (kernelModel, time.Duration) {
		var k kernelModel
		began := time.Now()
		api.call(t, http.MethodPost, "api/kernels", map[string]any{"name": "warm"}).want(t, http.StatusCreated).decode(t, &k)
		return k, time.Since(began)
	}
	cold, coldTook := start()
	warm := readyWarm(t, inst.client, "warm")
	listed := func() []string {
		var ks []kernelModel
		api.getJSON(t, "api/kernels", &ks)
		var ids []string
		for _, k := range ks {
			ids = append(ids, k.ID)
		}
		return ids
	}
	if ids := listed(); slices.Contains(ids, warm) {
		t.Errorf("GET /api/kernels lists the unclaimed warm kernel %s: %v", warm, ids)
	}
	api.call(t, http.MethodGet, "api/kernels/"+warm, nil).want(t, http.StatusNotFound)

	claimed, warmTook := start()
	t.Logf("cold start %s, warm start %s", coldTook, warmTook)
	if claimed.ID != warm {
		t.Fatalf("the second start got kernel %s, not the warm %s", claimed.ID, warm)
	}
	if ids := listed(); !slices.Contains(ids, cold.ID) || !slices.Contains(ids, claimed.ID) {
		t.Errorf("GET /api/kernels: %v, want both started kernels", ids)
	}
	ws := dialJupyterWS(t, api, "api/kernels/"+claimed.ID+"/channels", "")
	if e := runCell(t, ws, "import os; print(os.getcwd())"); strings.TrimSpace(e.Stdout.String()) != root {
		t.Errorf("the claimed kernel runs in %q, want the contents root %s", e.Stdout.String(), root)
	}

	// A gateway's start (KERNEL_USERNAME in its env) takes one too, with the env set.
	warm = readyWarm(t, inst.client, "warm")
	var gw kernelModel
	api.call(t, http.MethodPost, "api/kernels", map[string]any{"name": "warm", "env": map[string]string{"KERNEL_USERNAME": ""}}).
		want(t, http.StatusCreated).decode(t, &gw)
	if gw.ID != warm {
		t.Fatalf("the gateway's start got kernel %s, not the warm %s", gw.ID, warm)
	}
	var me struct {
		Identity struct {
			Username string `json:"username"`
		} `json:"identity"`
	}
	api.getJSON(t, "api/me", &me)
	gws := dialJupyterWS(t, api, "api/kernels/"+gw.ID+"/channels", "")
	if got := strings.TrimSpace(runCell(t, gws, "import os; print(os.environ.get('KERNEL_USERNAME'))").Stdout.String()); got != me.Identity.Username || got == "" {
		t.Errorf("the gateway's warm kernel has KERNEL_USERNAME %q, want the caller %q", got, me.Identity.Username)
	}

	// A notebook in a subdirectory: its session's kernel is the next warm one, moved there.
	sub := filepath.Join(root, "sub", "dir")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	warm = readyWarm(t, inst.client, "warm")
	s := createSession(t, api, map[string]any{"path": "sub/dir/nb.ipynb", "type": "notebook", "kernel": map[string]any{"name": "warm"}})
	if s.Kernel.ID != warm {
		t.Fatalf("the session got kernel %s, not the warm %s", s.Kernel.ID, warm)
	}
	sws := dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", s.ID)
	e := runCell(t, sws, "import os; print(os.getcwd())")
	if got := strings.TrimSpace(e.Stdout.String()); got != sub {
		t.Errorf("the session's kernel runs in %q, want the notebook's directory %s", got, sub)
	}
	if n, _ := e.Reply["execution_count"].(float64); n != 1 {
		t.Errorf("the user's first cell has execution_count %v, want 1: the move must not count", e.Reply["execution_count"])
	}
	api.call(t, http.MethodPost, "api/kernels/"+s.Kernel.ID+"/restart", nil).want(t, http.StatusOK)
	sws = dialJupyterWS(t, api, "api/kernels/"+s.Kernel.ID+"/channels", s.ID)
	if got := strings.TrimSpace(runCell(t, sws, "import os; print(os.getcwd())").Stdout.String()); got != sub {
		t.Errorf("after a restart the session's kernel runs in %q, want %s", got, sub)
	}

	// Deleting the session shuts its claimed kernel down, as a session's own kernel.
	api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent)
	testenv.Eventually(t, "the session's kernel gone", time.Minute, func() error {
		if slices.Contains(listed(), s.Kernel.ID) {
			return fmt.Errorf("kernel %s still listed", s.Kernel.ID)
		}
		return nil
	})
}
