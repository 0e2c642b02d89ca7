package nbformat

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// CellRun is one run of a code cell, to be written into its notebook: the code the kernel ran
// and what came of it.
type CellRun struct {
	CellID string
	// Source is the code that ran: a stored cell whose source differs is left alone.
	Source string
	// ExecutionCount is the run's execution count; nil writes null (the kernel has not
	// started the run).
	ExecutionCount *int
	// Outputs are the run's outputs as OutputFromMsg makes them, strings whole (they are
	// split into lines as nbformat stores them).
	Outputs []any
	// Execution, when not nil, becomes the cell's metadata.execution: the timing record
	// JupyterLab keeps when asked to (recordTiming).
	Execution map[string]any
	// Running, when not empty, is the msg_id of the run's execute_request while the kernel
	// still runs it: metadata.nbkube.running says so, for a page that opens the notebook
	// meanwhile (it shows the cell running, and the run's further output as it comes). A
	// run written once it ended takes the key away.
	Running string
}

// RunningKey is where a cell's metadata says that a run of it is still going: under
// metadata.nbkube, nbkube's own (JupyterLab keeps what it does not know).
const RunningKey = "running"

// PutRuns writes runs into data, a stored nbformat 4 notebook: each into the code cell of its
// id whose source is the run's. It returns the notebook as nbformat.write stores it, and the
// ids of the cells written; nil and none when no run found its cell, which leaves the file
// as it is. Everything but the cells written keeps its bytes' meaning (keys sorted and lines
// split as every save does). A notebook that is not readable nbformat 4 is refused with
// domainerr.ErrInvalid.
func PutRuns(data []byte, runs []CellRun) ([]byte, []string, error) {
	small, e := elideLargeStrings(data)
	nb, err := decodeNotebook(small)
	if err != nil {
		return nil, nil, err
	}
	major, minor := version(nb)
	if major != nbformatMajor {
		return nil, nil, domainerr.New(domainerr.ErrInvalid, "outputs are written into nbformat 4 notebooks only, not %v", nb["nbformat"])
	}
	cells, _ := nb["cells"].([]any)
	byID := make(map[string]map[string]any, len(cells))
	for _, c := range cells {
		if cell, ok := c.(map[string]any); ok {
			if id, ok := cell["id"].(string); ok {
				if _, dup := byID[id]; !dup {
					byID[id] = cell
				}
			}
		}
	}
	var written []string
	for _, r := range runs {
		cell := byID[r.CellID]
		if cell == nil || cell["cell_type"] != "code" || sourceOf(cell["source"], e) != r.Source {
			continue
		}
		// A copy: writing splits its strings into lines, and the caller's stay whole.
		outputs := []any{}
		if r.Outputs != nil {
			outputs = deepCopyJSON(r.Outputs).([]any)
		}
		cell["outputs"] = outputs
		if r.ExecutionCount != nil {
			cell["execution_count"] = json.Number(strconv.Itoa(*r.ExecutionCount))
		} else {
			cell["execution_count"] = nil
		}
		md, ok := cell["metadata"].(map[string]any)
		if !ok {
			md = map[string]any{}
			cell["metadata"] = md
		}
		if r.Execution != nil {
			md["execution"] = deepCopyJSON(r.Execution)
		}
		setRunning(md, r.Running)
		written = append(written, r.CellID)
	}
	if len(written) == 0 {
		return nil, nil, nil
	}
	// What a save does to the notebook, without the validation: these are the stored cells
	// with the kernel's own outputs in them.
	if minor >= 5 {
		normalizeIDs(nb)
	}
	stripTransient(nb)
	splitLines(nb)
	return appendNotebookElided(make([]byte, 0, len(data)+len(data)/8+4096), nb, e), written, nil
}

// setRunning sets or takes away metadata.nbkube.running, and metadata.nbkube with the last
// of its keys.
func setRunning(md map[string]any, msgID string) {
	own, _ := md["nbkube"].(map[string]any)
	if msgID != "" {
		if own == nil {
			own = map[string]any{}
			md["nbkube"] = own
		}
		own[RunningKey] = msgID
		return
	}
	if own == nil {
		return
	}
	delete(own, RunningKey)
	if len(own) == 0 {
		delete(md, "nbkube")
	}
}

// sourceOf is a stored cell's source as one string (nbformat stores a string or a list of
// lines), its elided parts restored.
func sourceOf(v any, e *elided) string {
	str := func(x any) string {
		s, _ := x.(string)
		if span, ok := e.span(s); ok {
			return string(span[1 : len(span)-1])
		}
		return s
	}
	if lines, ok := v.([]any); ok {
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(str(l))
		}
		return b.String()
	}
	return str(v)
}

// OutputFromMsg is nbformat.v4.output_from_msg: the notebook output an iopub message of
// msgType with content (its JSON) stands for; ok is false for messages that are no output
// (status, execute_input, clear_output, update_display_data, ...). Its values decode as a
// stored notebook's do (numbers as written).
func OutputFromMsg(msgType string, content []byte) (out map[string]any, ok bool, err error) {
	var keys []string
	switch msgType {
	case "execute_result":
		keys = []string{"execution_count", "data", "metadata"}
	case "display_data":
		keys = []string{"data", "metadata"}
	case "stream":
		keys = []string{"name", "text"}
	case "error":
		keys = []string{"ename", "evalue", "traceback"}
	default:
		return nil, false, nil
	}
	v, err := decodeJSON(content)
	if err != nil {
		return nil, false, err
	}
	c, _ := v.(map[string]any)
	out = map[string]any{"output_type": msgType}
	for _, k := range keys {
		x, present := c[k]
		switch {
		case present:
			out[k] = x
		case k == "data" || k == "metadata":
			out[k] = map[string]any{}
		case k == "traceback":
			out[k] = []any{}
		case k == "execution_count":
			out[k] = nil
		default:
			out[k] = ""
		}
	}
	return out, true, nil
}
