package nbformat

import (
	"encoding/json"
	"fmt"
)

// upgradeV1 is nbformat's v2.upgrade of a v1 notebook (v1 has no reader step: nbformat reads
// its JSON as it is). It returns a new notebook: one worksheet of the cells, and none of the
// v1 notebook's other members, its metadata included.
//
//   - a "code" cell becomes a code cell: "code" as its input, "prompt_number" through
//     Python's int() ("4", 4.7 and true all give a number), language python, no outputs,
//     collapsed false;
//   - a "text" cell becomes a markdown cell with "text" as its source;
//   - a cell of any other type is refused. nbformat fails on one that comes first, and for
//     a later one appends again the cell it made last (its loop variable still holds it):
//     a few bytes per cell would repeat a cell of any size.
func upgradeV1(nb map[string]any) (map[string]any, error) {
	cellsValue, what, ok := attr(nb, "cells")
	if !ok {
		return nil, convertError(1, what)
	}
	cells, err := pyIter(cellsValue, "cells")
	if err != nil {
		return nil, err
	}
	upgraded := make([]any, 0, len(cells))
	for _, c := range cells {
		var newCell map[string]any
		typ, what, ok := attr(c, "cell_type")
		if !ok {
			return nil, convertError(1, what)
		}
		cell := c.(map[string]any)
		switch typ {
		case "code":
			if newCell, err = v2CodeCell(cell["code"], cell["prompt_number"]); err != nil {
				return nil, err
			}
		case "text":
			newCell = map[string]any{"cell_type": "markdown"}
			if text := cell["text"]; text != nil {
				if newCell["source"], err = pyStr(text); err != nil {
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("cell_type %v: nbformat 1 has code and text cells only", typ)
		}
		upgraded = append(upgraded, newCell)
	}
	return map[string]any{
		"nbformat":   json.Number("2"),
		"metadata":   map[string]any{},
		"worksheets": []any{map[string]any{"cells": upgraded}},
	}, nil
}

// v2CodeCell is nbformat's v2.new_code_cell(input=code, prompt_number=promptNumber).
func v2CodeCell(code, promptNumber any) (map[string]any, error) {
	cell := map[string]any{"cell_type": "code", "language": "python", "outputs": []any{}, "collapsed": false}
	if code != nil {
		s, err := pyStr(code)
		if err != nil {
			return nil, err
		}
		cell["input"] = s
	}
	if promptNumber != nil {
		n, err := pyInt(promptNumber)
		if err != nil {
			return nil, err
		}
		cell["prompt_number"] = n
	}
	return cell, nil
}
