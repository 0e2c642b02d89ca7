package nbconvert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nbkube/nbkube/internal/nbformat"
)

// exportNotebook is nbconvert's "notebook": the notebook as nbformat writes it (the encoding
// the contents store saves), after the stream outputs every exporter coalesces. Write's
// validation is not run: the export is the same whatever its verdict.
func exportNotebook(ctx context.Context, data []byte, limit int) (*Result, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var nb map[string]any
	if err := dec.Decode(&nb); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cells, _ := nb["cells"].([]any)
	for _, c := range cells {
		if cell, ok := c.(map[string]any); ok {
			if outs, ok := cell["outputs"].([]any); ok {
				cell["outputs"] = coalesceStreamMaps(outs)
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(nb); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	body, _, err := nbformat.Write(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if len(body) > limit {
		return nil, fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	return &Result{Body: body, Extension: ".ipynb", Mimetype: "application/json"}, ctx.Err()
}

// coalesceStreamMaps is coalesceStreams on outputs kept as decoded JSON.
func coalesceStreamMaps(outs []any) []any {
	str := func(v any) (string, bool) {
		switch t := v.(type) {
		case string:
			return t, true
		case []any:
			var b strings.Builder
			for _, l := range t {
				s, ok := l.(string)
				if !ok {
					return "", false
				}
				b.WriteString(s)
			}
			return b.String(), true
		}
		return "", false
	}
	var merged []any
	var last map[string]any
	for _, o := range outs {
		m, ok := o.(map[string]any)
		if ok && last != nil && m["output_type"] == "stream" && last["output_type"] == "stream" && m["name"] == last["name"] {
			a, ok1 := str(last["text"])
			b, ok2 := str(m["text"])
			if ok1 && ok2 {
				last["text"] = a + b
				continue
			}
		}
		merged = append(merged, o)
		last = m
	}
	for _, o := range merged {
		if m, ok := o.(map[string]any); ok && m["output_type"] == "stream" {
			if s, ok := str(m["text"]); ok && strings.Contains(s, "\r") {
				m["text"] = resolveCR(s)
			}
		}
	}
	if merged == nil {
		merged = []any{}
	}
	return merged
}
