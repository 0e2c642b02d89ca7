package nbformat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestPutRuns_WritesOnlyTheCellsWhoseIDAndSourceMatch(t *testing.T) {
	png := strings.Repeat("iVBORw0KGgo", 1000) // elided on reading: kept byte for byte
	stored := `{"cells": [
	  {"cell_type": "code", "id": "a", "source": ["for i in range(2):\n", "    print(i)"], "metadata": {"tags": ["x"]}, "outputs": [], "execution_count": null},
	  {"cell_type": "code", "id": "b", "source": "1 + 1", "metadata": {}, "outputs": [{"output_type": "stream", "name": "stdout", "text": "old"}], "execution_count": 7},
	  {"cell_type": "code", "id": "p", "source": "plot()", "metadata": {}, "execution_count": 2,
	   "outputs": [{"output_type": "display_data", "data": {"image/png": "` + png + `"}, "metadata": {}}]},
	  {"cell_type": "markdown", "id": "m", "source": "print(1)", "metadata": {}}
	 ], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}}, "nbformat": 4, "nbformat_minor": 5}`
	count := 3
	stream, _, err := OutputFromMsg("stream", []byte(`{"name": "stdout", "text": "0\n1\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	result, _, _ := OutputFromMsg("execute_result", []byte(`{"execution_count": 3, "data": {"text/plain": "2"}, "metadata": {}, "transient": {}}`))
	got, written, err := PutRuns([]byte(stored), []CellRun{
		{CellID: "a", Source: "for i in range(2):\n    print(i)", ExecutionCount: &count, Outputs: []any{stream, result},
			Execution: map[string]any{"iopub.status.busy": "2026-12-03T07:00:00.000Z"}},
		{CellID: "b", Source: "1 + 2", ExecutionCount: &count},       // edited since it ran
		{CellID: "m", Source: "print(1)", ExecutionCount: &count},    // not code
		{CellID: "gone", Source: "print(1)", ExecutionCount: &count}, // deleted
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, whole := stream["text"].(string); !whole {
		t.Errorf("the caller's output was split into lines: %v", stream)
	}
	if strings.Join(written, ",") != "a" {
		t.Fatalf("written = %v, want [a]", written)
	}
	// What a save of the notebook with those outputs in cell a stores.
	var want map[string]any
	if err := json.Unmarshal([]byte(stored), &want); err != nil {
		t.Fatal(err)
	}
	a := want["cells"].([]any)[0].(map[string]any)
	a["execution_count"] = 3
	a["metadata"].(map[string]any)["execution"] = map[string]any{"iopub.status.busy": "2026-12-03T07:00:00.000Z"}
	a["outputs"] = []any{
		map[string]any{"output_type": "stream", "name": "stdout", "text": "0\n1\n"},
		map[string]any{"output_type": "execute_result", "execution_count": 3, "data": map[string]any{"text/plain": "2"}, "metadata": map[string]any{}},
	}
	wantJSON, _ := json.Marshal(want)
	wantFile, msg, err := encodeNotebook(wantJSON)
	if err != nil || msg != "" {
		t.Fatalf("the expected notebook: %v %s", err, msg)
	}
	if !bytes.Equal(got, wantFile) {
		t.Errorf("PutRuns wrote\n%s\nwant\n%s", got, wantFile)
	}
}

func TestPutRuns_LeavesTheFileAloneWhenNoCellMatches(t *testing.T) {
	got, written, err := PutRuns([]byte(emptyNotebook), []CellRun{{CellID: "a", Source: "1"}})
	if got != nil || written != nil || err != nil {
		t.Errorf("PutRuns = %q, %v, %v; want nothing to write", got, written, err)
	}
	if _, _, err := PutRuns([]byte(`{"nbformat": 3, "worksheets": []}`), nil); err == nil {
		t.Error("a v3 notebook was written into")
	}
	if _, _, err := PutRuns([]byte(`{"cells": [`), nil); err == nil {
		t.Error("a broken notebook was written into")
	}
}

func TestOutputFromMsg_IsNbformatsOutputFromMsg(t *testing.T) {
	for _, tc := range []struct {
		typ, content, want string
	}{
		{"stream", `{"name": "stderr", "text": "x"}`, `{"name":"stderr","output_type":"stream","text":"x"}`},
		{"display_data", `{"data": {"text/plain": "1"}, "metadata": {}, "transient": {"display_id": "d"}}`,
			`{"data":{"text/plain":"1"},"metadata":{},"output_type":"display_data"}`},
		{"execute_result", `{"execution_count": 4, "data": {}, "metadata": {"m": 1.50}}`,
			`{"data":{},"execution_count":4,"metadata":{"m":1.50},"output_type":"execute_result"}`},
		{"error", `{"ename": "E", "evalue": "v", "traceback": ["t"], "status": "error"}`,
			`{"ename":"E","evalue":"v","output_type":"error","traceback":["t"]}`},
	} {
		out, ok, err := OutputFromMsg(tc.typ, []byte(tc.content))
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", tc.typ, ok, err)
		}
		got, _ := json.Marshal(out)
		if string(got) != tc.want {
			t.Errorf("%s: %s, want %s", tc.typ, got, tc.want)
		}
	}
	for _, typ := range []string{"status", "execute_input", "clear_output", "update_display_data", "comm_msg"} {
		if _, ok, _ := OutputFromMsg(typ, []byte(`{}`)); ok {
			t.Errorf("%s made an output", typ)
		}
	}
}

// A run still going marks its cell (metadata.nbkube.running, the request's msg_id) beside
// what the cell's metadata has; the run written once it ended takes the mark away, and
// metadata.nbkube with its last key.
func TestPutRuns_MarksACellWhileItsRunGoesOn(t *testing.T) {
	nb := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
		{"id": "a", "cell_type": "code", "source": "1", "metadata": {"tags": ["t"], "nbkube": {"other": 1}}, "outputs": [], "execution_count": null},
		{"id": "b", "cell_type": "code", "source": "2", "metadata": {}, "outputs": [], "execution_count": null}]}`
	md := func(data []byte, id string) map[string]any {
		t.Helper()
		var doc struct {
			Cells []map[string]any `json:"cells"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		for _, c := range doc.Cells {
			if c["id"] == id {
				return c["metadata"].(map[string]any)
			}
		}
		t.Fatalf("no cell %s", id)
		return nil
	}
	running, _, err := PutRuns([]byte(nb), []CellRun{{CellID: "a", Source: "1", Running: "m1"}, {CellID: "b", Source: "2", Running: "m2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := md(running, "a"); fmt.Sprint(got["nbkube"]) != "map[other:1 running:m1]" || got["tags"] == nil {
		t.Errorf("a's metadata while it runs: %v", got)
	}
	if got := md(running, "b"); fmt.Sprint(got["nbkube"]) != "map[running:m2]" {
		t.Errorf("b's metadata while it runs: %v", got)
	}
	ended, _, err := PutRuns(running, []CellRun{{CellID: "a", Source: "1"}, {CellID: "b", Source: "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := md(ended, "a"); fmt.Sprint(got["nbkube"]) != "map[other:1]" {
		t.Errorf("a's metadata once ended: %v", got)
	}
	if got := md(ended, "b"); got["nbkube"] != nil {
		t.Errorf("b's metadata once ended: %v", got)
	}
}
