package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/internal/wire"
)

// writeNotebook writes a notebook of cells (id, type, source, outputs) into dir as name.
func writeNotebook(t *testing.T, dir, name string, cells ...map[string]any) string {
	t.Helper()
	for _, c := range cells {
		c["metadata"] = map[string]any{}
		if c["cell_type"] == "code" {
			if _, ok := c["outputs"]; !ok {
				c["outputs"] = []any{}
			}
			if _, ok := c["execution_count"]; !ok {
				c["execution_count"] = nil
			}
		}
	}
	data, _ := json.MarshalIndent(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5}, "", " ")
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

// storedCell is the cell of id in the notebook file at p.
func storedCell(t *testing.T, p, id string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var nb struct{ Cells []map[string]any }
	if err := json.Unmarshal(data, &nb); err != nil {
		t.Fatalf("the notebook is no longer valid JSON: %v", err)
	}
	for _, c := range nb.Cells {
		if c["id"] == id {
			return c
		}
	}
	t.Fatalf("no cell %s in %s", id, data)
	return nil
}

// joined is a stored multi-line string (a list of lines) as one.
func joined(v any) string {
	var b strings.Builder
	for _, l := range v.([]any) {
		b.WriteString(l.(string))
	}
	return b.String()
}

func TestRecord_TheOutputsOfARunWhoseClientLeftAreWrittenIntoItsCell(t *testing.T) {
	dir := t.TempDir()
	code := "import time\nprint('first', flush=True)\ntime.sleep(3)\nfor i in range(3): print(i)\nprint('last')\n6 * 7"
	nb := writeNotebook(t, dir, "sub/nb.ipynb",
		map[string]any{"id": "c1", "cell_type": "code", "source": code},
		map[string]any{"id": "c2", "cell_type": "code", "source": []any{"x = 1"}, "execution_count": 4,
			"outputs": []any{map[string]any{"output_type": "stream", "name": "stdout", "text": []any{"kept\n"}}}},
		map[string]any{"id": "m", "cell_type": "markdown", "source": "# title"})
	untouched := storedCell(t, nb, "c2")
	ra := startAgent(t, func(c *Config) { c.ContentsDir = dir })

	cl := ra.connectWith(t, "s1", false, "&notebook=sub/nb.ipynb")
	cl.metadata = json.RawMessage(`{"cellId": "c1", "recordTiming": true}`)
	id := cl.sendExecute(code, false)
	cl.waitOutput(id, "first")
	// The tab is closed after the first line: the rest, and the result, only the agent sees.
	cl.ws.Close()

	// While it runs, the cell says so (a page that opens the notebook shows it running).
	testenv.Eventually(t, "the first line written, the cell marked running", 10*time.Second, func() error {
		cell := storedCell(t, nb, "c1")
		own, _ := cell["metadata"].(map[string]any)["nbkube"].(map[string]any)
		if outs, _ := cell["outputs"].([]any); len(outs) == 0 || own["running"] != id {
			return fmt.Errorf("cell %v", cell)
		}
		return nil
	})
	var cell map[string]any
	testenv.Eventually(t, "the run's outputs in the notebook", 20*time.Second, func() error {
		cell = storedCell(t, nb, "c1")
		if cell["execution_count"] == nil || len(cell["outputs"].([]any)) < 2 {
			return os.ErrNotExist
		}
		return nil
	})
	st := ra.status(t, "")
	fi, err := os.Stat(nb)
	if err != nil {
		t.Fatal(err)
	}
	// The last message is the idle status, which is the kernel's last activity.
	if late := fi.ModTime().Sub(st.LastActivity); late > time.Second {
		t.Errorf("written %s after the run's last message, want within 1 s", late)
	}
	// The status tells of the writes (as the kernel_status event outputs_written): the first
	// line with the running mark, then the rest.
	if w := st.OutputsWritten; w == nil || w.Notebook != "sub/nb.ipynb" || w.Cells != 1 || w.Writes < 2 ||
		w.At.Sub(fi.ModTime()).Abs() > time.Second {
		t.Errorf("the status tells of the last write %+v, want sub/nb.ipynb, 1 cell, 2 writes or more, at %s", w, fi.ModTime())
	}
	outputs := cell["outputs"].([]any)
	stream, result := outputs[0].(map[string]any), outputs[1].(map[string]any)
	if stream["output_type"] != "stream" || stream["name"] != "stdout" || joined(stream["text"]) != "first\n0\n1\n2\nlast\n" {
		t.Errorf("stream output %v", stream)
	}
	if result["output_type"] != "execute_result" || joined(result["data"].(map[string]any)["text/plain"]) != "42" ||
		result["execution_count"] != float64(1) {
		t.Errorf("result %v", result)
	}
	if cell["execution_count"] != float64(1) {
		t.Errorf("execution_count %v, want 1", cell["execution_count"])
	}
	if own, ok := cell["metadata"].(map[string]any)["nbkube"]; ok {
		t.Errorf("the run ended, and its cell still says %v", own)
	}
	timing, _ := cell["metadata"].(map[string]any)["execution"].(map[string]any)
	for _, k := range []string{"iopub.status.busy", "iopub.execute_input", "iopub.status.idle"} {
		if timing[k] == nil {
			t.Errorf("no %s in the timing record %v", k, timing)
		}
	}
	if got := storedCell(t, nb, "c2"); !reflect.DeepEqual(got, untouched) {
		t.Errorf("a cell that did not run changed: %v, was %v", got, untouched)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the notebook's 0640", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "sub", ".~*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestRecord_NothingIsWrittenForAClientThatStaysOrACellEditedSince(t *testing.T) {
	dir := t.TempDir()
	nb := writeNotebook(t, dir, "nb.ipynb",
		map[string]any{"id": "c1", "cell_type": "code", "source": "print('stays')"},
		map[string]any{"id": "c2", "cell_type": "code", "source": "print('edited since')"})
	before, _ := os.ReadFile(nb)
	ra := startAgent(t, func(c *Config) { c.ContentsDir = dir })

	cl := ra.connectWith(t, "s1", false, "&notebook=nb.ipynb")
	cl.metadata = json.RawMessage(`{"cellId": "c1"}`)
	if r := cl.execute("print('stays')"); !strings.Contains(r.streams(), "stays") {
		t.Fatalf("ran %v", r.streams())
	}
	cl.ws.Close()
	// Another client runs c2 with code that is no longer the cell's, and leaves.
	other := ra.connectWith(t, "s2", false, "&notebook=nb.ipynb")
	other.metadata = json.RawMessage(`{"cellId": "c2"}`)
	id := other.sendExecute("import time; time.sleep(0.5); print('old')", false)
	other.ws.Close()
	_ = id
	testenv.Eventually(t, "the kernel to be idle again", 20*time.Second, func() error {
		if st := ra.status(t, ""); st.ExecutionState != "idle" || time.Since(st.LastActivity) < 2*time.Second {
			return os.ErrDeadlineExceeded
		}
		return nil
	})
	if after, _ := os.ReadFile(nb); string(after) != string(before) {
		t.Errorf("the notebook changed:\n%s", after)
	}
	if w := ra.status(t, "").OutputsWritten; w != nil {
		t.Errorf("the status tells of a write that did not happen: %+v", w)
	}
}

// iopubMsg is an iopub message of msgType with content, as the kernel sends it.
func iopubMsg(msgType, content string) *wire.Message {
	return &wire.Message{Channel: wire.IOPub, Header: json.RawMessage(`{"msg_type":"` + msgType + `"}`), Content: json.RawMessage(content)}
}

func TestRecord_OutputsFoldAsAFrontEndShowsThem(t *testing.T) {
	run := &cellRun{}
	run.fold([]*wire.Message{
		iopubMsg("stream", `{"name":"stdout","text":"gone"}`),
		iopubMsg("clear_output", `{"wait":false}`),
		iopubMsg("stream", `{"name":"stdout","text":"a"}`),
		iopubMsg("stream", `{"name":"stdout","text":"b\n"}`),
		iopubMsg("stream", `{"name":"stderr","text":"e\n"}`),
		iopubMsg("display_data", `{"data":{"text/plain":"v1"},"metadata":{},"transient":{"display_id":"d"}}`),
		iopubMsg("update_display_data", `{"data":{"text/plain":"v2"},"metadata":{"m":1},"transient":{"display_id":"d"}}`),
	})
	run.fold([]*wire.Message{iopubMsg("stream", `{"name":"stderr","text":"f\n"}`)})
	got, _ := json.Marshal(run.cellRun(runSnapshot{}).Outputs)
	want := `[{"name":"stdout","output_type":"stream","text":"ab\n"},{"name":"stderr","output_type":"stream","text":"e\n"},` +
		`{"data":{"text/plain":"v2"},"metadata":{"m":1},"output_type":"display_data"},{"name":"stderr","output_type":"stream","text":"f\n"}]`
	if string(got) != want {
		t.Errorf("outputs\n%s\nwant\n%s", got, want)
	}
	// clear_output(wait=True) clears at the next output, not before.
	run.fold([]*wire.Message{iopubMsg("clear_output", `{"wait":true}`)})
	if len(run.outputs) != 4 {
		t.Errorf("cleared before the next output: %v", run.outputs)
	}
	run.fold([]*wire.Message{iopubMsg("stream", `{"name":"stdout","text":"new"}`)})
	if got, _ := json.Marshal(run.cellRun(runSnapshot{}).Outputs); string(got) != `[{"name":"stdout","output_type":"stream","text":"new"}]` {
		t.Errorf("after the wait clear: %s", got)
	}
}

func TestContentsDirOf_GoesUpAsFarAsTheKernelPathGoesDown(t *testing.T) {
	for _, tc := range []struct{ wd, path, want string }{
		{"/home/jovyan/work", "", "/home/jovyan/work"},
		{"/home/jovyan/work/a/b", "a/b", "/home/jovyan/work"},
		{"/srv/data/ann/nb", "nb", "/srv/data/ann"},
		{"/srv/data/ann/xnb", "nb", ""},
		{"/srv/other", "a/b", ""},
	} {
		if got := contentsDirOf(tc.wd, tc.path); got != tc.want {
			t.Errorf("contentsDirOf(%q, %q) = %q, want %q", tc.wd, tc.path, got, tc.want)
		}
	}
}

func TestRecord_ARunPastWhatIsKeptSaysSoInItsCell(t *testing.T) {
	a := &Agent{}
	a.rec = &recorder{limit: 1 << 20, runs: map[string]*cellRun{}, wake: make(chan struct{}, 1)}
	run := &cellRun{msgID: "m1", cellID: "c", sess: &clientSession{}}
	a.rec.runs["m1"], a.rec.order = run, []*cellRun{run}
	parent := wire.Header{MsgID: "m1"}
	line := iopubMsg("stream", `{"name":"stdout","text":"`+strings.Repeat("x", 99)+`\n"}`)
	for range 100 {
		a.recordLocked(line, wire.Header{MsgType: "stream"}, parent)
	}
	if run.truncated || len(run.pending) != 100 {
		t.Fatalf("truncated %v with %d of 100 messages kept, within the bounds", run.truncated, len(run.pending))
	}
	a.rec.limit = a.rec.bytes + messageSize(line)/2 // the agent's share is spent
	a.recordLocked(line, wire.Header{MsgType: "stream"}, parent)
	if !run.truncated || len(run.pending) != 100 {
		t.Fatalf("truncated %v with %d messages kept, past the agent's share", run.truncated, len(run.pending))
	}
	run.fold(run.pending)
	written := run.cellRun(runSnapshot{truncated: true})
	last := written.Outputs[len(written.Outputs)-1].(map[string]any)
	if len(written.Outputs) != 2 || last["name"] != "stderr" || !strings.Contains(last["text"].(string), "not written") {
		t.Errorf("outputs %v, want the stream and a word that the rest was not written", written.Outputs)
	}
	a.forgetRunLocked(run)
	if a.rec.bytes != 0 {
		t.Errorf("%d bytes still counted after the run was forgotten", a.rec.bytes)
	}
}

func TestRecord_ARunWhoseKernelDiesIsWrittenAsFarAsItGot(t *testing.T) {
	dir := t.TempDir()
	code := "print('before', flush=True)\nimport os, time\ntime.sleep(0.5)\nos._exit(1)"
	nb := writeNotebook(t, dir, "nb.ipynb", map[string]any{"id": "c1", "cell_type": "code", "source": code})
	ra := startAgent(t, func(c *Config) { c.ContentsDir = dir })
	cl := ra.connectWith(t, "s1", false, "&notebook=nb.ipynb")
	cl.metadata = json.RawMessage(`{"cellId": "c1"}`)
	id := cl.sendExecute(code, false)
	cl.waitOutput(id, "before")
	cl.ws.Close()
	testenv.Eventually(t, "the run's output so far in the notebook", 20*time.Second, func() error {
		cell := storedCell(t, nb, "c1")
		if cell["execution_count"] == nil || len(cell["outputs"].([]any)) != 1 {
			return os.ErrNotExist
		}
		if out := cell["outputs"].([]any)[0].(map[string]any); joined(out["text"]) != "before\n" {
			t.Fatalf("output %v", out)
		}
		return nil
	})
	// The kernel is started again, and runs the next cell as usual.
	testenv.Eventually(t, "the kernel restarted", 30*time.Second, func() error {
		if st := ra.status(t, ""); st.RestartCount != 1 || st.ExecutionState != "idle" {
			return os.ErrNotExist
		}
		return nil
	})
}

func TestRecord_ANotebookRenamedMidRunIsWrittenUnderItsNewName(t *testing.T) {
	dir := t.TempDir()
	code := "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')"
	writeNotebook(t, dir, "old.ipynb", map[string]any{"id": "c1", "cell_type": "code", "source": code})
	ra := startAgent(t, func(c *Config) { c.ContentsDir = dir })
	cl := ra.connectWith(t, "s1", false, "&notebook=old.ipynb")
	cl.metadata = json.RawMessage(`{"cellId": "c1"}`)
	id := cl.sendExecute(code, false)
	cl.waitOutput(id, "first")
	if err := os.Rename(filepath.Join(dir, "old.ipynb"), filepath.Join(dir, "new.ipynb")); err != nil {
		t.Fatal(err)
	}
	move := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ra.addr+agentapi.PathNotebook, strings.NewReader(body))
		req.Header.Set("Authorization", agentapi.AuthScheme+" "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{`{"from": "old.ipynb", "to": "../x.ipynb"}`, `{"from": "old.ipynb", "to": "/abs.ipynb"}`, `{"from": "old.ipynb"}`, `[`} {
		if code := move(bad); code != http.StatusBadRequest {
			t.Errorf("move %s: HTTP %d, want 400", bad, code)
		}
	}
	if code := move(`{"from": "old.ipynb", "to": "new.ipynb"}`); code != http.StatusNoContent {
		t.Fatalf("move: HTTP %d", code)
	}
	cl.ws.Close()
	testenv.Eventually(t, "the run in the renamed notebook", 20*time.Second, func() error {
		cell := storedCell(t, filepath.Join(dir, "new.ipynb"), "c1")
		if cell["execution_count"] == nil || len(cell["outputs"].([]any)) != 1 || joined(cell["outputs"].([]any)[0].(map[string]any)["text"]) != "first\nsecond\n" {
			return os.ErrNotExist
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "old.ipynb")); !os.IsNotExist(err) {
		t.Errorf("a notebook was made under the old name: %v", err)
	}
}

func TestRecord_ARequestSentAgainUnderItsIDIsOneRun(t *testing.T) {
	a := &Agent{}
	a.rec = &recorder{limit: 1 << 20, runs: map[string]*cellRun{}, wake: make(chan struct{}, 1)}
	c := &conn{notebook: "nb.ipynb", sess: &clientSession{}}
	m := &wire.Message{Metadata: json.RawMessage(`{"cellId": "c1"}`), Content: json.RawMessage(`{"code": "1"}`)}
	a.startRunLocked(c, wire.Header{MsgID: "m1"}, m)
	first := a.rec.runs["m1"]
	a.startRunLocked(c, wire.Header{MsgID: "m1"}, m)
	if second := a.rec.runs["m1"]; second == nil || second == first || len(a.rec.order) != 1 || a.rec.order[0] != second {
		t.Fatalf("runs %v, order %v: want the second request's run alone", a.rec.runs, a.rec.order)
	}
	a.forgetRunLocked(first) // the old one, gone already, takes nothing with it
	if a.rec.runs["m1"] == nil {
		t.Error("forgetting the replaced run forgot the new one")
	}
}
