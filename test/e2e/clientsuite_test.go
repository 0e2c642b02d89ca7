package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// deployment is an nbkube that the Jupyter client suite drives: one `nbkube local`
// (*instance), or the chart's release in the real cluster of `make test-e2e` (*helmEnv). The
// suite asks the same of both, so that a difference between the deployments fails where it
// shows.
type deployment interface {
	// api is a client of the deployment's Jupyter API with its token (an admin's).
	api(t testing.TB) *jupyterAPI
	// apiServers are clients of each of its API servers, with the same token, to wait until
	// every one has seen a change made with kubectl.
	apiServers(t testing.TB) []*jupyterAPI
	// kube is a client of its cluster, as an admin's kubectl; kernelNamespace is where its
	// kernels, sessions, kernel specs and user policies are.
	kube() client.Client
	kernelNamespace() string
	// readyKernel waits until the named Kernel resource is Ready and returns it.
	readyKernel(t *testing.T, name string) *nbv1.Kernel
}

// kernelProcesses is a deployment whose kernels are processes of this machine that report
// their own pid (no PID namespace between them): `nbkube local`'s. The suite's cases check
// processes there too.
type kernelProcesses interface {
	// kernelProcess is the pid of the named kernel's ipykernel process.
	kernelProcess(t *testing.T, name string) int
}

// clientCase is a case of the Jupyter client suite.
type clientCase struct {
	name string
	run  func(t *testing.T, d deployment, api *jupyterAPI)
}

// suiteKernelSpec is the Jupyter name of the second kernel spec the suite makes: a name that
// cannot be a resource's, as a spec directory's can.
const suiteKernelSpec = "sample 2"

// jupyterClientSuite drives d through its Jupyter API and WebSockets as Jupyter's clients do:
// contents, kernels, sessions, kernel specs, the channels and the older IPython routes. The
// cases, and the deployment's own (more), run in parallel as the clients of a shared server
// do, each with kernels of its own; then the cases that need the user's kernels to
// themselves (a limit of the user's kernels, the whole list compared) run alone.
func jupyterClientSuite(t *testing.T, d deployment, more ...clientCase) {
	api := d.api(t)
	start := time.Now()
	suiteSpec(t, d)
	t.Logf("kernel spec %q listed by every API server after %.1fs", suiteKernelSpec, time.Since(start).Seconds())
	cases := append([]clientCase{
		{"ContentsNotebookRoundTrip", testContentsRoundTrip},
		{"RoutesRunInterruptRestartAndDeleteAKernel", testKernelLifecycle},
		{"SessionsKeepOneKernelPerPathAndSwapKernels", testSessions},
		{"SessionStartAnswersWhatTheServerThenLists", testStartAnswersWhatTheServerThenLists},
		{"PythonIsPython3", func(t *testing.T, _ deployment, api *jupyterAPI) { testPythonIsPython3(t, api) }},
		{"SessionWithAnUnknownKernelID", func(t *testing.T, _ deployment, api *jupyterAPI) { testSessionWithAnUnknownKernelID(t, api) }},
		{"TwoClientsShareOutputButNotReplies", func(t *testing.T, _ deployment, api *jupyterAPI) { testTwoClients(t, api) }},
		{"ReconnectingClientGetsWhatItMissed", func(t *testing.T, _ deployment, api *jupyterAPI) { testReplay(t, api) }},
		{"OlderIPythonInterface", func(t *testing.T, _ deployment, api *jupyterAPI) { testLegacyKernels(t, api) }},
		{"OutputsOfARunWhoseClientLeftReachTheNotebook", testOutputsOutliveTheClient},
		{"ServerSideExecutionRunsStoredCellsInOrder", testServerSideExecution},
		{"EventsCrossReplicas", testEvents},
	}, more...)
	start = time.Now()
	t.Run("Together", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(t, d, api)
			})
		}
	})
	t.Logf("%d cases together: %.1fs", len(cases), time.Since(start).Seconds())
	t.Run("SessionKernelChangeShutsThePreviousOneDown", func(t *testing.T) { testChangedKernelShutsThePreviousOneDown(t, d, api) })
}

// suiteSpec makes the kernel spec suiteKernelSpec as an admin would with kubectl, a copy of
// python3 under another Jupyter name, and waits until every API server lists it. It is
// deleted when the suite ends.
func suiteSpec(t *testing.T, d deployment) {
	t.Helper()
	ctx := t.Context()
	python3 := &nbv1.KernelSpec{}
	if err := d.kube().Get(ctx, client.ObjectKey{Namespace: d.kernelNamespace(), Name: "python3"}, python3); err != nil {
		t.Fatal(err)
	}
	ks := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: d.kernelNamespace(), Name: "suite-sample-2"}, Spec: *python3.Spec.DeepCopy()}
	ks.Spec.KernelName, ks.Spec.DisplayName = suiteKernelSpec, "Sample 2"
	if err := d.kube().Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.kube().Delete(context.Background(), ks) })
	testenv.Eventually(t, "kernel spec "+ks.Name+" ready", time.Minute, func() error {
		if err := d.kube().Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(ks.Status.Conditions, nbv1.ConditionReady) {
			return fmt.Errorf("conditions %v", ks.Status.Conditions)
		}
		return nil
	})
	for i, a := range d.apiServers(t) {
		testenv.Eventually(t, fmt.Sprintf("API server %d lists kernel spec %q", i, suiteKernelSpec), time.Minute, func() error {
			if r := a.call(t, http.MethodGet, "api/kernelspecs/sample%202", nil); r.status != http.StatusOK {
				return fmt.Errorf("HTTP %d", r.status)
			}
			return nil
		})
	}
}

// waitKernelReady waits until the Kernel namespace/name is Ready and returns it.
func waitKernelReady(t *testing.T, c client.Client, namespace, name string) *nbv1.Kernel {
	t.Helper()
	k := &nbv1.Kernel{}
	testenv.Eventually(t, "kernel "+name+" ready", 60*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, k); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(k.Status.Conditions, nbv1.ConditionReady) {
			return fmt.Errorf("conditions %+v", k.Status.Conditions)
		}
		return nil
	})
	return k
}

// apiUser is the user the API's token is.
func apiUser(t testing.TB, api *jupyterAPI) string {
	t.Helper()
	var me struct {
		Identity struct {
			Username string `json:"username"`
		} `json:"identity"`
	}
	api.getJSON(t, "api/me", &me)
	if me.Identity.Username == "" {
		t.Fatal("GET /api/me names no user")
	}
	return me.Identity.Username
}

// contentsModel is the part of Jupyter's contents model the suite reads.
type contentsModel struct {
	Name         string    `json:"name"`
	Path         string    `json:"path"`
	Type         string    `json:"type"`
	Format       *string   `json:"format"`
	LastModified time.Time `json:"last_modified"`
	Content      any       `json:"content"`
}

// checkpointModel is Jupyter's checkpoint model.
type checkpointModel struct {
	ID           string    `json:"id"`
	LastModified time.Time `json:"last_modified"`
}

// notebookSource is the source of the first cell of a notebook model's content.
func notebookSource(t *testing.T, m contentsModel) string {
	t.Helper()
	nb, _ := m.Content.(map[string]any)
	cells, _ := nb["cells"].([]any)
	if len(cells) == 0 {
		t.Fatalf("notebook %s without cells: %v", m.Path, m.Content)
	}
	cell, _ := cells[0].(map[string]any)
	switch src := cell["source"].(type) {
	case string:
		return src
	case []any:
		s := ""
		for _, line := range src {
			s += fmt.Sprint(line)
		}
		return s
	}
	t.Fatalf("cell without source: %v", cell)
	return ""
}

// testContentsRoundTrip is a notebook's life through /api/contents as JupyterLab drives it:
// a directory, the notebook saved, read, checkpointed, changed, restored, renamed, deleted.
func testContentsRoundTrip(t *testing.T, _ deployment, api *jupyterAPI) {
	dir := "suite-" + randomID()[:8]
	t.Cleanup(func() { api.deleteQuietly("api/contents/" + dir) })
	api.call(t, http.MethodPut, "api/contents/"+dir, map[string]string{"type": "directory"}).want(t, http.StatusCreated)
	notebook := func(source string) map[string]any {
		return map[string]any{"type": "notebook", "format": "json", "content": map[string]any{
			"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{},
			"cells": []any{map[string]any{"cell_type": "code", "id": "c1", "metadata": map[string]any{},
				"execution_count": nil, "outputs": []any{}, "source": source}},
		}}
	}
	nbPath := dir + "/analysis.ipynb"
	var saved contentsModel
	created := api.call(t, http.MethodPut, "api/contents/"+nbPath, notebook("print('first')")).want(t, http.StatusCreated)
	created.decode(t, &saved)
	if saved.Path != nbPath || saved.Name != "analysis.ipynb" || saved.Type != "notebook" || saved.Content != nil || saved.LastModified.IsZero() {
		t.Errorf("PUT a new notebook answered %s", created.body)
	}
	var got contentsModel
	api.getJSON(t, "api/contents/"+nbPath, &got)
	if got.Type != "notebook" || got.Format == nil || *got.Format != "json" || notebookSource(t, got) != "print('first')" {
		t.Errorf("GET the notebook: %+v", got)
	}
	var listing contentsModel
	api.getJSON(t, "api/contents/"+dir, &listing)
	if entries, _ := listing.Content.([]any); len(entries) != 1 || entries[0].(map[string]any)["path"] != nbPath {
		t.Errorf("GET the directory lists %v, want only %s", listing.Content, nbPath)
	}

	var cp checkpointModel
	api.call(t, http.MethodPost, "api/contents/"+nbPath+"/checkpoints", nil).want(t, http.StatusCreated).decode(t, &cp)
	if cp.ID == "" || cp.LastModified.IsZero() {
		t.Errorf("checkpoint %+v", cp)
	}
	api.call(t, http.MethodPut, "api/contents/"+nbPath, notebook("print('second')")).want(t, http.StatusOK)
	api.getJSON(t, "api/contents/"+nbPath, &got)
	if src := notebookSource(t, got); src != "print('second')" {
		t.Errorf("after a save the notebook has %q", src)
	}
	var cps []checkpointModel
	api.getJSON(t, "api/contents/"+nbPath+"/checkpoints", &cps)
	// nbkube keeps several, oldest first (docs/api.md).
	if len(cps) == 0 || cps[len(cps)-1].ID != cp.ID {
		t.Errorf("checkpoints %v, want %s last", cps, cp.ID)
	}
	api.call(t, http.MethodPost, "api/contents/"+nbPath+"/checkpoints/"+cp.ID, nil).want(t, http.StatusNoContent)
	api.getJSON(t, "api/contents/"+nbPath, &got)
	if src := notebookSource(t, got); src != "print('first')" {
		t.Errorf("after restoring the checkpoint the notebook has %q", src)
	}
	api.call(t, http.MethodDelete, "api/contents/"+nbPath+"/checkpoints/"+cp.ID, nil).want(t, http.StatusNoContent)
	api.getJSON(t, "api/contents/"+nbPath+"/checkpoints", &cps)
	if slices.ContainsFunc(cps, func(c checkpointModel) bool { return c.ID == cp.ID }) {
		t.Errorf("checkpoints after the delete of %s: %v", cp.ID, cps)
	}

	renamed := dir + "/renamed.ipynb"
	var moved contentsModel
	api.call(t, http.MethodPatch, "api/contents/"+nbPath, map[string]string{"path": renamed}).want(t, http.StatusOK).decode(t, &moved)
	if moved.Path != renamed || moved.Name != "renamed.ipynb" {
		t.Errorf("PATCH path: %+v", moved)
	}
	api.call(t, http.MethodGet, "api/contents/"+nbPath, nil).want(t, http.StatusNotFound).jupyterError(t)
	api.getJSON(t, "api/contents/"+renamed, &got)
	if src := notebookSource(t, got); src != "print('first')" {
		t.Errorf("the renamed notebook has %q", src)
	}
	api.call(t, http.MethodDelete, "api/contents/"+renamed, nil).want(t, http.StatusNoContent)
	api.call(t, http.MethodGet, "api/contents/"+renamed, nil).want(t, http.StatusNotFound)
	api.call(t, http.MethodDelete, "api/contents/"+dir, nil).want(t, http.StatusNoContent)
	api.getJSON(t, "api/contents", &listing)
	entries, _ := listing.Content.([]any)
	if slices.ContainsFunc(entries, func(e any) bool { m, _ := e.(map[string]any); return m["path"] == dir }) {
		t.Errorf("the root still lists %s after its delete", dir)
	}
}
