package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// testOutputsOutliveTheClient runs a cell of a notebook's session over the channels, as
// JupyterLab runs it (the cell's id in the request), renames the notebook after the first
// line and closes the connection: the rest of the output, the result and the execution count
// are in the renamed notebook on the volume within a second of the kernel's last message,
// and a page that saves the copy it had is refused (409) instead of discarding them. It
// returns the notebook's path, which its cleanup deletes.
func testOutputsOutliveTheClient(t *testing.T, _ deployment, api *jupyterAPI) {
	outputsOutliveTheClient(t, api)
}

func outputsOutliveTheClient(t *testing.T, api *jupyterAPI) string {
	dir := "outputs-" + randomID()[:8]
	t.Cleanup(func() { api.deleteQuietly("api/contents/" + dir) })
	api.call(t, http.MethodPut, "api/contents/"+dir, map[string]string{"type": "directory"}).want(t, http.StatusCreated)
	code := "import time\nprint('first', flush=True)\ntime.sleep(1)\nfor i in range(3): print(i)\nprint('last')\n6 * 7"
	nbPath := dir + "/long run.ipynb"
	api.call(t, http.MethodPut, "api/contents/"+nbPath, map[string]any{"type": "notebook", "format": "json", "content": map[string]any{
		"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{},
		"cells": []any{
			map[string]any{"cell_type": "code", "id": "long", "metadata": map[string]any{}, "execution_count": nil, "outputs": []any{}, "source": code},
			map[string]any{"cell_type": "markdown", "id": "notes", "metadata": map[string]any{}, "source": "kept as it is"},
		},
	}}).want(t, http.StatusCreated)
	opened := api.call(t, http.MethodGet, "api/contents/"+nbPath, nil).want(t, http.StatusOK)
	etag := opened.header.Get("ETag")

	var session struct {
		ID     string `json:"id"`
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	api.call(t, http.MethodPost, "api/sessions", map[string]any{"path": nbPath, "type": "notebook", "name": "long run.ipynb",
		"kernel": map[string]any{"name": "python3"}}).want(t, http.StatusCreated).decode(t, &session)
	t.Cleanup(func() {
		api.deleteQuietly("api/sessions/" + session.ID)
		api.deleteQuietly("api/kernels/" + session.Kernel.ID)
	})

	ws := dialJupyterWS(t, api, "api/kernels/"+session.Kernel.ID+"/channels", "outputs-"+randomID())
	ws.await(jpclient.NewExecution(ws.askKernelInfo()), cellTimeout, "kernel_info", (*jpclient.Execution).Replied)
	id, err := ws.SendCell("long", code)
	if err != nil {
		t.Fatal(err)
	}
	run := jpclient.NewExecution(id)
	ws.await(run, cellTimeout, "the first line", func(e *jpclient.Execution) bool { return strings.Contains(e.Stdout.String(), "first") })
	// The user renames the notebook while the cell runs, as JupyterLab does it (the file,
	// then the session), and closes the tab.
	oldPath := nbPath
	nbPath = dir + "/renamed run.ipynb"
	api.call(t, http.MethodPatch, "api/contents/"+oldPath, map[string]string{"path": nbPath}).want(t, http.StatusOK)
	api.call(t, http.MethodPatch, "api/sessions/"+session.ID, map[string]string{"path": nbPath, "name": "renamed run.ipynb"}).want(t, http.StatusOK)
	ws.close()

	type cell struct {
		ID             string           `json:"id"`
		Source         string           `json:"source"`
		ExecutionCount *int             `json:"execution_count"`
		Outputs        []map[string]any `json:"outputs"`
		Metadata       struct {
			Execution map[string]string `json:"execution"`
		} `json:"metadata"`
	}
	var saved struct {
		LastModified time.Time `json:"last_modified"`
		Content      struct {
			Cells []cell `json:"cells"`
		} `json:"content"`
	}
	var long cell
	testenv.Eventually(t, "the whole run in the notebook", cellTimeout, func() error {
		api.call(t, http.MethodGet, "api/contents/"+nbPath, nil).want(t, http.StatusOK).decode(t, &saved)
		if len(saved.Content.Cells) != 2 {
			return fmt.Errorf("cells %+v", saved.Content.Cells)
		}
		long = saved.Content.Cells[0]
		// The run's end (the kernel's idle status, its last message) is written too.
		if long.ExecutionCount == nil || len(long.Outputs) < 2 || long.Metadata.Execution["iopub.status.idle"] == "" {
			return fmt.Errorf("cell %+v", long)
		}
		return nil
	})
	if *long.ExecutionCount != 1 || long.Source != code {
		t.Errorf("execution_count %d, source %q", *long.ExecutionCount, long.Source)
	}
	stream, result := long.Outputs[0], long.Outputs[1]
	if len(long.Outputs) != 2 || stream["output_type"] != "stream" || stream["text"] != "first\n0\n1\n2\nlast\n" ||
		result["output_type"] != "execute_result" || fmt.Sprint(result["data"]) != "map[text/plain:42]" {
		t.Errorf("outputs %v, want the whole stream and the result", long.Outputs)
	}
	if notes := saved.Content.Cells[1]; notes.ID != "notes" || notes.Source != "kept as it is" {
		t.Errorf("the other cell became %+v", notes)
	}
	// The kernel's clock dated its idle status, the volume's the file: one machine here.
	idle, err := time.Parse(time.RFC3339Nano, long.Metadata.Execution["iopub.status.idle"])
	if err != nil {
		t.Fatalf("timing record %v: %v", long.Metadata.Execution, err)
	}
	if late := saved.LastModified.Sub(idle); late > time.Second {
		t.Errorf("written %s after the kernel's last message (idle at %s), want within 1 s", late, idle)
	}
	t.Logf("outputs written %s after the kernel went idle", saved.LastModified.Sub(idle))

	// The page that ran it stayed open somewhere with its copy from before: its save is
	// refused, not stored over the outputs.
	stale := api.request(t, http.MethodPut, "api/contents/"+nbPath, map[string]any{"type": "notebook", "format": "json",
		"content": map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{}, "cells": []any{}}})
	stale.Header.Set("If-Match", etag)
	api.do(t, stale).want(t, http.StatusConflict)
	return nbPath
}

// TestSandbox_OutputsOfARunWhoseClientLeftReachTheUsersNotebook is the case under a node that
// sandboxes pods: ann's agent writes into her home as the kernel writes there, and the file
// stays hers on the machine.
func TestSandbox_OutputsOfARunWhoseClientLeftReachTheUsersNotebook(t *testing.T) {
	_, as, _, root := startSandboxedUsers(t)
	nbPath := outputsOutliveTheClient(t, as("ann"))
	home, err := os.Stat(filepath.Join(root, "ann"))
	if err != nil {
		t.Fatal(err)
	}
	nb, err := os.Stat(filepath.Join(root, "ann", nbPath))
	if err != nil {
		t.Fatal(err)
	}
	owner := func(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
	if owner(nb) != owner(home) {
		t.Errorf("the notebook the agent wrote belongs to uid %d, her home to %d", owner(nb), owner(home))
	}
}
