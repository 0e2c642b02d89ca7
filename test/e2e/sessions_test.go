package e2e

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// A start's answer is what the server then lists, as in Jupyter (Notebook's test_create
// compares them whole): the session's kernel is not "starting" in the answer and "idle" a
// second later with another last_activity. Checked right after the start, and again once the
// kernel controller has recorded the kernel ready, nothing having happened in between: a
// model that moved then was not the server's state when it answered.
func testStartAnswersWhatTheServerThenLists(t *testing.T, d deployment, api *jupyterAPI) {
	var session map[string]any
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "foo/nb1.ipynb", "type": "notebook",
		"kernel": map[string]any{"name": "python3"}}).want(t, http.StatusCreated).decode(t, &session)
	id, _ := session["id"].(string)
	kernelID := modelKernelID(t, session)
	t.Cleanup(func() { api.deleteQuietly("api/sessions/" + id) })
	var kernel map[string]any
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &kernel)
	t.Cleanup(func() { api.deleteQuietly(fmt.Sprintf("api/kernels/%v", kernel["id"])) })

	lists := func(when string) {
		t.Helper()
		var sessions []map[string]any
		api.getJSON(t, "api/sessions", &sessions)
		sameModel(t, when+", GET /api/sessions", listed(sessions, id), session)
		var got map[string]any
		api.getJSON(t, "api/sessions/"+id, &got)
		sameModel(t, when+", GET /api/sessions/"+id, got, session)
		var kernels []map[string]any
		api.getJSON(t, "api/kernels", &kernels)
		sameModel(t, when+", GET /api/kernels", listed(kernels, fmt.Sprint(kernel["id"])), kernel)
		sameModel(t, when+", GET /api/kernels (the session's kernel)", listed(kernels, kernelID), session["kernel"].(map[string]any))
	}
	lists("right after the starts")
	d.readyKernel(t, kernelID)
	d.readyKernel(t, fmt.Sprint(kernel["id"]))
	// The API server reads a cache: the Kernels' records reach it a moment after the API.
	time.Sleep(time.Second)
	lists("once the controller recorded the kernels ready")
}

// After PATCH /api/sessions/<id> gives the session another kernel, by id or by name, the
// previous one is shut down before the answer, as Jupyter does (Notebook's
// test_modify_kernel_id and test_modify_kernel_name list the kernels right after): the list
// no longer has it, its process has ended, and its room in the user's limit is free at once.
// A kernel another session still uses stays theirs. The user's kernels from before (the
// release's other tests') are left out of the lists and leave two kernels' room.
func testChangedKernelShutsThePreviousOneDown(t *testing.T, d deployment, api *jupyterAPI) {
	ctx := t.Context()
	others := api.kernelIDs(t)
	ours := func(list []map[string]any) []map[string]any {
		return slices.DeleteFunc(list, func(k map[string]any) bool { return slices.Contains(others, fmt.Sprint(k["id"])) })
	}
	ourIDs := func() []string {
		return slices.DeleteFunc(api.kernelIDs(t), func(id string) bool { return slices.Contains(others, id) })
	}

	// Two kernels more at most: a start right after a change fits only if the previous
	// kernel's room is free.
	limit := len(others) + 2
	policy := &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: d.kernelNamespace(), Name: "e2e-sessions"},
		Spec: nbv1.UserPolicySpec{Users: []string{apiUser(t, api)}, Limits: nbv1.UserLimits{Kernels: ptr.To(int32(limit))}}}
	if err := d.kube().Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.kube().Delete(context.Background(), policy) })
	for i, a := range d.apiServers(t) {
		testenv.Eventually(t, fmt.Sprintf("API server %d sees the policy and the kernels from before", i), time.Minute, func() error {
			var st struct {
				Quota *struct {
					Usage, Limits struct {
						Kernels *int `json:"kernels"`
					}
				} `json:"quota"`
			}
			a.getJSON(t, "api/status", &st)
			if st.Quota == nil || st.Quota.Limits.Kernels == nil || *st.Quota.Limits.Kernels != limit ||
				st.Quota.Usage.Kernels == nil || *st.Quota.Usage.Kernels != len(others) {
				return fmt.Errorf("quota %+v", st.Quota)
			}
			return nil
		})
	}

	var before map[string]any
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "foo/nb1.ipynb", "type": "notebook",
		"kernel": map[string]any{"name": "python3"}}).want(t, http.StatusCreated).decode(t, &before)
	sid := fmt.Sprint(before["id"])
	t.Cleanup(func() { api.deleteQuietly("api/sessions/" + sid) })
	first := modelKernelID(t, before)
	var kernel map[string]any
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &kernel)
	second := fmt.Sprint(kernel["id"])
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + second) })

	// By id, as Notebook's test_modify_kernel_id (the name goes with the id, and the id wins).
	changed := changeKernel(t, d, api, sid, first, map[string]any{"id": second, "name": "foo"})
	if got := modelKernelID(t, changed); got != second {
		t.Fatalf("PATCH kernel id: the session's kernel is %s, want %s", got, second)
	}
	var kernels []map[string]any
	api.getJSON(t, "api/kernels", &kernels)
	kernels = ours(kernels)
	delete(kernel, "last_activity")
	for _, k := range kernels {
		delete(k, "last_activity")
	}
	if !reflect.DeepEqual(kernels, []map[string]any{kernel}) {
		t.Errorf("GET /api/kernels right after the PATCH: %v, want only the started kernel %v", kernels, kernel)
	}

	// By name: a new kernel starts (two of two), the previous one, taken up from POST
	// /api/kernels and no other session's, is shut down.
	changed = changeKernel(t, d, api, sid, second, map[string]any{"name": "python3"})
	third := modelKernelID(t, changed)
	if ids := ourIDs(); !slices.Equal(ids, []string{third}) {
		t.Errorf("GET /api/kernels right after the PATCH by name: %v, want only the new kernel %s", ids, third)
	}

	// A kernel two sessions use stays while one of them moves on.
	var fourth map[string]any
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &fourth)
	shared := fmt.Sprint(fourth["id"])
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + shared) })
	changeKernel(t, d, api, sid, third, map[string]any{"id": shared})
	var other map[string]any
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "bar.ipynb", "type": "notebook",
		"kernel": map[string]any{"id": shared}}).want(t, http.StatusCreated).decode(t, &other)
	t.Cleanup(func() { api.deleteQuietly(fmt.Sprintf("api/sessions/%v", other["id"])) })
	if got := modelKernelID(t, other); got != shared {
		t.Fatalf("a second session on kernel %s got kernel %s", shared, got)
	}
	alive := kernelAlive(t, d, shared)
	var moved map[string]any
	api.call(t, http.MethodPatch, "api/sessions/"+sid, map[string]any{"kernel": map[string]any{"name": "python3"}}).
		want(t, http.StatusOK).decode(t, &moved)
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + modelKernelID(t, moved)) })
	if ids := api.kernelIDs(t); !slices.Contains(ids, shared) {
		t.Errorf("kernel %s, which session %v still uses, is gone (listed %v)", shared, other["id"], ids)
	}
	if alive != nil && !alive() {
		t.Errorf("the process of kernel %s, which session %v still uses, has ended", shared, other["id"])
	}
	var got map[string]any
	api.getJSON(t, fmt.Sprintf("api/sessions/%v", other["id"]), &got)
	if modelKernelID(t, got) != shared {
		t.Errorf("the other session: %v, want kernel %s", got, shared)
	}
	// The session whose kernel changed three times is still there, with its last kernel.
	api.getJSON(t, "api/sessions/"+sid, &got)
	if modelKernelID(t, got) != modelKernelID(t, moved) {
		t.Errorf("the session after its changes: %v, want kernel %s", got, modelKernelID(t, moved))
	}
}

// kernelAlive is a check of whether the named kernel's process (as it is now) still runs,
// where this machine sees it (kernelProcesses); nil elsewhere.
func kernelAlive(t *testing.T, d deployment, name string) func() bool {
	t.Helper()
	procs, ok := d.(kernelProcesses)
	if !ok {
		return nil
	}
	pid := procs.kernelProcess(t, name)
	return func() bool { return testenv.Alive(pid) }
}

// changeKernel PATCHes the session's kernel and checks what Jupyter has done when it
// answers: the previous kernel is gone from the API, its process has ended, and its room is
// free (a start fits in the limit; the kernel it starts is deleted again).
func changeKernel(t *testing.T, d deployment, api *jupyterAPI, sid, previous string, kernel map[string]any) map[string]any {
	t.Helper()
	alive := kernelAlive(t, d, previous)
	var changed map[string]any
	api.call(t, http.MethodPatch, "api/sessions/"+sid, map[string]any{"kernel": kernel}).want(t, http.StatusOK).decode(t, &changed)
	if r := api.call(t, http.MethodGet, "api/kernels/"+previous, nil); r.status != http.StatusNotFound {
		t.Errorf("GET /api/kernels/%s right after the PATCH: HTTP %d, want 404: %s", previous, r.status, r.body)
	}
	if alive != nil && alive() {
		t.Errorf("the previous kernel's process still runs after the PATCH")
	}
	r := api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
	if r.status != http.StatusCreated {
		t.Errorf("a start right after the PATCH: HTTP %d, want 201 (the previous kernel's room free): %s", r.status, r.body)
	} else {
		var k map[string]any
		r.decode(t, &k)
		api.call(t, http.MethodDelete, fmt.Sprintf("api/kernels/%v", k["id"]), nil).want(t, http.StatusNoContent)
	}
	return changed
}

// modelKernelID is the id of a session model's kernel.
func modelKernelID(t *testing.T, session map[string]any) string {
	t.Helper()
	k, _ := session["kernel"].(map[string]any)
	id, _ := k["id"].(string)
	if id == "" {
		t.Fatalf("session model without a kernel id: %v", session)
	}
	return id
}

// listed is the model of id in a list, nil when it is not there.
func listed(list []map[string]any, id string) map[string]any {
	for _, m := range list {
		if m["id"] == id {
			return m
		}
	}
	return nil
}

// sameModel fails unless got is want, naming the kernel's fields that differ.
func sameModel(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	kernelOf := func(m map[string]any) map[string]any {
		if k, ok := m["kernel"].(map[string]any); ok {
			return k
		}
		return m
	}
	g, w := kernelOf(got), kernelOf(want)
	for _, f := range []string{"execution_state", "last_activity", "connections"} {
		if g[f] != w[f] {
			t.Errorf("%s: kernel %s %v, the start answered %v", what, f, g[f], w[f])
		}
	}
	t.Errorf("%s: %v\nthe start answered %v", what, got, want)
}
