package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/testenv"
)

// testServerSideExecution runs cells of a stored notebook with no client, as
// jupyter-server-documents' clients ask (POST /api/kernels/<id>/execute): a cell edited since
// is refused (409), three requests sent last first run in the order their
// previous_request_id gives, one whose predecessor never comes is refused (408), and every
// cell's outputs and count land in the notebook.
func testServerSideExecution(t *testing.T, _ deployment, api *jupyterAPI) {
	dir := "execute-" + randomID()[:8]
	t.Cleanup(func() { api.deleteQuietly("api/contents/" + dir) })
	api.call(t, http.MethodPut, "api/contents/"+dir, map[string]string{"type": "directory"}).want(t, http.StatusCreated)
	sources := map[string]string{"a": "import time; time.sleep(1); print('a ran')", "b": "print('b ran')", "c": "'c ran'"}
	nbPath := dir + "/runs.ipynb"
	code := func(id string) map[string]any {
		return map[string]any{"cell_type": "code", "id": id, "metadata": map[string]any{}, "execution_count": nil, "outputs": []any{}, "source": sources[id]}
	}
	api.call(t, http.MethodPut, "api/contents/"+nbPath, map[string]any{"type": "notebook", "format": "json", "content": map[string]any{
		"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{},
		"cells": []any{code("a"), code("b"), code("c"), map[string]any{"cell_type": "markdown", "id": "m", "metadata": map[string]any{}, "source": "notes"}},
	}}).want(t, http.StatusCreated)
	var fid struct {
		ID string `json:"id"`
	}
	api.getJSON(t, "api/fileid/id?path="+strings.ReplaceAll(nbPath, "/", "%2F"), &fid)
	doc := "json:notebook:" + fid.ID
	kernel := api.startKernel(t)
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + kernel) })
	route := "api/kernels/" + kernel + "/execute"
	cells := func(ids ...string) []map[string]string {
		var out []map[string]string
		for _, id := range ids {
			out = append(out, map[string]string{"cell_id": id, "source_hash": jupyter.SourceHash(sources[id])})
		}
		return out
	}

	edited := api.call(t, http.MethodPost, route, map[string]any{"document_id": doc,
		"cells": []map[string]string{{"cell_id": "a", "source_hash": jupyter.SourceHash("print('before the edit')")}}}).want(t, http.StatusConflict)
	var mismatch struct {
		Error  string `json:"error"`
		CellID string `json:"cell_id"`
	}
	edited.decode(t, &mismatch)
	if mismatch.Error != "source_mismatch" || mismatch.CellID != "a" {
		t.Errorf("409 body %s", edited.body)
	}
	api.call(t, http.MethodPost, route, map[string]any{"document_id": "json:notebook:no-such-id", "cells": cells("a")}).want(t, http.StatusBadRequest)
	api.call(t, http.MethodPost, route, map[string]any{"document_id": doc}).want(t, http.StatusBadRequest)
	api.call(t, http.MethodPost, "api/kernels/no-such-kernel/execute", map[string]any{"document_id": doc, "cells": cells("a")}).want(t, http.StatusNotFound)

	var wg sync.WaitGroup
	late := make(chan apiResponse, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		late <- api.call(t, http.MethodPost, route, map[string]any{"document_id": doc, "cells": cells("c"), "request_id": "late", "previous_request_id": "never-sent"})
	}()
	// Last first: each waits for its predecessor.
	answers := make([]apiResponse, 3)
	for i, r := range []struct {
		cell, id, prev string
	}{{"c", "r3", "r2"}, {"b", "r2", "r1"}, {"a", "r1", ""}} {
		wg.Add(1)
		body := map[string]any{"document_id": doc, "cells": cells(r.cell), "request_id": r.id + "-" + kernel}
		if r.prev != "" {
			body["previous_request_id"] = r.prev + "-" + kernel
		}
		go func() {
			defer wg.Done()
			answers[i] = api.call(t, http.MethodPost, route, body)
		}()
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusOK || strings.TrimSpace(string(a.body)) != "null" {
			t.Errorf("request %d: HTTP %d %s, want 200 null", 3-i, a.status, a.body)
		}
	}
	if l := <-late; l.status != http.StatusRequestTimeout {
		t.Errorf("a request whose predecessor never came: HTTP %d %s, want 408", l.status, l.body)
	}

	type cell struct {
		ID             string           `json:"id"`
		ExecutionCount *int             `json:"execution_count"`
		Outputs        []map[string]any `json:"outputs"`
	}
	var saved struct {
		Content struct {
			Cells []cell `json:"cells"`
		} `json:"content"`
	}
	testenv.Eventually(t, "every cell's run in the notebook", cellTimeout, func() error {
		api.call(t, http.MethodGet, "api/contents/"+nbPath, nil).want(t, http.StatusOK).decode(t, &saved)
		for _, c := range saved.Content.Cells[:3] {
			if c.ExecutionCount == nil || !strings.Contains(fmt.Sprint(c.Outputs), c.ID+" ran") {
				return fmt.Errorf("cell %+v", c)
			}
		}
		return nil
	})
	for i, c := range saved.Content.Cells[:3] {
		if *c.ExecutionCount != i+1 {
			t.Errorf("cell %s ran as %d, want %d: the requests came last first and ran in their order", c.ID, *c.ExecutionCount, i+1)
		}
	}
}
