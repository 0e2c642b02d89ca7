package nbformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// DowngradeV3 returns a notebook's content as Read returns it (nbformat 4) in nbformat 3, the
// format of IPython 1.x's clients, named name: what nbformat's v4 → v3 downgrade makes of
// it, then what nbformat's v3 writer keeps of that (no orig_nbformat, no trusted flags),
// with lines joined as IPython sent them, and the name in the metadata as IPython's notebook
// manager put it there. The downgrade loses what v3 cannot hold: cell ids and attachments,
// outputs of MIME types v3 has no name for, and a markdown cell of a single line starting
// with "#" becomes a heading cell. The text of application/json outputs has its object keys
// sorted (nbformat keeps the order they were read in).
func DowngradeV3(content json.RawMessage, name string) (json.RawMessage, error) {
	v, err := decodeJSON(content)
	if err != nil {
		return nil, err
	}
	nb, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("notebook content is not an object")
	}
	if err := downgradeV4(nb); err != nil {
		return nil, &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "Notebook cannot be converted to nbformat 3: " + err.Error(), Err: err}
	}
	stripTransientV3(nb)
	nb["metadata"].(map[string]any)["name"] = name
	return encodeCompact(nb)
}

// downgradeV4 is nbformat's v4 downgrade of a notebook, in place: version 3.0, the cells
// downgraded into one worksheet, a name in the metadata ("" unless it has one), and the
// original version (from the metadata, else 4.5) moved to the top.
func downgradeV4(nb map[string]any) error {
	md, ok := nb["metadata"].(map[string]any)
	if !ok {
		return errors.New("metadata is not an object")
	}
	cellsValue, ok := nb["cells"]
	if !ok {
		return errors.New("no cells")
	}
	cells, err := pyIter(cellsValue, "cells")
	if err != nil {
		return err
	}
	nb["nbformat"], nb["nbformat_minor"] = json.Number("3"), json.Number("0")
	delete(nb, "cells")
	for _, c := range cells {
		if err := downgradeCell(c); err != nil {
			return err
		}
	}
	if cells == nil {
		cells = []any{}
	}
	nb["worksheets"] = []any{map[string]any{"cells": cells, "metadata": map[string]any{}}}
	if _, ok := md["name"]; !ok {
		md["name"] = ""
	}
	nb["orig_nbformat"] = popOr(md, "orig_nbformat", json.Number("4"))
	nb["orig_nbformat_minor"] = popOr(md, "orig_nbformat_minor", json.Number("5"))
	return nil
}

// downgradeCell is nbformat's v4 downgrade_cell, in place: a code cell gets language python,
// source → input, execution_count → prompt_number, collapsed out of its metadata (default
// false) and its outputs downgraded; a markdown cell of one line starting with "#" becomes a
// heading of as many levels as it has "#" (the text after them and any white space); ids and
// attachments go.
func downgradeCell(c any) error {
	cell, ok := c.(map[string]any)
	if !ok {
		return fmt.Errorf("a cell is a %s, not an object", pyType(c))
	}
	switch cell["cell_type"] {
	case "code":
		cell["language"] = "python"
		cell["input"] = popOr(cell, "source", "")
		cell["prompt_number"] = popOr(cell, "execution_count", nil)
		md, ok := cell["metadata"].(map[string]any)
		if !ok {
			return errors.New("code cell metadata is not an object")
		}
		cell["collapsed"] = popOr(md, "collapsed", false)
		outputsValue, ok := cell["outputs"]
		if !ok {
			return errors.New("code cell without outputs")
		}
		outputs, err := pyIter(outputsValue, "outputs")
		if err != nil {
			return err
		}
		for _, o := range outputs {
			if err := downgradeOutput(o); err != nil {
				return err
			}
		}
		if outputs == nil {
			outputs = []any{}
		}
		cell["outputs"] = outputs
	case "markdown":
		src, ok := cell["source"]
		if !ok {
			src = ""
		}
		if err := headingOf(cell, src); err != nil {
			return err
		}
	}
	delete(cell, "id")
	delete(cell, "attachments")
	return nil
}

// headingOf turns the markdown cell into a heading cell when its source, one line, starts
// with "#" (nbformat's match of `(#+)\s*(.*)`).
func headingOf(cell map[string]any, src any) error {
	newline, err := pyIn("\n", src)
	if err != nil || newline {
		return err
	}
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("'%s' object has no attribute 'startswith'", pyType(src))
	}
	if !strings.HasPrefix(s, "#") {
		return nil
	}
	text := strings.TrimLeft(s, "#")
	level := len(s) - len(text)
	for text != "" {
		r, size := utf8.DecodeRuneInString(text)
		if !pyIsSpace(r) {
			break
		}
		text = text[size:]
	}
	cell["cell_type"] = "heading"
	cell["source"] = text
	cell["level"] = json.Number(fmt.Sprint(level))
	return nil
}

// downgradeOutput is nbformat's v4 downgrade_output, in place: execute_result → pyout
// (execution_count → prompt_number) and display_data get the data of MIME types v3 names
// back under those names (application/json as JSON text), and lose the rest; error → pyerr;
// stream: name → stream. Output metadata keeps its MIME types: nbformat converts a copy of
// it that it then drops.
func downgradeOutput(o any) error {
	out, typ, err := outputOf(o)
	if err != nil {
		return err
	}
	switch typ {
	case "execute_result", "display_data":
		if typ == "execute_result" {
			out["output_type"] = "pyout"
			out["prompt_number"] = popOr(out, "execution_count", nil)
		}
		data := popOr(out, "data", map[string]any{})
		if in, err := pyIn("application/json", data); err != nil {
			return err
		} else if in {
			obj, ok := data.(map[string]any)
			if !ok {
				return fmt.Errorf("%s indices must be integers", pyType(data))
			}
			j, err := encodeCompact(obj["application/json"])
			if err != nil {
				return err
			}
			obj["application/json"] = pythonJSONText(j)
		}
		aliased, err := fromMimeKeys(data)
		if err != nil {
			return err
		}
		for k, v := range aliased {
			out[k] = v
		}
		md, ok := out["metadata"]
		if !ok {
			md = map[string]any{}
		}
		if _, err := fromMimeKeys(md); err != nil {
			return err
		}
	case "error":
		out["output_type"] = "pyerr"
	case "stream":
		name, ok := out["name"]
		if !ok {
			return errors.New("KeyError: 'name'")
		}
		delete(out, "name")
		out["stream"] = name
	}
	return nil
}

// fromMimeKeys is nbformat's from_mime_key: the members of d of the MIME types v3 has short
// names for, under those names.
func fromMimeKeys(d any) (map[string]any, error) {
	aliased := map[string]any{}
	for _, a := range mimeAliases {
		in, err := pyIn(a[1], d)
		if err != nil {
			return nil, err
		}
		if !in {
			continue
		}
		obj, ok := d.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s indices must be integers", pyType(d))
		}
		aliased[a[0]] = obj[a[1]]
	}
	return aliased, nil
}

// pythonJSONText rewrites compact JSON text as Python's json.dumps writes it by default:
// ", " and ": " between members and elements, and every character outside printable ASCII
// escaped.
func pythonJSONText(compact []byte) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		switch {
		case inString && c == '\\':
			b.WriteByte(c)
			i++
			b.WriteByte(compact[i])
			continue
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			b.WriteByte(c)
			b.WriteByte(' ')
			continue
		}
		b.WriteByte(c)
	}
	return string(asciiEscape([]byte(b.String())))
}

// stripTransientV3 is nbformat's v3 strip_transient, which its writer applies: no original
// format versions at the top, no trusted flag on cells or in their metadata.
func stripTransientV3(nb map[string]any) {
	delete(nb, "orig_nbformat")
	delete(nb, "orig_nbformat_minor")
	forEachV3Cell(nb, func(cell map[string]any) {
		if md, ok := cell["metadata"].(map[string]any); ok {
			delete(md, "trusted")
		}
		delete(cell, "trusted")
	})
}

// forEachV3Cell calls f on every cell of a v3 notebook's worksheets that is an object.
func forEachV3Cell(nb map[string]any, f func(cell map[string]any)) {
	wss, _ := nb["worksheets"].([]any)
	for _, w := range wss {
		ws, _ := w.(map[string]any)
		cells, _ := ws["cells"].([]any)
		for _, c := range cells {
			if cell, ok := c.(map[string]any); ok {
				f(cell)
			}
		}
	}
}
