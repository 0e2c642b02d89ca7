package contents

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	_ "embed"
)

// nbformatSchema is nbformat's JSON schema of notebook format 4.5 (nbformat.v4.schema.json),
// copied from nbformat 5.5.0. Copyright (c) 2001-2015, IPython Development Team;
// 2015, Jupyter Development Team. Distributed under the terms of the Modified BSD License
// (BSD-3-Clause), which requires keeping this notice; see https://github.com/jupyter/nbformat.
//
//go:embed schema/nbformat.v4.schema.json
var nbformatSchema []byte

// Notebook format written into new notebooks: what nbformat.v4.new_notebook writes.
const (
	nbformatMajor = 4
	nbformatMinor = 5
)

// How much of an invalid instance a validation message shows, as nbformat truncates it.
const (
	truncateItems   = 16
	truncateStrings = 64
)

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

// validCells remembers cells found valid, by their canonical encoding and the schema variant:
// a notebook saved again mostly has the cells it had, and validating them again was most of
// a save's time. A cell's validity depends on its content and the schema only, so the memory
// cannot be stale, nor differ between replicas.
var validCells = newCellSet(1 << 16)

type validCellKey struct {
	variant int
	sum     [sha256.Size]byte
}

// cellSet is a bounded set: when the current generation is full it becomes the previous one,
// and what neither holds is forgotten.
type cellSet struct {
	mu        sync.Mutex
	max       int
	cur, prev map[validCellKey]struct{}
}

func newCellSet(max int) *cellSet {
	return &cellSet{max: max, cur: map[validCellKey]struct{}{}}
}

func (s *cellSet) has(k validCellKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return true
	}
	_, ok := s.prev[k]
	return ok
}

func (s *cellSet) add(k validCellKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.max {
		s.prev, s.cur = s.cur, make(map[validCellKey]struct{}, s.max)
	}
	s.cur[k] = struct{}{}
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
// at the first alternative that matches where oneOf must try them all, which made validation
// of a saved notebook cost twice what it needs.
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

// decodeJSON decodes a JSON document keeping numbers as written, so that saving a notebook
// does not change them, and refuses trailing data.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// version returns a notebook's nbformat and nbformat_minor (nbformat's get_version: 1 and 0
// when missing), or -1 where they are not integers.
func version(nb map[string]any) (major, minor int) {
	num := func(key string, missing int) int {
		v, ok := nb[key]
		if !ok {
			return missing
		}
		n, ok := v.(json.Number)
		if !ok {
			return -1
		}
		i, err := strconv.Atoi(n.String())
		if err != nil {
			return -1
		}
		return i
	}
	return num("nbformat", 1), num("nbformat_minor", 0)
}

// newCellID is nbformat's random cell id: eight hex digits of a random UUID.
func newCellID() string { return randomHex(4) }

// normalizeIDs is the repair nbformat's validate makes to 4.5+ notebooks before validating:
// a cell without an id gets one, and a cell whose id repeats an earlier one gets a new one.
func normalizeIDs(nb map[string]any) {
	cells, _ := nb["cells"].([]any)
	seen := make(map[string]bool, len(cells))
	for _, c := range cells {
		cell, ok := c.(map[string]any)
		if !ok {
			continue
		}
		id, present := cell["id"]
		s, isString := id.(string)
		if !present || (isString && seen[s]) {
			s = newCellID()
			cell["id"] = s
		}
		seen[s] = true
	}
}

// stripTransient removes what nbformat never stores: original format versions, the
// signature and the trusted flag of cells.
func stripTransient(nb map[string]any) {
	if md, ok := nb["metadata"].(map[string]any); ok {
		delete(md, "orig_nbformat")
		delete(md, "orig_nbformat_minor")
		delete(md, "signature")
	}
	cells, _ := nb["cells"].([]any)
	for _, c := range cells {
		if cell, ok := c.(map[string]any); ok {
			if md, ok := cell["metadata"].(map[string]any); ok {
				delete(md, "trusted")
			}
		}
	}
}

// splitLines is nbformat's split_lines: sources, stream texts and text-like outputs are
// stored as lists of lines so that notebooks diff well.
func splitLines(nb map[string]any) {
	cells, _ := nb["cells"].([]any)
	for _, c := range cells {
		cell, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if src, ok := cell["source"].(string); ok {
			cell["source"] = linesOf(src)
		}
		if atts, ok := cell["attachments"].(map[string]any); ok {
			for _, a := range atts {
				splitBundle(a)
			}
		}
		if cell["cell_type"] != "code" {
			continue
		}
		outputs, _ := cell["outputs"].([]any)
		for _, o := range outputs {
			out, ok := o.(map[string]any)
			if !ok {
				continue
			}
			switch out["output_type"] {
			case "execute_result", "display_data":
				splitBundle(out["data"])
			case "stream":
				if text, ok := out["text"].(string); ok {
					out["text"] = linesOf(text)
				}
			}
		}
	}
}

func splitBundle(v any) {
	bundle, ok := v.(map[string]any)
	if !ok {
		return
	}
	for mime, x := range bundle {
		if s, ok := x.(string); ok && (strings.HasPrefix(mime, "text/") || mime == "application/javascript" || mime == "image/svg+xml") {
			bundle[mime] = linesOf(s)
		}
	}
}

// linesOf is Python's str.splitlines(keepends=True), whose line boundaries are more than "\n".
func linesOf(s string) []any {
	lines := []any{}
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		end := -1
		switch r {
		case '\r':
			end = i + 1
			if end < len(s) && s[end] == '\n' {
				end++
			}
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			end = i + size
		}
		if end < 0 {
			i += size
			continue
		}
		lines = append(lines, s[start:end])
		start, i = end, end
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// encodeNotebook turns the notebook JSON a client saves into the bytes nbformat.write would
// store: ids repaired, transient fields stripped, lines split, keys sorted, indented by one
// space, non-ASCII kept, and a final newline. It returns the validation message ("" when the
// notebook is valid): an invalid notebook is saved all the same, as Jupyter saves it.
func encodeNotebook(content []byte) ([]byte, string, error) {
	data, validate, err := prepareNotebook(content)
	if err != nil {
		return nil, "", err
	}
	msg, err := validate()
	return data, msg, err
}

// prepareNotebook encodes a notebook for writing and returns the validation separately, so
// that a save can validate while the bytes go to disk: an invalid notebook is saved all the
// same, so nothing about the write waits for the verdict.
func prepareNotebook(content []byte) ([]byte, func() (string, error), error) {
	v, err := decodeJSON(content)
	if err != nil {
		return nil, nil, invalid("Unreadable notebook content: %v", err)
	}
	nb, ok := v.(map[string]any)
	if !ok {
		return nil, nil, invalid("Unreadable notebook content: not a JSON object")
	}
	return encodeForWrite(nb)
}

func writeNotebook(nb map[string]any) ([]byte, string, error) {
	data, validate, err := encodeForWrite(nb)
	if err != nil {
		return nil, "", err
	}
	msg, err := validate()
	return data, msg, err
}

// encodeForWrite normalizes nb and encodes it as nbformat.write does. The returned validation
// works on a copy, so it may run concurrently with the write.
func encodeForWrite(nb map[string]any) ([]byte, func() (string, error), error) {
	major, minor := version(nb)
	if major != nbformatMajor {
		return nil, nil, invalid("Unsupported nbformat version %v: only nbformat 4 notebooks are stored", nb["nbformat"])
	}
	if minor >= 5 {
		normalizeIDs(nb)
	}
	stripTransient(nb)
	// Validation reads its own copy: nb's strings are split into lines for writing meanwhile,
	// and a validation message must show the notebook as the client sent it.
	orig := deepCopyJSON(nb).(map[string]any)
	splitLines(nb)
	return appendNotebook(make([]byte, 0, 64<<10), nb), func() (string, error) { return validateNotebook(orig) }, nil
}

// deepCopyJSON copies a decoded JSON value.
func deepCopyJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopyJSON(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = deepCopyJSON(e)
		}
		return a
	default:
		return v
	}
}

// newNotebookJSON is an empty notebook as nbformat.v4.new_notebook writes it.
func newNotebookJSON() ([]byte, error) {
	data, _, err := writeNotebook(map[string]any{
		"cells":          []any{},
		"metadata":       map[string]any{},
		"nbformat":       json.Number(strconv.Itoa(nbformatMajor)),
		"nbformat_minor": json.Number(strconv.Itoa(nbformatMinor)),
	})
	return data, err
}

// validateNotebook validates a decoded notebook against the schema of its minor version and
// returns Jupyter's "Notebook validation failed" message, or "" when it is valid.
func validateNotebook(nb map[string]any) (string, error) {
	all, err := loadSchemas()
	if err != nil {
		return "", err
	}
	sch := all.current
	switch _, minor := version(nb); {
	case minor >= 0 && minor < nbformatMinor:
		sch = all.older
	case minor > nbformatMinor:
		sch = all.future
	}
	cells, ok := nb["cells"].([]any)
	if !ok || len(cells) < parallelCells {
		return validationMessage(sch.whole.Validate(any(nb)), nb, nil)
	}
	// The notebook without its cells, then the cells side by side: the schema checks each
	// cell on its own, so this accepts and refuses exactly what one pass does, and reports the
	// first failing cell as one pass does.
	top := make(map[string]any, len(nb))
	for k, v := range nb {
		top[k] = v
	}
	top["cells"] = []any{}
	if msg, err := validationMessage(sch.whole.Validate(any(top)), top, nil); msg != "" || err != nil {
		return msg, err
	}
	errs := make([]error, len(cells))
	workers := min(runtime.GOMAXPROCS(0), len(cells))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := w; i < len(cells); i += workers {
				buf = appendValue(buf[:0], cells[i], 0)
				key := validCellKey{variant: sch.variant, sum: sha256.Sum256(buf)}
				if validCells.has(key) {
					continue
				}
				if errs[i] = sch.cell.Validate(cells[i]); errs[i] == nil {
					validCells.add(key)
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return validationMessage(err, cells[i], []string{"cells", strconv.Itoa(i)})
		}
	}
	return "", nil
}

// parallelCells is the number of cells from which validating them in parallel pays.
const parallelCells = 16

// validationMessage is Jupyter's message for a validation error of instance, which sits at
// prefix in the notebook; "" when err is nil.
func validationMessage(err error, instance any, prefix []string) (string, error) {
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return "", err
	}
	leaf := mostSpecific(ve, instance)
	shown, _ := json.MarshalIndent(truncate(at(instance, leaf.InstanceLocation)), "", " ")
	where := "/" + strings.Join(append(slices.Clone(prefix), leaf.InstanceLocation...), "/")
	return fmt.Sprintf("Notebook validation failed: %s at %s:\n%s", leaf.ErrorKind.LocalizedString(printer), where, shown), nil
}

var printer = message.NewPrinter(language.English)

// mostSpecific descends to the error that explains a failure. Where a cell or output matches
// none of the oneOf alternatives, it follows the alternative of the cell's or output's own
// type, as nbformat's better_validation_error does, instead of reporting the oneOf.
func mostSpecific(e *jsonschema.ValidationError, nb any) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		next := e.Causes[0]
		_, oneOf := e.ErrorKind.(*kind.OneOf)
		_, anyOf := e.ErrorKind.(*kind.AnyOf)
		if oneOf || anyOf {
			if def := definitionOf(at(nb, e.InstanceLocation)); def != "" {
				for _, c := range e.Causes {
					if mentions(c, "/definitions/"+def) {
						next = c
						break
					}
				}
			}
		}
		e = next
	}
	return e
}

func definitionOf(v any) string {
	obj, _ := v.(map[string]any)
	if t, ok := obj["cell_type"].(string); ok {
		return t + "_cell"
	}
	if t, ok := obj["output_type"].(string); ok {
		return t
	}
	return ""
}

func mentions(e *jsonschema.ValidationError, def string) bool {
	if strings.HasSuffix(e.SchemaURL, def) || strings.Contains(e.SchemaURL, def+"/") {
		return true
	}
	if ref, ok := e.ErrorKind.(*kind.Reference); ok && strings.HasSuffix(ref.URL, def) {
		return true
	}
	return slices.ContainsFunc(e.Causes, func(c *jsonschema.ValidationError) bool { return mentions(c, def) })
}

// at returns the value at a JSON pointer's tokens.
func at(v any, loc []string) any {
	for _, tok := range loc {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// truncate is nbformat's _truncate_obj: long strings, lists and objects shortened, and cell
// and output lists summarised, so that a message stays readable.
func truncate(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		out := make(map[string]any, truncateItems+1)
		for _, k := range keys[:min(len(keys), truncateItems)] {
			out[k] = truncate(x[k])
		}
		for _, k := range []string{"cells", "outputs"} {
			if l, ok := x[k].([]any); ok {
				if _, kept := out[k]; kept {
					out[k] = []any{fmt.Sprintf("...%d %s...", len(l), k)}
				}
			}
		}
		if len(keys) > truncateItems {
			out["..."] = fmt.Sprintf("%d keys truncated", len(keys)-truncateItems)
		}
		return out
	case []any:
		out := make([]any, 0, min(len(x), truncateItems)+1)
		for _, e := range x[:min(len(x), truncateItems)] {
			out = append(out, truncate(e))
		}
		if len(x) > truncateItems {
			out = append(out, fmt.Sprintf("...%d items truncated...", len(x)-truncateItems))
		}
		return out
	case string:
		if utf8.RuneCountInString(x) > truncateStrings {
			return string([]rune(x)[:truncateStrings]) + "..."
		}
	}
	return v
}
