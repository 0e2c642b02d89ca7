package nbformat

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jsonspan"
	"github.com/nbkube/nbkube/internal/pytext"
)

// Notebook format written into new notebooks: what nbformat.v4.new_notebook writes.
const (
	nbformatMajor = 4
	nbformatMinor = 5
)

// decodeDepth is encoding/json's own limit of nesting, which decodeJSON kept before it
// decoded with jsonspan.
const decodeDepth = 10000

// decodeJSON decodes a JSON document keeping numbers as written, so that saving a notebook
// does not change them, and refuses trailing data.
func decodeJSON(data []byte) (any, error) {
	v, err := jsonspan.Decode(data, decodeDepth)
	if !errors.Is(err, jsonspan.ErrNotUTF8) {
		return v, err
	}
	// encoding/json reads what is not UTF-8 as U+FFFD, as Python's json reads a file
	// opened with errors="replace"; rare enough to take the slower decoder.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
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

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b)
}

// refusal is err, a reason nbformat cannot read a notebook, as the refusal of the notebook:
// domainerr.ErrInvalid, the reason as its message.
func refusal(err error) error {
	return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: err.Error(), Err: err}
}

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

// linesOf is Python's str.splitlines(keepends=True), as nbformat splits multi-line strings,
// in the shape of a decoded JSON array.
func linesOf(s string) []any {
	lines := []any{}
	for _, l := range pytext.SplitLines(s) {
		lines = append(lines, l)
	}
	return lines
}

// Write turns the notebook JSON a client saves (as stored or as Read returns it) into the
// bytes nbformat.write would store: in its own nbformat, ids repaired, transient fields
// stripped, lines split, keys sorted, indented by one space, non-ASCII kept (v4), and a
// final newline. What nbformat cannot write is refused with domainerr.ErrInvalid.
//
// The validation comes apart, as a function that returns Jupyter's "Notebook validation
// failed" message ("" when the notebook is valid), so that a save can validate while the
// bytes go to disk: an invalid notebook is saved all the same, as Jupyter saves it, so
// nothing about the write waits for the verdict. An export that does not validate never
// calls it.
func Write(content []byte) ([]byte, func() (string, error), error) {
	small, e := elideLargeStrings(content)
	nb, err := decodeNotebook(small)
	if err != nil {
		return nil, nil, err
	}
	if _, given := nb["nbformat"]; given {
		if major, _ := version(nb); major == 1 {
			return encodeV1ForWrite(content)
		}
	}
	if major, _ := version(nb); e != nil && major != nbformatMajor {
		// Older notebooks are converted and written their own way (ASCII only); they are
		// rare enough to decode whole.
		if nb, err = decodeNotebook(content); err != nil {
			return nil, nil, err
		}
		e = nil
	}
	return encodeForWriteElided(nb, e, len(content))
}

func decodeNotebook(content []byte) (map[string]any, error) {
	v, err := decodeJSON(content)
	if err != nil {
		return nil, domainerr.New(domainerr.ErrInvalid, "Unreadable notebook content: %v", err)
	}
	nb, ok := v.(map[string]any)
	if !ok {
		return nil, domainerr.New(domainerr.ErrInvalid, "Unreadable notebook content: not a JSON object")
	}
	return nb, nil
}

func writeNotebook(nb map[string]any) ([]byte, string, error) {
	data, validate, err := encodeForWrite(nb)
	if err != nil {
		return nil, "", err
	}
	msg, err := validate()
	return data, msg, err
}

// encodeForWrite normalizes nb and encodes it as nbformat.write does, in its own format (v3
// notebooks as write_v3.go writes them, v2 as write_v12.go). The returned validation works
// on a copy, so it may run concurrently with the write.
func encodeForWrite(nb map[string]any) ([]byte, func() (string, error), error) {
	return encodeForWriteElided(nb, nil, 0)
}

// encodeForWriteElided is encodeForWrite of a notebook decoded with its large strings elided
// (e, nil if none; see elide.go) from a body of size bytes.
func encodeForWriteElided(nb map[string]any, e *elided, size int) ([]byte, func() (string, error), error) {
	major, minor := version(nb)
	switch major {
	case 3:
		return encodeV3ForWrite(nb)
	case 2:
		return encodeV2ForWrite(nb)
	case nbformatMajor:
	default:
		// nbformat 1 needs the text (Write); anything else Jupyter fails to save.
		return nil, nil, domainerr.New(domainerr.ErrInvalid, "Unsupported nbformat version %v: nbformat 1 to 4 notebooks are stored, with their nbformat", nb["nbformat"])
	}
	if minor >= 5 {
		normalizeIDs(nb)
	}
	stripTransient(nb)
	// Validation reads its own copy: nb's strings are split into lines for writing meanwhile,
	// and a validation message must show the notebook as the client sent it.
	orig := deepCopyJSON(nb).(map[string]any)
	splitLines(nb)
	validate := func() (string, error) {
		msg, err := validateNotebook(orig)
		if msg != "" && e != nil {
			// The message quotes the notebook: with the client's strings, not placeholders.
			msg, err = validateNotebook(e.expand(orig).(map[string]any))
		}
		return msg, err
	}
	// The encoding is about the body's size (one-space indents, lines split); room for it at
	// once spares the copies of growing.
	return appendNotebookElided(make([]byte, 0, max(64<<10, size+size/8)), nb, e), validate, nil
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

// encodeNotebook is Write with its validation run: the bytes and the message.
func encodeNotebook(content []byte) ([]byte, string, error) {
	data, validate, err := Write(content)
	if err != nil {
		return nil, "", err
	}
	msg, err := validate()
	return data, msg, err
}

// New is an empty notebook as nbformat.v4.new_notebook writes it.
func New() ([]byte, error) {
	data, _, err := writeNotebook(map[string]any{
		"cells":          []any{},
		"metadata":       map[string]any{},
		"nbformat":       json.Number(strconv.Itoa(nbformatMajor)),
		"nbformat_minor": json.Number(strconv.Itoa(nbformatMinor)),
	})
	return data, err
}
