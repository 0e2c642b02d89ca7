package nbformat

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/nbkube/nbkube/internal/domainerr"

	_ "embed"
)

// Jupyter saves a notebook in the format the client sends it in (nbformat.write with
// NO_CONVERT): a v3 notebook is stored as v3, and every read upgrades it again. So does
// nbkube, writing what nbformat's v3 writer writes: the transient fields stripped (after
// validation, which sees them), lines split keeping their ends, keys sorted, one-space
// indent, and (unlike v4) everything outside printable ASCII escaped. Older versions are
// written as write_v12.go says.

// encodeV3ForWrite is encodeForWrite for a v3 notebook, which nbformat saves only when
// nbformat_minor is an integer no greater than 0 (it has no schema of a later v3 and fails
// to validate one).
func encodeV3ForWrite(nb map[string]any) ([]byte, func() (string, error), error) {
	if v, ok := nb["nbformat_minor"]; ok {
		if minor, ok := pyIntValue(v); !ok || minor.Sign() > 0 {
			return nil, nil, domainerr.New(domainerr.ErrInvalid, "Unsupported nbformat version 3.%v: nbformat 3 notebooks are stored as 3.0", v)
		}
	}
	if err := checkV3Structure(nb); err != nil {
		return nil, nil, domainerr.New(domainerr.ErrInvalid, "Cannot save nbformat 3 notebook: %v", err)
	}
	orig := deepCopyJSON(nb).(map[string]any)
	stripTransientV3(nb)
	splitLinesV3(nb)
	data := asciiEscape(appendNotebook(make([]byte, 0, 64<<10), nb))
	return data, func() (string, error) { return validateNotebookV3(orig) }, nil
}

// checkV3Structure refuses a v3 notebook that Jupyter fails to save (with a 500 error, and
// nothing written): its signature check and nbformat's v3 writer need worksheets of cells,
// each cell with a type and any metadata an object, and code cells with metadata and a list
// of outputs, objects with a type unless the cell says it is trusted.
func checkV3Structure(nb map[string]any) error {
	worksheets, ok := nb["worksheets"]
	if !ok {
		return errors.New("no worksheets")
	}
	return eachWorksheetCell(worksheets, errors.New("a worksheet has no cells"), checkV3Cell)
}

func checkV3Cell(c any) error {
	cell, ok := c.(map[string]any)
	if !ok {
		return fmt.Errorf("a cell is a %s, not an object", pyType(c))
	}
	typ, ok := cell["cell_type"]
	if !ok {
		return errors.New("a cell has no cell_type")
	}
	mdValue, hasMetadata := cell["metadata"]
	md, isObject := mdValue.(map[string]any)
	if hasMetadata && !isObject {
		return fmt.Errorf("cell metadata is a %s, not an object", pyType(mdValue))
	}
	if typ != "code" {
		return nil
	}
	if !hasMetadata {
		return errors.New("a code cell has no metadata")
	}
	outputsValue, ok := cell["outputs"]
	if !ok {
		return errors.New("a code cell has no outputs")
	}
	outputs, err := pyIter(outputsValue, "outputs")
	if err != nil {
		return err
	}
	trusted := pyTruthy(md["trusted"])
	for _, o := range outputs {
		out, ok := o.(map[string]any)
		if !ok {
			return fmt.Errorf("an output is a %s, not an object", pyType(o))
		}
		if _, ok := out["output_type"]; !ok && !trusted {
			return errors.New("an output has no output_type")
		}
	}
	return nil
}

// splitLinesV3 is nbformat's v3 split_lines: code cells' input and their outputs' multiline
// members, other cells' source and rendered, as lists of lines.
func splitLinesV3(nb map[string]any) {
	split := func(obj map[string]any, key string) {
		if s, ok := obj[key].(string); ok {
			obj[key] = linesOf(s)
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

// asciiEscape escapes, in JSON text, the characters Python's json.dumps escapes when
// ensure_ascii is on and encoding/json does not: DEL and everything beyond ASCII, as \uXXXX
// (surrogate pairs beyond the BMP). Such characters can only be inside strings.
func asciiEscape(b []byte) []byte {
	const hex = "0123456789abcdef"
	escape := func(out []byte, r rune) []byte {
		return append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	var out []byte
	start := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x7f {
			i++
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b)+len(b)/8)
		}
		out = append(out, b[start:i]...)
		r, size := utf8.DecodeRune(b[i:])
		if r > 0xffff {
			r -= 0x10000
			out = escape(out, 0xd800+(r>>10))
			out = escape(out, 0xdc00+(r&0x3ff))
		} else {
			out = escape(out, r)
		}
		i += size
		start = i
	}
	if out == nil {
		return b
	}
	return append(out, b[start:]...)
}

// nbformatV3Schema is nbformat's JSON schema of notebook format 3 (nbformat.v3.schema.json),
// copied from nbformat 5.5.0. Copyright (c) 2001-2015, IPython Development Team; 2015,
// Jupyter Development Team. Distributed under the terms of the Modified BSD License
// (BSD-3-Clause), which requires keeping this notice; see https://github.com/jupyter/nbformat.
//
//go:embed schema/nbformat.v3.schema.json
var nbformatV3Schema []byte

var loadV3Schema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(nbformatV3Schema))
	if err != nil {
		return nil, fmt.Errorf("nbformat v3 schema: %w", err)
	}
	exclusiveAlternatives(doc)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("nbformat.v3.schema.json", doc); err != nil {
		return nil, fmt.Errorf("nbformat v3 schema: %w", err)
	}
	return c.Compile("nbformat.v3.schema.json")
})

// validateNotebookV3 validates a decoded v3 notebook against nbformat's v3 schema and
// returns Jupyter's "Notebook validation failed" message, or "" when it is valid.
func validateNotebookV3(nb map[string]any) (string, error) {
	sch, err := loadV3Schema()
	if err != nil {
		return "", err
	}
	return validationMessage(sch.Validate(any(nb)), nb, nil)
}
