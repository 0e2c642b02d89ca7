package nbformat

import (
	"errors"
	"fmt"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jsonspan"
)

// Notebooks of nbformat 1 and 2 are saved as Jupyter saves them (nbformat.write with
// NO_CONVERT), in their own format, and every read upgrades them to 4 (upgrade.go): Notebook
// 6's test_upload_v2 saves a v2 notebook and reads it back as v4. nbformat's writers:
//
//   - v2: lines split (str.splitlines, without their ends) in code cells' input and their
//     outputs' multiline members and in other cells' source and rendered; keys sorted,
//     one-space indent, everything outside printable ASCII escaped. Nothing is stripped.
//   - v1: the notebook as given, in the client's key order (a repeated key keeps its first
//     place and its last value, as Python's dict), four-space indent, ASCII escaped.
//
// nbformat has no schema for either, so Jupyter's save answers "Notebook validation failed:
// No schema for validating v2 notebooks" and stores the notebook all the same; so does
// nbkube. Numbers are kept as written, as in v3 and v4 saves. Jupyter fails (500, nothing
// written) on a v2 notebook its writer cannot walk and on a "v1" notebook without an
// nbformat member (nbformat's get_version makes it 1, its signature check needs the member):
// those are refused (domainerr.ErrInvalid: 400).

// noSchemaMessage is Jupyter's validation message of a notebook of a version nbformat has
// no schema for.
func noSchemaMessage(major int) string {
	return fmt.Sprintf("Notebook validation failed: No schema for validating v%d notebooks:\n\"<UNKNOWN>\"", major)
}

// encodeV2ForWrite is encodeForWrite for a v2 notebook.
func encodeV2ForWrite(nb map[string]any) ([]byte, func() (string, error), error) {
	worksheets, ok := nb["worksheets"]
	if !ok {
		return nil, nil, domainerr.New(domainerr.ErrInvalid, "Cannot save nbformat 2 notebook: no worksheets")
	}
	if err := eachWorksheetCell(worksheets, errors.New("a worksheet has no cells"), checkV2Cell); err != nil {
		return nil, nil, domainerr.New(domainerr.ErrInvalid, "Cannot save nbformat 2 notebook: %v", err)
	}
	splitLinesV2(nb)
	data := asciiEscape(appendNotebook(make([]byte, 0, 64<<10), nb))
	return data, func() (string, error) { return noSchemaMessage(2), nil }, nil
}

// checkV2Cell refuses a cell nbformat's v2 writer fails on: not an object, without a type,
// or a code cell without a list of output objects.
func checkV2Cell(c any) error {
	cell, ok := c.(map[string]any)
	if !ok {
		return fmt.Errorf("a cell is a %s, not an object", pyType(c))
	}
	typ, ok := cell["cell_type"]
	if !ok {
		return errors.New("a cell has no cell_type")
	}
	if typ != "code" {
		return nil
	}
	outputsValue, ok := cell["outputs"]
	if !ok {
		return errors.New("a code cell has no outputs")
	}
	outputs, err := pyIter(outputsValue, "outputs")
	if err != nil {
		return err
	}
	for _, o := range outputs {
		if _, ok := o.(map[string]any); !ok {
			return fmt.Errorf("an output is a %s, not an object", pyType(o))
		}
	}
	return nil
}

// splitLinesV2 is nbformat's v2 split_lines, which drops the line ends (v3's keeps them).
func splitLinesV2(nb map[string]any) {
	split := func(obj map[string]any, key string) {
		if s, ok := obj[key].(string); ok {
			lines := []any{}
			for _, l := range pySplitLines(s) {
				lines = append(lines, l)
			}
			obj[key] = lines
		}
	}
	forEachV3Cell(nb, func(cell map[string]any) {
		if cell["cell_type"] != "code" {
			split(cell, "source")
			split(cell, "rendered")
			return
		}
		split(cell, "input")
		outputs, _ := cell["outputs"].([]any)
		for _, o := range outputs {
			if out, ok := o.(map[string]any); ok {
				for _, key := range multilineOutputKeys {
					split(out, key)
				}
			}
		}
	})
}

// encodeV1ForWrite is encodeForWrite for a v1 notebook, from the text the client sent
// (content, a JSON object), whose key order a decoded notebook has lost.
func encodeV1ForWrite(content []byte) ([]byte, func() (string, error), error) {
	d, members, err := jsonspan.ParseObject(content, decodeDepth)
	if err != nil {
		return nil, nil, domainerr.New(domainerr.ErrInvalid, "Unreadable notebook content: %v", err)
	}
	b := appendOrderedObject(make([]byte, 0, len(content)+len(content)/2), &d, members, 0)
	data := asciiEscape(append(b, '\n'))
	return data, func() (string, error) { return noSchemaMessage(1), nil }, nil
}

// v1Indent is the indent of nbformat's v1 writer (json.dumps(nb, indent=4)).
const v1Indent = 4

// appendOrdered appends the value at v of d as json.dumps(indent=4) does, keys in the order
// written.
func appendOrdered(b []byte, d *jsonspan.Doc, v jsonspan.Span, depth int) []byte {
	if members, ok := d.Members(v); ok {
		return appendOrderedObject(b, d, members, depth)
	}
	if elements, ok := d.Elements(v); ok {
		if len(elements) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, e := range elements {
			if i > 0 {
				b = append(b, ',')
			}
			b = indentV1(b, depth+1)
			b = appendOrdered(b, d, e, depth+1)
		}
		return append(indentV1(b, depth), ']')
	}
	if s, ok := d.StringValue(v); ok {
		return jsonspan.AppendString(b, s)
	}
	// A number (kept as written), true, false or null.
	return append(b, d.Text(v)...)
}

// appendOrderedObject appends an object of the members given, as Python's json.loads and
// json.dumps(indent=4) make it: a repeated key in its first place, with its last value.
func appendOrderedObject(b []byte, d *jsonspan.Doc, members []jsonspan.Member, depth int) []byte {
	last := make(map[string]jsonspan.Span, len(members))
	keys := make([]string, 0, len(members))
	for _, m := range members {
		if _, seen := last[m.Key]; !seen {
			keys = append(keys, m.Key)
		}
		last[m.Key] = m.Value
	}
	if len(keys) == 0 {
		return append(b, "{}"...)
	}
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = indentV1(b, depth+1)
		b = jsonspan.AppendString(b, k)
		b = append(b, ": "...)
		b = appendOrdered(b, d, last[k], depth+1)
	}
	return append(indentV1(b, depth), '}')
}

func indentV1(b []byte, depth int) []byte {
	b = append(b, '\n')
	for range depth * v1Indent {
		b = append(b, ' ')
	}
	return b
}
