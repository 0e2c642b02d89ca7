package nbformat

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nbkube/nbkube/internal/jsonspan"
)

// Reading a notebook must give clients what Jupyter gives them: nbformat's reader joins the
// lists of lines that files store back into strings, strips transient fields, repairs cell
// ids, and Jupyter then marks every code cell trusted or not (we keep no signatures, so
// none is). Decoding the whole document into Go values and encoding it again to do that
// costs many times what copying its text does; notebookReader instead edits the JSON text
// where package jsonspan finds the values to change, and copies the rest byte for byte.

// maxJSONDepth is how deep a notebook's JSON may nest; Python's json stops near 1000 too.
const maxJSONDepth = 1000

// Metadata members that nbformat's reader strips as transient.
var (
	transientNotebookMetadata = []string{"orig_nbformat", "orig_nbformat_minor", "signature"}
	transientCellMetadata     = []string{"trusted"}
)

// notebookReader rewrites one notebook's JSON text into out.
type notebookReader struct {
	doc jsonspan.Doc
	out []byte
	// newIDs counts the cell ids made up (missing or repeated): random, so another read
	// gives others, as Jupyter's does.
	newIDs int
}

// Read returns the notebook JSON text b as nbformat's reader and Jupyter's get present it,
// the notebook's minor format version, and whether cell ids were made up (missing or
// repeated), which makes each read differ. A notebook of nbformat 1 to 3 is ErrOlderFormat
// (Upgrade reads it); anything else but a JSON object of nbformat 4 is refused with
// domainerr.ErrInvalid. Read does not validate: Validate does, separately, so that its
// verdict can be kept.
func Read(b []byte) (_ []byte, minor int, newIDs bool, _ error) {
	out, minor, newIDs, err := read(b)
	if err != nil && !errors.Is(err, ErrOlderFormat) {
		return nil, 0, false, refusal(err)
	}
	return out, minor, newIDs, err
}

func read(b []byte) (_ []byte, minor int, newIDs bool, _ error) {
	doc, top, err := jsonspan.ParseObject(b, maxJSONDepth)
	switch {
	case errors.Is(err, jsonspan.ErrNotUTF8):
		return nil, 0, false, fmt.Errorf("notebook is not UTF-8 encoded")
	case errors.Is(err, jsonspan.ErrNotObject):
		return nil, 0, false, fmt.Errorf("notebook does not appear to be a JSON object")
	case err != nil:
		return nil, 0, false, err
	}
	r := &notebookReader{doc: doc}
	major := 1
	if s, ok := jsonspan.Last(top, "nbformat"); ok {
		major = r.integer(s)
	}
	if s, ok := jsonspan.Last(top, "nbformat_minor"); ok {
		minor = r.integer(s)
	}
	if major >= 1 && major < nbformatMajor {
		return nil, 0, false, ErrOlderFormat
	}
	if major != nbformatMajor {
		return nil, 0, false, fmt.Errorf("Unsupported nbformat version %s", r.versionText(top)) //nolint:staticcheck // nbformat's message
	}
	r.out = make([]byte, 0, len(b)+len(b)/16)
	r.writeMembers(top, func(m jsonspan.Member) {
		switch m.Key {
		case "cells":
			r.writeCells(m.Value, minor >= 5)
		case "metadata":
			r.writeWithout(m.Value, transientNotebookMetadata, "")
		default:
			r.copySpan(m.Value)
		}
	})
	return r.out, minor, r.newIDs > 0, nil
}

func (r *notebookReader) integer(s jsonspan.Span) int {
	n, err := strconv.Atoi(string(r.doc.Text(s)))
	if err != nil {
		return -1
	}
	return n
}

func (r *notebookReader) versionText(top []jsonspan.Member) string {
	s, ok := jsonspan.Last(top, "nbformat")
	if !ok {
		return "(none)"
	}
	text := r.doc.Text(s)
	return string(text[:min(len(text), 32)])
}

func (r *notebookReader) copySpan(s jsonspan.Span) { r.out = append(r.out, r.doc.Text(s)...) }

// writeKey writes a member's key and colon, after a comma unless it is the first.
func (r *notebookReader) writeKey(m jsonspan.Member, first bool) {
	if !first {
		r.out = append(r.out, ',')
	}
	r.copySpan(m.KeyText)
	r.out = append(r.out, ':')
}

// writeMembers writes an object of members, each value written by value.
func (r *notebookReader) writeMembers(members []jsonspan.Member, value func(jsonspan.Member)) {
	r.out = append(r.out, '{')
	for i, m := range members {
		r.writeKey(m, i == 0)
		value(m)
	}
	r.out = append(r.out, '}')
}

// writeObject writes the object at s with each member's value written by value, or s as it
// is if it is not an object.
func (r *notebookReader) writeObject(s jsonspan.Span, value func(jsonspan.Member)) {
	members, ok := r.doc.Members(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.writeMembers(members, value)
}

// writeElements writes an array of elems, each written by elem.
func (r *notebookReader) writeElements(elems []jsonspan.Span, elem func(i int, e jsonspan.Span)) {
	r.out = append(r.out, '[')
	for i, e := range elems {
		if i > 0 {
			r.out = append(r.out, ',')
		}
		elem(i, e)
	}
	r.out = append(r.out, ']')
}

// writeWithout writes the object at s without the members named in drop, then extra (the
// text of more members, or ""), or s as it is if it is not an object.
func (r *notebookReader) writeWithout(s jsonspan.Span, drop []string, extra string) {
	members, ok := r.doc.Members(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.out = append(r.out, '{')
	first := true
	for _, m := range members {
		if slices.Contains(drop, m.Key) {
			continue
		}
		r.writeKey(m, first)
		r.copySpan(m.Value)
		first = false
	}
	if extra != "" {
		if !first {
			r.out = append(r.out, ',')
		}
		r.out = append(r.out, extra...)
	}
	r.out = append(r.out, '}')
}

// writeCells writes the cells array, repairing ids as nbformat's validate does when the
// notebook has them (4.5+): a missing or repeated id is replaced by a new one.
func (r *notebookReader) writeCells(s jsonspan.Span, withIDs bool) {
	elems, ok := r.doc.Elements(s)
	if !ok {
		r.copySpan(s)
		return
	}
	cells := make([][]jsonspan.Member, len(elems))
	objects := make([]bool, len(elems))
	newIDs := make([]string, len(elems))
	seen := make(map[string]bool, len(elems))
	for i, e := range elems {
		members, ok := r.doc.Members(e)
		if !ok {
			continue
		}
		cells[i], objects[i] = members, true
		if !withIDs {
			continue
		}
		idSpan, present := jsonspan.Last(members, "id")
		id, isString := "", false
		if present {
			id, isString = r.doc.StringValue(idSpan)
		}
		if !present || (isString && seen[id]) {
			id = newCellID()
			newIDs[i] = id
			r.newIDs++
		}
		seen[id] = true
	}
	r.writeElements(elems, func(i int, e jsonspan.Span) {
		if !objects[i] {
			r.copySpan(e)
			return
		}
		r.writeCell(cells[i], newIDs[i])
	})
}

func (r *notebookReader) writeCell(members []jsonspan.Member, newID string) {
	cellType := ""
	if s, ok := jsonspan.Last(members, "cell_type"); ok {
		cellType, _ = r.doc.StringValue(s)
	}
	code := cellType == "code"
	r.out = append(r.out, '{')
	hasID := false
	for i, m := range members {
		r.writeKey(m, i == 0)
		switch {
		case m.Key == "source":
			r.writeJoined(m.Value)
		case m.Key == "metadata":
			r.writeCellMetadata(m.Value, code)
		case m.Key == "outputs" && code:
			r.writeOutputs(m.Value)
		case m.Key == "attachments":
			r.writeObject(m.Value, func(a jsonspan.Member) { r.writeBundle(a.Value) })
		case m.Key == "id" && newID != "":
			r.out = strconv.AppendQuote(r.out, newID)
		default:
			r.copySpan(m.Value)
		}
		hasID = hasID || m.Key == "id"
	}
	if !hasID && newID != "" {
		if len(members) > 0 {
			r.out = append(r.out, ',')
		}
		r.out = append(r.out, `"id":`...)
		r.out = strconv.AppendQuote(r.out, newID)
	}
	r.out = append(r.out, '}')
}

// writeCellMetadata drops a stored trusted flag and, on code cells, marks the cell
// untrusted: without notebook signatures no cell is trusted, and clients must be told so
// explicitly (the classic notebook treats a missing flag as trusted).
func (r *notebookReader) writeCellMetadata(s jsonspan.Span, code bool) {
	extra := ""
	if code {
		extra = `"trusted":false`
	}
	r.writeWithout(s, transientCellMetadata, extra)
}

func (r *notebookReader) writeOutputs(s jsonspan.Span) {
	elems, ok := r.doc.Elements(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.writeElements(elems, func(_ int, e jsonspan.Span) {
		members, ok := r.doc.Members(e)
		if !ok {
			r.copySpan(e)
			return
		}
		outputType := ""
		if t, ok := jsonspan.Last(members, "output_type"); ok {
			outputType, _ = r.doc.StringValue(t)
		}
		bundle := outputType == "execute_result" || outputType == "display_data"
		r.writeMembers(members, func(m jsonspan.Member) {
			switch {
			case m.Key == "data" && bundle:
				r.writeBundle(m.Value)
			case m.Key == "text" && !bundle && outputType != "":
				r.writeJoined(m.Value)
			default:
				r.copySpan(m.Value)
			}
		})
	})
}

// writeBundle joins the lines of a mime bundle's values, except JSON ones, whose lists are
// data.
func (r *notebookReader) writeBundle(s jsonspan.Span) {
	r.writeObject(s, func(m jsonspan.Member) {
		if isJSONMime(m.Key) {
			r.copySpan(m.Value)
		} else {
			r.writeJoined(m.Value)
		}
	})
}

func isJSONMime(mime string) bool {
	return mime == "application/json" || (strings.HasPrefix(mime, "application/") && strings.HasSuffix(mime, "+json"))
}

// writeJoined writes a list of strings as one string, and anything else as it is.
func (r *notebookReader) writeJoined(s jsonspan.Span) {
	elems, ok := r.doc.Elements(s)
	if !ok {
		r.copySpan(s)
		return
	}
	for _, e := range elems {
		if _, ok := r.doc.RawString(e); !ok {
			r.copySpan(s)
			return
		}
	}
	r.out = append(r.out, '"')
	for _, e := range elems {
		raw, _ := r.doc.RawString(e)
		r.out = append(r.out, raw...)
	}
	r.out = append(r.out, '"')
}
