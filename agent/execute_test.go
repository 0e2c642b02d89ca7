package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
)

func executeBody(t *testing.T, e agentapi.Execute) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Three requests that name their predecessors, sent last first: the agent sends their cells
// in the order the names give, writes every cell's outputs and count into the notebook with
// no client, and a client connected meanwhile follows each run by its msg_id.
func TestExecute_RequestsRunInTheirOrderAndTheirOutputsAreWritten(t *testing.T) {
	dir := t.TempDir()
	nb := writeNotebook(t, dir, "nb.ipynb",
		map[string]any{"id": "a", "cell_type": "code", "source": "import time; time.sleep(1); print('a ran')"},
		map[string]any{"id": "b", "cell_type": "code", "source": "print('b ran')"},
		map[string]any{"id": "c", "cell_type": "code", "source": "'c ran'"})
	ra := startAgent(t, func(c *Config) { c.ContentsDir = dir })
	watcher := ra.connect(t, "watcher", false)

	reqs := []agentapi.Execute{
		{Notebook: "nb.ipynb", RequestID: "r1", Cells: []agentapi.ExecuteCell{{CellID: "a", Code: "import time; time.sleep(1); print('a ran')"}}},
		{Notebook: "nb.ipynb", RequestID: "r2", PreviousRequestID: "r1", Cells: []agentapi.ExecuteCell{{CellID: "b", Code: "print('b ran')"}}},
		{Notebook: "nb.ipynb", RequestID: "r3", PreviousRequestID: "r2", Cells: []agentapi.ExecuteCell{{CellID: "c", Code: "'c ran'"}}},
	}
	var wg sync.WaitGroup
	status := make([]int, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status[i], _ = ra.post(t, testToken, agentapi.PathExecute, executeBody(t, reqs[i]))
		}()
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	for i, s := range status {
		if s != http.StatusNoContent {
			t.Errorf("request %d answered %d, want 204", i+1, s)
		}
	}
	watcher.waitOutput(agentapi.ExecuteMsgID("r1", "a"), "a ran")
	watcher.waitOutput(agentapi.ExecuteMsgID("r2", "b"), "b ran")

	testenv.Eventually(t, "every cell's run in the notebook", 30*time.Second, func() error {
		for _, id := range []string{"a", "b", "c"} {
			cell := storedCell(t, nb, id)
			outs, _ := cell["outputs"].([]any)
			if len(outs) == 0 || !strings.Contains(fmt.Sprint(outs), id+" ran") || cell["metadata"].(map[string]any)["nbkube"] != nil {
				return fmt.Errorf("cell %s: %v", id, cell)
			}
		}
		return nil
	})
	for i, id := range []string{"a", "b", "c"} {
		if got := storedCell(t, nb, id)["execution_count"]; got != float64(i+1) {
			t.Errorf("cell %s ran as %v, want %d: the requests' order is r1, r2, r3", id, got, i+1)
		}
	}
}

func TestExecute_RefusesWhatItCannotRun(t *testing.T) {
	dir := t.TempDir()
	writeNotebook(t, dir, "nb.ipynb", map[string]any{"id": "a", "cell_type": "code", "source": "1"})
	ra := startAgent(t, func(c *Config) { c.ContentsDir = dir })
	cells := []agentapi.ExecuteCell{{CellID: "a", Code: "1"}}
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"not JSON", "{", http.StatusBadRequest},
		{"no cells", executeBody(t, agentapi.Execute{Notebook: "nb.ipynb"}), http.StatusBadRequest},
		{"a path out of the contents", executeBody(t, agentapi.Execute{Notebook: "../x.ipynb", Cells: cells}), http.StatusBadRequest},
		{"a cell without its id", executeBody(t, agentapi.Execute{Notebook: "nb.ipynb", Cells: []agentapi.ExecuteCell{{Code: "1"}}}), http.StatusBadRequest},
		{"after itself", executeBody(t, agentapi.Execute{Notebook: "nb.ipynb", RequestID: "x", PreviousRequestID: "x", Cells: cells}), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, body := ra.post(t, testToken, agentapi.PathExecute, tc.body); got != tc.want {
				t.Errorf("answered %d %s, want %d", got, body, tc.want)
			}
		})
	}
	if got, _ := ra.post(t, "wrong", agentapi.PathExecute, executeBody(t, agentapi.Execute{Notebook: "nb.ipynb", Cells: cells})); got != http.StatusUnauthorized && got != http.StatusForbidden {
		t.Errorf("a wrong token answered %d", got)
	}
	start := time.Now()
	got, body := ra.post(t, testToken, agentapi.PathExecute, executeBody(t, agentapi.Execute{Notebook: "nb.ipynb", RequestID: "late", PreviousRequestID: "never", Cells: cells}))
	if got != http.StatusRequestTimeout || time.Since(start) < agentapi.ExecuteOrderWait {
		t.Errorf("a request whose predecessor never came answered %d %s after %s, want 408 after %s", got, body, time.Since(start), agentapi.ExecuteOrderWait)
	}
}
