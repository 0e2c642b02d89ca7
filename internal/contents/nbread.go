package contents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reading a notebook must give clients what Jupyter gives them: nbformat's reader joins the
// lists of lines that files store back into strings, strips transient fields, repairs cell
// ids, and Jupyter then marks every code cell trusted or not (we keep no signatures, so
// none is). Decoding the whole document into Go values and encoding it again does that at a
// few MB/s; notebookReader instead edits the JSON text in one validating pass, copying
// everything it does not change byte for byte. Joining a list of JSON strings is a matter of
// dropping the quotes between them, since every escape is contained in its own string.

// jsonSpan is the text of a JSON value: b[start:end].
type jsonSpan struct{ start, end int }

// jsonMember is a member of a JSON object: its decoded key, the key's text and its value.
type jsonMember struct {
	key     string
	keyText jsonSpan
	value   jsonSpan
}

// notebookReader scans and rewrites one notebook's JSON text. It validates the whole text
// once; after that (validated), rescanning a value to pick its members out only looks for the
// ends of strings, at memchr speed, since images and outputs are long strings several levels
// deep.
type notebookReader struct {
	b         []byte
	out       []byte
	validated bool
}

func (r *notebookReader) syntaxError(i int) error {
	if i >= len(r.b) {
		return fmt.Errorf("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid character %q at offset %d", r.b[i], i)
}

func (r *notebookReader) space(i int) int {
	for i < len(r.b) {
		switch r.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value validates the JSON value at i (after white space) and returns its span.
func (r *notebookReader) value(i, depth int) (jsonSpan, error) {
	i = r.space(i)
	if i >= len(r.b) {
		return jsonSpan{}, r.syntaxError(i)
	}
	var end int
	var err error
	switch c := r.b[i]; {
	case c == '{':
		_, end, err = r.object(i, depth+1, false)
	case c == '[':
		_, end, err = r.array(i, depth+1, false)
	case c == '"':
		end, err = r.str(i)
	case c == 't':
		end, err = r.literal(i, "true")
	case c == 'f':
		end, err = r.literal(i, "false")
	case c == 'n':
		end, err = r.literal(i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		end, err = r.number(i)
	default:
		err = r.syntaxError(i)
	}
	return jsonSpan{i, end}, err
}

func (r *notebookReader) literal(i int, lit string) (int, error) {
	if !bytes.HasPrefix(r.b[i:], []byte(lit)) {
		return i, r.syntaxError(i)
	}
	return i + len(lit), nil
}

func (r *notebookReader) digits(i int) int {
	for i < len(r.b) && r.b[i] >= '0' && r.b[i] <= '9' {
		i++
	}
	return i
}

func (r *notebookReader) number(i int) (int, error) {
	start := i
	if r.b[i] == '-' {
		i++
	}
	switch {
	case i < len(r.b) && r.b[i] == '0':
		i++
	case i < len(r.b) && r.b[i] >= '1' && r.b[i] <= '9':
		i = r.digits(i)
	default:
		return start, r.syntaxError(i)
	}
	if i < len(r.b) && r.b[i] == '.' {
		j := r.digits(i + 1)
		if j == i+1 {
			return start, r.syntaxError(j)
		}
		i = j
	}
	if i < len(r.b) && (r.b[i] == 'e' || r.b[i] == 'E') {
		i++
		if i < len(r.b) && (r.b[i] == '+' || r.b[i] == '-') {
			i++
		}
		j := r.digits(i)
		if j == i {
			return start, r.syntaxError(j)
		}
		i = j
	}
	return i, nil
}

// str validates the string at i; the whole input was checked to be UTF-8 beforehand.
func (r *notebookReader) str(i int) (int, error) {
	if r.validated {
		return r.skipString(i), nil
	}
	for i++; i < len(r.b); {
		switch c := r.b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(r.b) {
				return i, r.syntaxError(i + 1)
			}
			switch r.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(r.b) {
					return i, r.syntaxError(len(r.b))
				}
				for _, h := range r.b[i+2 : i+6] {
					if !isHex(h) {
						return i, fmt.Errorf("invalid escape in string at offset %d", i)
					}
				}
				i += 6
			default:
				return i, fmt.Errorf("invalid escape in string at offset %d", i)
			}
		case c < 0x20:
			return i, r.syntaxError(i)
		default:
			i++
		}
	}
	return i, r.syntaxError(i)
}

// skipString returns the end of the valid string at i: the first quote that an even number of
// backslashes precedes.
func (r *notebookReader) skipString(i int) int {
	for i++; ; {
		j := bytes.IndexByte(r.b[i:], '"')
		if j < 0 {
			return len(r.b)
		}
		i += j
		k := i - 1
		for r.b[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1
		}
		i++
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// object validates the object at i and returns its members if collect is set.
func (r *notebookReader) object(i, depth int, collect bool) ([]jsonMember, int, error) {
	if depth > maxJSONDepth {
		return nil, i, fmt.Errorf("JSON nested deeper than %d at offset %d", maxJSONDepth, i)
	}
	var members []jsonMember
	i = r.space(i + 1)
	if i < len(r.b) && r.b[i] == '}' {
		return members, i + 1, nil
	}
	for {
		if i >= len(r.b) || r.b[i] != '"' {
			return nil, i, r.syntaxError(i)
		}
		keyEnd, err := r.str(i)
		if err != nil {
			return nil, i, err
		}
		m := jsonMember{keyText: jsonSpan{i, keyEnd}}
		i = r.space(keyEnd)
		if i >= len(r.b) || r.b[i] != ':' {
			return nil, i, r.syntaxError(i)
		}
		if m.value, err = r.value(i+1, depth); err != nil {
			return nil, i, err
		}
		if collect {
			if m.key, err = r.decodeString(m.keyText); err != nil {
				return nil, i, err
			}
			members = append(members, m)
		}
		i = r.space(m.value.end)
		if i < len(r.b) && r.b[i] == ',' {
			i = r.space(i + 1)
			continue
		}
		if i < len(r.b) && r.b[i] == '}' {
			return members, i + 1, nil
		}
		return nil, i, r.syntaxError(i)
	}
}

// array validates the array at i and returns its elements if collect is set.
func (r *notebookReader) array(i, depth int, collect bool) ([]jsonSpan, int, error) {
	if depth > maxJSONDepth {
		return nil, i, fmt.Errorf("JSON nested deeper than %d at offset %d", maxJSONDepth, i)
	}
	var elems []jsonSpan
	i = r.space(i + 1)
	if i < len(r.b) && r.b[i] == ']' {
		return elems, i + 1, nil
	}
	for {
		v, err := r.value(i, depth)
		if err != nil {
			return nil, i, err
		}
		if collect {
			elems = append(elems, v)
		}
		i = r.space(v.end)
		if i < len(r.b) && r.b[i] == ',' {
			i++
			continue
		}
		if i < len(r.b) && r.b[i] == ']' {
			return elems, i + 1, nil
		}
		return nil, i, r.syntaxError(i)
	}
}

// decodeString decodes a validated string; most keys have no escapes and need no decoder.
func (r *notebookReader) decodeString(s jsonSpan) (string, error) {
	text := r.b[s.start:s.end]
	if bytes.IndexByte(text, '\\') < 0 {
		return string(text[1 : len(text)-1]), nil
	}
	var v string
	err := json.Unmarshal(text, &v)
	return v, err
}

// members returns the members of the object at s, or false if s is not an object.
func (r *notebookReader) members(s jsonSpan) ([]jsonMember, bool) {
	if r.b[s.start] != '{' {
		return nil, false
	}
	// The value was validated when its parent was scanned: this cannot fail.
	m, _, err := r.object(s.start, 0, true)
	return m, err == nil
}

// stringValue returns the string at s, or false if s is not a string.
func (r *notebookReader) stringValue(s jsonSpan) (string, bool) {
	if r.b[s.start] != '"' {
		return "", false
	}
	v, err := r.decodeString(s)
	return v, err == nil
}

func last(members []jsonMember, key string) (jsonSpan, bool) {
	for i := len(members) - 1; i >= 0; i-- {
		if members[i].key == key {
			return members[i].value, true
		}
	}
	return jsonSpan{}, false
}

func (r *notebookReader) copySpan(s jsonSpan) { r.out = append(r.out, r.b[s.start:s.end]...) }

// writeMember writes a member's key and colon, after a comma unless it is the first.
func (r *notebookReader) writeKey(m jsonMember, first bool) {
	if !first {
		r.out = append(r.out, ',')
	}
	r.copySpan(m.keyText)
	r.out = append(r.out, ':')
}

// transformNotebook returns the notebook JSON text b as nbformat's reader and Jupyter's
// get present it, and the notebook's minor format version. Anything but a JSON object of
// nbformat 4 is an error.
func transformNotebook(b []byte) ([]byte, int, error) {
	if !utf8.Valid(b) {
		return nil, 0, fmt.Errorf("notebook is not UTF-8 encoded")
	}
	r := &notebookReader{b: b}
	start := r.space(0)
	if start >= len(b) || b[start] != '{' {
		return nil, 0, fmt.Errorf("notebook does not appear to be a JSON object")
	}
	top, end, err := r.object(start, 1, true)
	if err != nil {
		return nil, 0, err
	}
	if end = r.space(end); end != len(b) {
		return nil, 0, r.syntaxError(end)
	}
	r.validated = true
	major, minor := 1, 0
	if s, ok := last(top, "nbformat"); ok {
		major = r.integer(s)
	}
	if s, ok := last(top, "nbformat_minor"); ok {
		minor = r.integer(s)
	}
	if major != nbformatMajor {
		return nil, 0, fmt.Errorf("unsupported nbformat version %s: only nbformat 4 notebooks are served", r.versionText(top))
	}
	r.out = make([]byte, 0, len(b)+len(b)/16)
	r.out = append(r.out, '{')
	for i, m := range top {
		r.writeKey(m, i == 0)
		switch m.key {
		case "cells":
			r.writeCells(m.value, minor >= 5)
		case "metadata":
			r.writeWithout(m.value, "orig_nbformat", "orig_nbformat_minor", "signature")
		default:
			r.copySpan(m.value)
		}
	}
	r.out = append(r.out, '}')
	return r.out, minor, nil
}

func (r *notebookReader) integer(s jsonSpan) int {
	n, err := strconv.Atoi(string(r.b[s.start:s.end]))
	if err != nil {
		return -1
	}
	return n
}

func (r *notebookReader) versionText(top []jsonMember) string {
	s, ok := last(top, "nbformat")
	if !ok {
		return "(none)"
	}
	return string(r.b[s.start:min(s.end, s.start+32)])
}

// writeWithout writes the object at s without the given keys (or s as it is if it is not an
// object), then extra members.
func (r *notebookReader) writeWithout(s jsonSpan, drop ...string) {
	members, ok := r.members(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.out = append(r.out, '{')
	first := true
	for _, m := range members {
		if slices.Contains(drop, m.key) {
			continue
		}
		r.writeKey(m, first)
		r.copySpan(m.value)
		first = false
	}
	r.out = append(r.out, '}')
}

// writeCells writes the cells array, repairing ids as nbformat's validate does when the
// notebook has them (4.5+): a missing or repeated id is replaced by a new one.
func (r *notebookReader) writeCells(s jsonSpan, withIDs bool) {
	if r.b[s.start] != '[' {
		r.copySpan(s)
		return
	}
	elems, _, _ := r.array(s.start, 0, true)
	cells := make([][]jsonMember, len(elems))
	objects := make([]bool, len(elems))
	newIDs := make([]string, len(elems))
	seen := make(map[string]bool, len(elems))
	for i, e := range elems {
		members, ok := r.members(e)
		if !ok {
			continue
		}
		cells[i], objects[i] = members, true
		if !withIDs {
			continue
		}
		idSpan, present := last(members, "id")
		id, isString := "", false
		if present {
			id, isString = r.stringValue(idSpan)
		}
		if !present || (isString && seen[id]) {
			id = newCellID()
			newIDs[i] = id
		}
		seen[id] = true
	}
	r.out = append(r.out, '[')
	for i, e := range elems {
		if i > 0 {
			r.out = append(r.out, ',')
		}
		if !objects[i] {
			r.copySpan(e)
			continue
		}
		r.writeCell(cells[i], newIDs[i])
	}
	r.out = append(r.out, ']')
}

func (r *notebookReader) writeCell(members []jsonMember, newID string) {
	cellType := ""
	if s, ok := last(members, "cell_type"); ok {
		cellType, _ = r.stringValue(s)
	}
	code := cellType == "code"
	r.out = append(r.out, '{')
	hasID := false
	for i, m := range members {
		r.writeKey(m, i == 0)
		switch {
		case m.key == "source":
			r.writeJoined(m.value)
		case m.key == "metadata":
			r.writeCellMetadata(m.value, code)
		case m.key == "outputs" && code:
			r.writeOutputs(m.value)
		case m.key == "attachments":
			r.writeAttachments(m.value)
		case m.key == "id" && newID != "":
			r.out = strconv.AppendQuote(r.out, newID)
		default:
			r.copySpan(m.value)
		}
		hasID = hasID || m.key == "id"
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
func (r *notebookReader) writeCellMetadata(s jsonSpan, code bool) {
	if !code {
		r.writeWithout(s, "trusted")
		return
	}
	members, ok := r.members(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.out = append(r.out, '{')
	first := true
	for _, m := range members {
		if m.key == "trusted" {
			continue
		}
		r.writeKey(m, first)
		r.copySpan(m.value)
		first = false
	}
	if !first {
		r.out = append(r.out, ',')
	}
	r.out = append(r.out, `"trusted":false}`...)
}

func (r *notebookReader) writeOutputs(s jsonSpan) {
	if r.b[s.start] != '[' {
		r.copySpan(s)
		return
	}
	elems, _, _ := r.array(s.start, 0, true)
	r.out = append(r.out, '[')
	for i, e := range elems {
		if i > 0 {
			r.out = append(r.out, ',')
		}
		members, ok := r.members(e)
		if !ok {
			r.copySpan(e)
			continue
		}
		outputType := ""
		if t, ok := last(members, "output_type"); ok {
			outputType, _ = r.stringValue(t)
		}
		bundle := outputType == "execute_result" || outputType == "display_data"
		r.out = append(r.out, '{')
		for j, m := range members {
			r.writeKey(m, j == 0)
			switch {
			case m.key == "data" && bundle:
				r.writeBundle(m.value)
			case m.key == "text" && !bundle && outputType != "":
				r.writeJoined(m.value)
			default:
				r.copySpan(m.value)
			}
		}
		r.out = append(r.out, '}')
	}
	r.out = append(r.out, ']')
}

func (r *notebookReader) writeAttachments(s jsonSpan) {
	members, ok := r.members(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.out = append(r.out, '{')
	for i, m := range members {
		r.writeKey(m, i == 0)
		r.writeBundle(m.value)
	}
	r.out = append(r.out, '}')
}

// writeBundle joins the lines of a mime bundle's values, except JSON ones, whose lists are
// data.
func (r *notebookReader) writeBundle(s jsonSpan) {
	members, ok := r.members(s)
	if !ok {
		r.copySpan(s)
		return
	}
	r.out = append(r.out, '{')
	for i, m := range members {
		r.writeKey(m, i == 0)
		if isJSONMime(m.key) {
			r.copySpan(m.value)
		} else {
			r.writeJoined(m.value)
		}
	}
	r.out = append(r.out, '}')
}

func isJSONMime(mime string) bool {
	return mime == "application/json" || (strings.HasPrefix(mime, "application/") && strings.HasSuffix(mime, "+json"))
}

// writeJoined writes a list of strings as one string, and anything else as it is.
func (r *notebookReader) writeJoined(s jsonSpan) {
	if r.b[s.start] != '[' {
		r.copySpan(s)
		return
	}
	elems, _, _ := r.array(s.start, 0, true)
	for _, e := range elems {
		if r.b[e.start] != '"' {
			r.copySpan(s)
			return
		}
	}
	r.out = append(r.out, '"')
	for _, e := range elems {
		r.out = append(r.out, r.b[e.start+1:e.end-1]...)
	}
	r.out = append(r.out, '"')
}
