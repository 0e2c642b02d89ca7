package nbformat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	_ "embed"
)

// nbformatSchema is nbformat's JSON schema of notebook format 4.5 (nbformat.v4.schema.json),
// copied from nbformat 5.5.0. Copyright (c) 2001-2015, IPython Development Team;
// 2015, Jupyter Development Team. Distributed under the terms of the Modified BSD License
// (BSD-3-Clause), which requires keeping this notice; see https://github.com/jupyter/nbformat.
//
//go:embed schema/nbformat.v4.schema.json
var nbformatSchema []byte

// schemas holds the compiled schema for each group of minor versions. nbformat validates a
// notebook against the schema of its own minor version; those differ from 4.5's only in the
// minimum nbformat_minor and in cell ids, so older ones are derived from 4.5 rather than
// shipped, and newer ones are 4.5 relaxed the way nbformat relaxes "notebooks from the future".
type schemas struct {
	older, current, future schemaPair
}

// schemaPair is a notebook schema and its cell definition, so that the cells of a large
// notebook can be validated in parallel, and those already known valid skipped.
type schemaPair struct {
	whole, cell *jsonschema.Schema
	variant     int
}

var loadSchemas = sync.OnceValues(func() (*schemas, error) {
	var s schemas
	var err error
	if s.current, err = compileSchema(0, func(map[string]any) {}); err != nil {
		return nil, err
	}
	if s.older, err = compileSchema(1, func(doc map[string]any) {
		minor := dig(doc, "properties", "nbformat_minor").(map[string]any)
		minor["minimum"] = json.Number("0")
		for _, c := range []string{"raw_cell", "markdown_cell", "code_cell"} {
			cell := dig(doc, "definitions", c).(map[string]any)
			cell["required"] = slices.DeleteFunc(cell["required"].([]any), func(v any) bool { return v == "id" })
		}
	}); err != nil {
		return nil, err
	}
	if s.future, err = compileSchema(2, func(doc map[string]any) {
		relaxAdditionalProperties(doc)
		for def, extra := range map[string]string{"cell": "unrecognized_cell", "output": "unrecognized_output"} {
			d := dig(doc, "definitions", def).(map[string]any)
			d["oneOf"] = append(d["oneOf"].([]any), map[string]any{"$ref": "#/definitions/" + extra})
		}
	}); err != nil {
		return nil, err
	}
	return &s, nil
})

func compileSchema(variant int, edit func(map[string]any)) (schemaPair, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(nbformatSchema))
	if err != nil {
		return schemaPair{}, fmt.Errorf("nbformat schema: %w", err)
	}
	edit(doc.(map[string]any))
	exclusiveAlternatives(doc)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("nbformat.v4.schema.json", doc); err != nil {
		return schemaPair{}, fmt.Errorf("nbformat schema: %w", err)
	}
	whole, err := c.Compile("nbformat.v4.schema.json")
	if err != nil {
		return schemaPair{}, fmt.Errorf("nbformat schema: %w", err)
	}
	cell, err := c.Compile("nbformat.v4.schema.json#/definitions/cell")
	if err != nil {
		return schemaPair{}, fmt.Errorf("nbformat cell schema: %w", err)
	}
	return schemaPair{whole: whole, cell: cell, variant: variant}, nil
}

// exclusiveAlternatives turns the schema's oneOf into anyOf. Every oneOf of the nbformat
// schema lists mutually exclusive alternatives (cells and outputs by their type's enum, a
// multiline string as a string or an array), so the two accept the same documents; anyOf stops
// at the first alternative that matches where oneOf must try them all, and validation is the
// largest cost of a save.
func exclusiveAlternatives(v any) {
	switch v := v.(type) {
	case map[string]any:
		if alts, ok := v["oneOf"]; ok {
			delete(v, "oneOf")
			v["anyOf"] = alts
		}
		for _, x := range v {
			exclusiveAlternatives(x)
		}
	case []any:
		for _, x := range v {
			exclusiveAlternatives(x)
		}
	}
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		v = v.(map[string]any)[k]
	}
	return v
}

func relaxAdditionalProperties(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "additionalProperties" {
				v[k] = true
			} else {
				relaxAdditionalProperties(x)
			}
		}
	case []any:
		for _, x := range v {
			relaxAdditionalProperties(x)
		}
	}
}
