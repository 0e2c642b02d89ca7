package nbformat

import (
	"encoding/json"
	"fmt"
)

// multilineOutputKeys are the members of a v2 or v3 output that files may store as lists of
// lines (nbformat's _multiline_outputs).
var multilineOutputKeys = []string{"text", "html", "svg", "latex", "javascript", "json"}

// readV2 is nbformat's v2 reader after json.loads: rejoin_lines, which joins every list of
// lines with "\n" (v2 files split with splitlines(), dropping the ends), then restore_bytes,
// which takes png and jpeg outputs for ASCII text (base64).
func readV2(nb map[string]any) error {
	return rejoinLines(nb, func(lines []any) (string, error) { return joinStrings(lines, "\n") }, true)
}

// rejoinLines walks the worksheets of a v2 or v3 notebook as nbformat's rejoin_lines does,
// replacing the lists of lines of code cells' input, their outputs' multiline members, and
// other cells' source and rendered with what join makes of them. With checkImages, png
// and jpeg outputs must be ASCII strings, as v2's restore_bytes needs them.
func rejoinLines(nb map[string]any, join func([]any) (string, error), checkImages bool) error {
	rejoin := func(obj map[string]any, key string) error {
		lines, ok := obj[key].([]any)
		if !ok {
			return nil
		}
		s, err := join(lines)
		if err != nil {
			return err
		}
		obj[key] = s
		return nil
	}
	worksheets, what, ok := attr(nb, "worksheets")
	if !ok {
		return readerError(what)
	}
	wss, err := pyIter(worksheets, "worksheets")
	if err != nil {
		return err
	}
	for _, ws := range wss {
		cellsValue, what, ok := attr(ws, "cells")
		if !ok {
			return readerError(what)
		}
		cells, err := pyIter(cellsValue, "cells")
		if err != nil {
			return err
		}
		for _, c := range cells {
			typ, what, ok := attr(c, "cell_type")
			if !ok {
				return readerError(what)
			}
			cell := c.(map[string]any)
			if typ != "code" {
				for _, key := range []string{"source", "rendered"} {
					if err := rejoin(cell, key); err != nil {
						return err
					}
				}
				continue
			}
			if err := rejoin(cell, "input"); err != nil {
				return err
			}
			outputsValue, what, ok := attr(cell, "outputs")
			if !ok {
				return readerError(what)
			}
			outputs, err := pyIter(outputsValue, "outputs")
			if err != nil {
				return err
			}
			for _, o := range outputs {
				out, ok := o.(map[string]any)
				if !ok {
					return readerError(fmt.Sprintf("'%s' object has no attribute 'get'", pyType(o)))
				}
				for _, key := range multilineOutputKeys {
					if err := rejoin(out, key); err != nil {
						return err
					}
				}
				if checkImages {
					if err := checkASCIIImages(out); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// checkASCIIImages is what v2's restore_bytes asks of an output: its png and jpeg, where
// present, are strings it can encode as ASCII.
func checkASCIIImages(out map[string]any) error {
	for _, key := range []string{"png", "jpeg"} {
		v, ok := out[key]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return readerError(fmt.Sprintf("'%s' object has no attribute 'encode'", pyType(v)))
		}
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return fmt.Errorf("'ascii' codec can't encode the %s output: ordinal not in range(128)", key)
			}
		}
	}
	return nil
}

// upgradeV2 is nbformat's v3.upgrade of a v2 notebook: version 3.0, orig_nbformat 2 at the
// top (whatever the notebook said), and an empty metadata object for cells without one.
func upgradeV2(nb map[string]any) error {
	nb["nbformat"] = json.Number("3")
	nb["nbformat_minor"] = json.Number("0")
	nb["orig_nbformat"] = json.Number("2")
	worksheets, ok := nb["worksheets"]
	if !ok {
		return fmt.Errorf("KeyError: 'worksheets'")
	}
	return eachWorksheetCell(worksheets, fmt.Errorf("KeyError: 'cells'"), func(c any) error {
		cell, ok := c.(map[string]any)
		if !ok {
			return convertError(2, fmt.Sprintf("'%s' object has no attribute 'setdefault'", pyType(c)))
		}
		if _, ok := cell["metadata"]; !ok {
			cell["metadata"] = map[string]any{}
		}
		return nil
	})
}
