package agent

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/nbkube/nbkube/internal/nbformat"
	"github.com/nbkube/nbkube/internal/wire"
)

// What a run's output messages come to in the notebook (record.go keeps and writes them).

// fold turns output messages into the run's outputs, as a notebook front end shows them:
// consecutive stream text of one name merged, clear_output honoured (with wait, at the next
// output), display updates applied to the outputs of their display id.
func (run *cellRun) fold(msgs []*wire.Message) {
	for _, m := range msgs {
		h, _ := wire.ParseDecodedHeader(m.Header)
		switch h.MsgType {
		case "clear_output":
			var c struct {
				Wait bool `json:"wait"`
			}
			_ = json.Unmarshal(m.Content, &c)
			if c.Wait {
				run.clearWait = true
			} else {
				run.clear()
			}
			continue
		case "update_display_data":
			var c struct {
				Data      json.RawMessage `json:"data"`
				Metadata  json.RawMessage `json:"metadata"`
				Transient struct {
					DisplayID string `json:"display_id"`
				} `json:"transient"`
			}
			if json.Unmarshal(m.Content, &c) != nil {
				continue
			}
			upd, ok, err := nbformat.OutputFromMsg("display_data", m.Content)
			if err != nil || !ok {
				continue
			}
			for _, i := range run.displays[c.Transient.DisplayID] {
				out := run.outputs[i].(map[string]any)
				out["data"], out["metadata"] = upd["data"], upd["metadata"]
			}
			continue
		}
		out, ok, err := nbformat.OutputFromMsg(h.MsgType, m.Content)
		if err != nil || !ok {
			continue
		}
		if run.clearWait {
			run.clear()
		}
		if h.MsgType == "stream" && len(run.outputs) > 0 {
			i := len(run.outputs) - 1
			last, _ := run.outputs[i].(map[string]any)
			if last["output_type"] == "stream" && last["name"] == out["name"] {
				b := run.texts[i]
				if b == nil {
					b = &strings.Builder{}
					prev, _ := last["text"].(string)
					b.WriteString(prev)
					if run.texts == nil {
						run.texts = map[int]*strings.Builder{}
					}
					run.texts[i] = b
				}
				text, _ := out["text"].(string)
				b.WriteString(text)
				continue
			}
		}
		if h.MsgType == "display_data" {
			var c struct {
				Transient struct {
					DisplayID string `json:"display_id"`
				} `json:"transient"`
			}
			if json.Unmarshal(m.Content, &c) == nil && c.Transient.DisplayID != "" {
				if run.displays == nil {
					run.displays = map[string][]int{}
				}
				run.displays[c.Transient.DisplayID] = append(run.displays[c.Transient.DisplayID], len(run.outputs))
			}
		}
		run.outputs = append(run.outputs, out)
	}
}

// clear forgets the outputs so far (clear_output).
func (run *cellRun) clear() {
	run.outputs, run.displays, run.texts, run.clearWait = nil, nil, nil, false
}

// cellRun is what is written of the run.
func (run *cellRun) cellRun(s runSnapshot) nbformat.CellRun {
	outputs := run.outputs
	if len(run.texts) > 0 {
		outputs = slices.Clone(outputs)
		for i, b := range run.texts {
			merged := maps.Clone(outputs[i].(map[string]any))
			merged["text"] = b.String()
			outputs[i] = merged
		}
	}
	if s.truncated {
		outputs = append(outputs[:len(outputs):len(outputs)], map[string]any{"output_type": "stream", "name": "stderr",
			"text": "[nbkube: the rest of this cell's output was not written: it passed what the kernel's agent keeps of a run whose client is away]\n"})
	}
	r := nbformat.CellRun{CellID: run.cellID, Source: run.code, ExecutionCount: s.count, Outputs: outputs, Execution: s.execution}
	if !s.finished {
		r.Running = run.msgID
	}
	return r
}
