package e2e

import (
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
func TestSessions_AStartAnswersWhatTheServerThenLists(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	t.Cleanup(func() { inst.stop(t) })
	api := inst.api(t)

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
	inst.readyKernel(t, kernelID)
	inst.readyKernel(t, fmt.Sprint(kernel["id"]))
	// The API server reads a cache: the Kernels' records reach it a moment after the API.
	time.Sleep(time.Second)
	lists("once the controller recorded the kernels ready")
}

// After PATCH /api/sessions/<id> gives the session another kernel, by id or by name, the
// previous one is shut down before the answer, as Jupyter does (Notebook's
// test_modify_kernel_id and test_modify_kernel_name list the kernels right after): the list
// no longer has it, its process has ended, and its room in the user's limit is free at once.
// A kernel another session still uses stays theirs.
func TestSessions_AChangedKernelShutsThePreviousOneDown(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	t.Cleanup(func() { inst.stop(t) })
	api := inst.api(t)
	ctx := t.Context()

	// Two kernels at most: a start right after a change fits only if the previous kernel's
	// room is free.
	policy := &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e2e-sessions"},
		Spec: nbv1.UserPolicySpec{Users: []string{localUserName()}, Limits: nbv1.UserLimits{Kernels: ptr.To[int32](2)}}}
	if err := inst.client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the API server sees the policy", time.Minute, func() error {
		var st struct {
			Quota *struct {
				Limits struct {
					Kernels *int `json:"kernels"`
				} `json:"limits"`
			} `json:"quota"`
		}
		api.getJSON(t, "api/status", &st)
		if st.Quota == nil || st.Quota.Limits.Kernels == nil || *st.Quota.Limits.Kernels != 2 {
			return fmt.Errorf("quota %+v", st.Quota)
		}
		return nil
	})

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
	changed := changeKernel(t, inst, api, sid, first, map[string]any{"id": second, "name": "foo"})
	if got := modelKernelID(t, changed); got != second {
		t.Fatalf("PATCH kernel id: the session's kernel is %s, want %s", got, second)
	}
	var kernels []map[string]any
	api.getJSON(t, "api/kernels", &kernels)
	delete(kernel, "last_activity")
	for _, k := range kernels {
		delete(k, "last_activity")
	}
	if !reflect.DeepEqual(kernels, []map[string]any{kernel}) {
		t.Errorf("GET /api/kernels right after the PATCH: %v, want only the started kernel %v", kernels, kernel)
	}

	// By name: a new kernel starts (two of two), the previous one, taken up from POST
	// /api/kernels and no other session's, is shut down.
	changed = changeKernel(t, inst, api, sid, second, map[string]any{"name": "python3"})
	third := modelKernelID(t, changed)
	if ids := api.kernelIDs(t); !slices.Equal(ids, []string{third}) {
		t.Errorf("GET /api/kernels right after the PATCH by name: %v, want only the new kernel %s", ids, third)
	}

	// A kernel two sessions use stays while one of them moves on.
	var fourth map[string]any
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &fourth)
	shared := fmt.Sprint(fourth["id"])
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + shared) })
	changeKernel(t, inst, api, sid, third, map[string]any{"id": shared})
	var other map[string]any
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "bar.ipynb", "type": "notebook",
		"kernel": map[string]any{"id": shared}}).want(t, http.StatusCreated).decode(t, &other)
	t.Cleanup(func() { api.deleteQuietly(fmt.Sprintf("api/sessions/%v", other["id"])) })
	if got := modelKernelID(t, other); got != shared {
		t.Fatalf("a second session on kernel %s got kernel %s", shared, got)
	}
	pid := inst.kernelProcess(t, shared)
	var moved map[string]any
	api.call(t, http.MethodPatch, "api/sessions/"+sid, map[string]any{"kernel": map[string]any{"name": "python3"}}).
		want(t, http.StatusOK).decode(t, &moved)
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + modelKernelID(t, moved)) })
	if ids := api.kernelIDs(t); !slices.Contains(ids, shared) || !testenv.Alive(pid) {
		t.Errorf("kernel %s, which session %v still uses, is gone (listed %v, process %d alive: %v)",
			shared, other["id"], ids, pid, testenv.Alive(pid))
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

// changeKernel PATCHes the session's kernel and checks what Jupyter has done when it
// answers: the previous kernel is gone from the API, its process has ended, and its room is
// free (a start fits in the limit; the kernel it starts is deleted again).
func changeKernel(t *testing.T, inst *instance, api *jupyterAPI, sid, previous string, kernel map[string]any) map[string]any {
	t.Helper()
	pid := inst.kernelProcess(t, previous)
	var changed map[string]any
	api.call(t, http.MethodPatch, "api/sessions/"+sid, map[string]any{"kernel": kernel}).want(t, http.StatusOK).decode(t, &changed)
	if r := api.call(t, http.MethodGet, "api/kernels/"+previous, nil); r.status != http.StatusNotFound {
		t.Errorf("GET /api/kernels/%s right after the PATCH: HTTP %d, want 404: %s", previous, r.status, r.body)
	}
	if testenv.Alive(pid) {
		t.Errorf("the previous kernel's process %d still runs after the PATCH", pid)
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
