package nbformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// readV3 is nbformat's v3 reader after json.loads: rejoin_lines, which joins a list of lines
// with "" when its first line keeps its end (splitlines(True), what nbformat writes) and with
// "\n" when it does not (older writers' splitlines()).
func readV3(nb map[string]any) error {
	return rejoinLines(nb, joinV3Lines, false)
}

func joinV3Lines(lines []any) (string, error) {
	if len(lines) == 0 {
		return "", nil
	}
	first, ok := lines[0].(string)
	if !ok {
		return "", readerError(fmt.Sprintf("'%s' object has no attribute 'endswith'", pyType(lines[0])))
	}
	if strings.HasSuffix(first, "\n") || strings.HasSuffix(first, "\r") {
		return joinStrings(lines, "")
	}
	return joinStrings(lines, "\n")
}

// upgradeV3 is nbformat's v4.upgrade of a v3 notebook, in place: version 4.5; the original
// version (the top-level orig_nbformat and orig_nbformat_minor when true, else 3 and 0) in
// the metadata, which loses name and signature; the cells of every worksheet, in order, as
// one list, each upgraded by upgradeCell. Before converting, nbformat validates the v3
// notebook (only to log the result), which fails unless nbformat_minor is an integer no
// greater than 0: nbformat has no schema of a later v3.
func upgradeV3(nb map[string]any, budget *int) error {
	minorValue, ok := nb["nbformat_minor"]
	if !ok {
		return errors.New("The notebook does not include the nbformat minor which is needed") //nolint:staticcheck // nbformat's message
	}
	if minor, ok := pyIntValue(minorValue); !ok {
		return fmt.Errorf("nbformat_minor %v is not an integer", minorValue)
	} else if minor.Sign() > 0 {
		return fmt.Errorf("no nbformat schema of version 3.%s", minor)
	}
	orig, origMinor := nb["orig_nbformat"], nb["orig_nbformat_minor"]
	delete(nb, "orig_nbformat")
	delete(nb, "orig_nbformat_minor")
	mdValue, what, ok := attr(nb, "metadata")
	if !ok {
		return convertError(3, what)
	}
	md, ok := mdValue.(map[string]any)
	if !ok {
		return convertError(3, fmt.Sprintf("'%s' object has no attribute 'orig_nbformat'", pyType(mdValue)))
	}
	md["orig_nbformat"], md["orig_nbformat_minor"] = json.Number("3"), json.Number("0")
	if pyTruthy(orig) {
		md["orig_nbformat"] = orig
	}
	if pyTruthy(origMinor) {
		md["orig_nbformat_minor"] = origMinor
	}
	nb["nbformat"], nb["nbformat_minor"] = json.Number("4"), json.Number("5")

	cells := []any{}
	err := eachWorksheetCell(popOr(nb, "worksheets", []any{}), errors.New("KeyError: 'cells'"), func(c any) error {
		if err := upgradeCell(c, budget); err != nil {
			return err
		}
		cells = append(cells, c)
		return nil
	})
	if err != nil {
		return err
	}
	nb["cells"] = cells
	delete(md, "name")
	delete(md, "signature")
	return nil
}

// popOr is Python's dict.pop(key, def).
func popOr(obj map[string]any, key string, def any) any {
	v, ok := obj[key]
	if !ok {
		return def
	}
	delete(obj, key)
	return v
}

// upgradeCell is nbformat's v4 upgrade_cell, in place: an empty metadata object where there
// is none, and a new id, then by type:
//   - code: language dropped, collapsed moved into the metadata, input → source (default ""),
//     prompt_number → execution_count (default null), each output upgraded;
//   - heading: a markdown cell of level "#" characters, a space and the source's lines joined
//     by spaces (a level below 1 gives no "#");
//   - html: a markdown cell.
func upgradeCell(c any, budget *int) error {
	cell, ok := c.(map[string]any)
	if !ok {
		return convertError(3, fmt.Sprintf("'%s' object has no attribute 'setdefault'", pyType(c)))
	}
	if _, ok := cell["metadata"]; !ok {
		cell["metadata"] = map[string]any{}
	}
	cell["id"] = newCellID()
	typ, what, ok := attr(cell, "cell_type")
	if !ok {
		return convertError(3, what)
	}
	switch typ {
	case "code":
		return upgradeCodeCell(cell)
	case "heading":
		cell["cell_type"] = "markdown"
		level := popOr(cell, "level", json.Number("1"))
		n, ok := pyIntValue(level)
		if !ok {
			return fmt.Errorf("can't multiply sequence by non-int of type '%s'", pyType(level))
		}
		hashes := 0
		if n.Sign() > 0 {
			if !n.IsInt64() || n.Int64() > int64(*budget) {
				return fmt.Errorf("heading level %s is too large", n)
			}
			hashes = int(n.Int64())
			*budget -= hashes
		}
		src, ok := cell["source"]
		if !ok {
			src = ""
		}
		s, ok := src.(string)
		if !ok {
			return convertError(3, fmt.Sprintf("'%s' object has no attribute 'splitlines'", pyType(src)))
		}
		cell["source"] = strings.Repeat("#", hashes) + " " + strings.Join(pySplitLines(s), " ")
	case "html":
		cell["cell_type"] = "markdown"
	}
	return nil
}

func upgradeCodeCell(cell map[string]any) error {
	delete(cell, "language")
	if collapsed, ok := cell["collapsed"]; ok {
		md, ok := cell["metadata"].(map[string]any)
		if !ok {
			return fmt.Errorf("cannot set collapsed in cell metadata that is a %s", pyType(cell["metadata"]))
		}
		delete(cell, "collapsed")
		md["collapsed"] = collapsed
	}
	cell["source"] = popOr(cell, "input", "")
	cell["execution_count"] = popOr(cell, "prompt_number", nil)
	outputsValue, what, ok := attr(cell, "outputs")
	if !ok {
		return convertError(3, what)
	}
	outputs, err := pyIter(outputsValue, "outputs")
	if err != nil {
		return err
	}
	upgraded := make([]any, 0, len(outputs))
	for _, o := range outputs {
		if err := upgradeOutput(o); err != nil {
			return err
		}
		upgraded = append(upgraded, o)
	}
	cell["outputs"] = upgraded
	return nil
}

// mimeAliases are v3's short names of output types and their MIME types (nbformat's
// _mime_map, in its order). v3's "pdf" has none: it stays "pdf".
var mimeAliases = [][2]string{
	{"text", "text/plain"},
	{"html", "text/html"},
	{"svg", "image/svg+xml"},
	{"png", "image/png"},
	{"jpeg", "image/jpeg"},
	{"latex", "text/latex"},
	{"json", "application/json"},
	{"javascript", "application/javascript"},
}

// outputOf is an output of a notebook being converted and its output_type, refused as Python's
// nbformat fails on it (with Python's words) when it is no object or its type is missing or
// unhashable.
func outputOf(o any) (map[string]any, any, error) {
	out, ok := o.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("an output is a %s, not an object", pyType(o))
	}
	typ, ok := out["output_type"]
	if !ok {
		return nil, nil, errors.New("KeyError: 'output_type'")
	}
	switch typ.(type) {
	case []any, map[string]any:
		return nil, nil, fmt.Errorf("unhashable type: '%s'", pyType(typ))
	}
	return out, typ, nil
}

// upgradeOutput is nbformat's v4 upgrade_output, in place:
//   - pyout → execute_result (prompt_number → execution_count) and display_data: an empty
//     metadata object where there is none; every member but output_type, execution_count and
//     metadata moves into data, where (as in the metadata) short names become MIME types;
//     the application/json text is parsed;
//   - pyerr → error;
//   - stream: stream → name (default stdout).
func upgradeOutput(o any) error {
	out, typ, err := outputOf(o)
	if err != nil {
		return err
	}
	switch typ {
	case "pyout", "display_data":
		if _, ok := out["metadata"]; !ok {
			out["metadata"] = map[string]any{}
		}
		if typ == "pyout" {
			out["output_type"] = "execute_result"
			out["execution_count"] = popOr(out, "prompt_number", nil)
		}
		data := map[string]any{}
		for k, v := range out {
			switch k {
			case "output_type", "execution_count", "metadata":
				continue
			}
			data[k] = v
			delete(out, k)
		}
		toMimeKeys(data)
		out["data"] = data
		if err := toMimeKeysOf(out["metadata"]); err != nil {
			return err
		}
		if j, ok := data["application/json"]; ok {
			s, ok := j.(string)
			if !ok {
				return fmt.Errorf("the JSON object must be str, bytes or bytearray, not %s", pyType(j))
			}
			v, err := decodeNestedJSON(s)
			if err != nil {
				return fmt.Errorf("application/json output: %w", err)
			}
			data["application/json"] = v
		}
	case "pyerr":
		out["output_type"] = "error"
	case "stream":
		out["name"] = popOr(out, "stream", "stdout")
	}
	return nil
}

// toMimeKeys is nbformat's to_mime_key of an object: short names renamed to MIME types.
func toMimeKeys(d map[string]any) {
	for _, a := range mimeAliases {
		if v, ok := d[a[0]]; ok {
			delete(d, a[0])
			d[a[1]] = v
		}
	}
}

// toMimeKeysOf is to_mime_key of an output's metadata, whatever it is: Python's "in" looks
// into a list's elements and a string's text too, and fails where it then cannot pop.
func toMimeKeysOf(v any) error {
	if d, ok := v.(map[string]any); ok {
		toMimeKeys(d)
		return nil
	}
	for _, a := range mimeAliases {
		in, err := pyIn(a[0], v)
		if err != nil {
			return err
		}
		if in {
			return fmt.Errorf("output metadata is a %s holding %q, which nbformat cannot rename", pyType(v), a[0])
		}
	}
	return nil
}

// pyIn is Python's key in v.
func pyIn(key string, v any) (bool, error) {
	switch t := v.(type) {
	case map[string]any:
		_, ok := t[key]
		return ok, nil
	case []any:
		for _, e := range t {
			if e == key {
				return true, nil
			}
		}
		return false, nil
	case string:
		return strings.Contains(t, key), nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", pyType(v))
}

// decodeNestedJSON is json.loads of JSON text held in a notebook, nested no deeper than
// notebooks may be.
func decodeNestedJSON(s string) (any, error) {
	if jsonDepth(s) > maxJSONDepth {
		return nil, errors.New("JSON nested too deep")
	}
	return decodeJSON([]byte(s))
}

// jsonDepth is how deep the arrays and objects of JSON text s nest (for text that is not
// JSON, a number that decoding will not need).
func jsonDepth(s string) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
