package nbformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Notebooks older than nbformat 4 are read as Jupyter reads them: nbformat.read(f,
// as_version=4) runs the reader of the file's own major version (which joins its lists of
// lines), then upgrades one major version at a time, v1 → v2 → v3 → v4 (upgrade_v1.go,
// upgrade_v2.go, upgrade_v3.go). The rules are nbformat 5.5's, quirks included, because
// clients see what Jupyter would show them: a v1 notebook comes out marked orig_nbformat 2
// (the v2 → v3 step stamps it), a v2 notebook's lines are joined with "\n" where v3's keep
// their own ends, heading levels go on the page as "#" characters, and so on. Each step
// mutates the decoded notebook in place, as nbformat's do.
//
// Where nbformat fails (a missing key, a value of a type it cannot use) the notebook is
// refused as unreadable, as Jupyter refuses it, with nbformat's message where it has one. A
// few inputs nbformat turns into something are refused instead: v1 cells of a type other
// than code and text, which nbformat replaces by a copy of the cell before (so a few bytes
// could repeat a large cell many times over); v1 cells whose code or text is a list or an
// object (Python's str() of those); integer strings with non-ASCII digits. Heading levels
// are bounded (see headingBudget), and the JSON of v3 "json" outputs is parsed no deeper
// than notebooks may nest.
//
// The result is not to be cached: each read converts again, with new cell ids, as Jupyter's
// does; a save writes what the client sends (Write).

// ErrOlderFormat is what Read returns for a notebook of nbformat 1 to 3, which the text edit
// of read.go cannot present: Upgrade decodes and upgrades it.
var ErrOlderFormat = errors.New("notebook is older than nbformat 4")

// Upgrade returns the notebook JSON text data of nbformat 1 to 3 upgraded to nbformat 4 as
// Jupyter's get returns it, and its validation message ("" when it is valid). What
// nbformat cannot read is refused with domainerr.ErrInvalid. Decoding, converting,
// validating and encoding again is the work of a save: it costs what a save costs.
func Upgrade(data []byte) (json.RawMessage, string, error) {
	nb, err := upgradeText(data)
	if err != nil {
		return nil, "", refusal(err)
	}
	msg, err := validateNotebook(nb)
	if err != nil {
		return nil, "", err
	}
	if err := markUntrusted(nb); err != nil {
		return nil, "", refusal(err)
	}
	content, err := encodeCompact(nb)
	if err != nil {
		return nil, "", err
	}
	return content, msg, nil
}

// upgradeText is nbformat.reads(data, as_version=4) of the text of a notebook that
// Read found older than nbformat 4 (a JSON object nested no deeper than
// notebooks may be), before validation.
func upgradeText(data []byte) (map[string]any, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	nb, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("notebook does not appear to be a JSON object")
	}
	major, _ := version(nb)
	nb, err = upgradeNotebook(nb, major, headingBudget(len(data)))
	if err != nil {
		return nil, err
	}
	// nbformat's read validates after converting, and validate repairs repeated ids.
	normalizeIDs(nb)
	return nb, nil
}

// upgradeNotebook is nbformat.reads(text, as_version=4) for a decoded notebook of the given
// major version (1, 2 or 3): its version's reader, then each upgrade in turn. It returns the
// nbformat 4.5 notebook, which may share values with nb.
func upgradeNotebook(nb map[string]any, major int, budget *int) (map[string]any, error) {
	var err error
	switch major {
	case 1:
		if nb, err = upgradeV1(nb); err != nil {
			return nil, err
		}
		if err := upgradeV2(nb); err != nil {
			return nil, err
		}
	case 2:
		if err := readV2(nb); err != nil {
			return nil, err
		}
		if err := upgradeV2(nb); err != nil {
			return nil, err
		}
	case 3:
		if err := readV3(nb); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("Unsupported nbformat version %v", nb["nbformat"]) //nolint:staticcheck // nbformat's message
	}
	if err := upgradeV3(nb, budget); err != nil {
		return nil, err
	}
	return nb, nil
}

// headingBudget bounds the "#" characters that heading levels may add to a notebook of size
// bytes: nbformat writes as many as the level says, so one number in a small file could
// otherwise ask for gigabytes.
func headingBudget(size int) *int {
	b := 1<<20 + size
	return &b
}

// markUntrusted is Jupyter's mark_trusted_cells for a notebook without a valid signature
// (nbkube keeps none): every code cell's metadata says trusted false. Jupyter fails on a
// code cell whose metadata is not an object.
func markUntrusted(nb map[string]any) error {
	cells, _ := nb["cells"].([]any)
	for _, c := range cells {
		cell, _ := c.(map[string]any)
		if cell["cell_type"] != "code" {
			continue
		}
		md, ok := cell["metadata"].(map[string]any)
		if !ok {
			return errors.New("code cell metadata is not an object")
		}
		md["trusted"] = false
	}
	return nil
}

// encodeCompact encodes a decoded notebook as compact JSON, numbers as they were written.
func encodeCompact(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode notebook: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// What follows is the little of Python's data model that nbformat's conversions lean on.

// readerError is nbformat's reader's message for an AttributeError: a key it expects is
// missing, or a value is not the object it takes it for.
func readerError(what string) error {
	return fmt.Errorf("The notebook is invalid and is missing an expected key: %s", what) //nolint:staticcheck // nbformat's message
}

// convertError is nbformat.convert's message for an AttributeError in the step from one
// major version to the next.
func convertError(from int, what string) error {
	return fmt.Errorf("Notebook could not be converted from version %d to version %d because it's missing a key: %s", from, from+1, what) //nolint:staticcheck // nbformat's message
}

// attr is Python's v.key on nbformat's NotebookNode: the member of an object, and an
// AttributeError's text (the key, or what v is) when there is none.
func attr(v any, key string) (any, string, bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("'%s' object has no attribute '%s'", pyType(v), key), false
	}
	x, ok := obj[key]
	if !ok {
		return nil, key, false
	}
	return x, "", true
}

// pyType is the name of the Python type json.loads makes of v.
func pyType(v any) string {
	switch t := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case json.Number:
		if isPyInt(t) {
			return "int"
		}
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	default:
		return "dict"
	}
}

// pyIter is what a Python for loop over v gives nbformat's conversions, whose loop bodies
// use each element as an object: a list's elements, or nothing for an empty string or
// object. A non-empty string or object (whose characters or keys have no attributes) and
// anything else (not iterable) fail.
func pyIter(v any, what string) ([]any, error) {
	switch t := v.(type) {
	case []any:
		return t, nil
	case string:
		if t == "" {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: 'str' object has no attribute of a notebook object", what)
	case map[string]any:
		if len(t) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: 'str' object (a key) has no attribute of a notebook object", what)
	}
	return nil, fmt.Errorf("%s: '%s' object is not iterable", what, pyType(v))
}

// pyTruthy is Python's bool(v).
func pyTruthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		return err != nil || f != 0
	case string:
		return t != ""
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return true
}

// isPyInt says whether json.loads makes a Python int of a JSON number: one without a
// fraction or an exponent.
func isPyInt(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// pyIntValue is the value of a JSON number that Python reads as an int, or of a bool (a
// Python int too); ok is false for anything else.
func pyIntValue(v any) (*big.Int, bool) {
	switch t := v.(type) {
	case bool:
		if t {
			return big.NewInt(1), true
		}
		return big.NewInt(0), true
	case json.Number:
		if !isPyInt(t) {
			return nil, false
		}
		i, ok := new(big.Int).SetString(string(t), 10)
		return i, ok
	}
	return nil, false
}

// pyInt is Python's int(v) for the values nbformat's v1 → v2 upgrade passes it: ints and
// bools, floats (truncated), and strings of decimal digits (white space, a sign and single
// underscores between digits allowed). Strings of other digits Python knows are refused.
func pyInt(v any) (json.Number, error) {
	if i, ok := pyIntValue(v); ok {
		return json.Number(i.String()), nil
	}
	switch t := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return "", errors.New("cannot convert float infinity to integer")
		}
		i, _ := big.NewFloat(f).Int(nil)
		return json.Number(i.String()), nil
	case string:
		if i, ok := parsePyIntString(t); ok {
			return json.Number(i.String()), nil
		}
		return "", fmt.Errorf("invalid literal for int() with base 10: %q", t)
	}
	return "", fmt.Errorf("int() argument must be a string, a bytes-like object or a real number, not '%s'", pyType(v))
}

func parsePyIntString(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, pyIsSpace)
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return nil, false
	}
	digits := strings.ReplaceAll(s, "_", "")
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return nil, false
		}
	}
	return new(big.Int).SetString(sign+digits, 10)
}

// pyStr is Python's str(v) for the scalars a v1 notebook holds where nbformat calls str():
// strings, numbers and bools. Lists and objects are refused.
func pyStr(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case bool:
		if t {
			return "True", nil
		}
		return "False", nil
	case json.Number:
		if i, ok := pyIntValue(t); ok {
			return i.String(), nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !math.IsInf(f, 0) {
			return "", err
		}
		return pyFloatRepr(f), nil
	}
	return "", fmt.Errorf("a %s where nbformat 1 has text", pyType(v))
}

// pyFloatRepr is Python's repr of a float: the shortest digits that read back as f, in
// positional notation when the decimal exponent is from -4 to 15, else in scientific
// notation with at least two exponent digits.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±dd
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		e := fmt.Sprintf("%+03d", exp)
		return sign + m + "e" + e
	}
	point := exp + 1
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
	}
	return sign + digits[:point] + "." + digits[point:]
}

// pyIsSpace is Python's str.isspace for one character: Unicode white space and the four
// information separators U+001C to U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pySplitLines is Python's str.splitlines() without the line ends.
func pySplitLines(s string) []string {
	lines := linesOf(s)
	out := make([]string, len(lines))
	for i, l := range lines {
		line := l.(string)
		switch {
		case strings.HasSuffix(line, "\r\n"):
			line = line[:len(line)-2]
		case isLineEnd(line):
			_, size := utf8.DecodeLastRuneInString(line)
			line = line[:len(line)-size]
		}
		out[i] = line
	}
	return out
}

// isLineEnd says whether the last character of s ends a line for str.splitlines.
func isLineEnd(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// joinStrings is Python's sep.join(v) of a list nbformat expects to hold strings.
func joinStrings(v []any, sep string) (string, error) {
	var b strings.Builder
	for i, x := range v {
		s, ok := x.(string)
		if !ok {
			return "", fmt.Errorf("sequence item %d: expected str instance, %s found", i, pyType(x))
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// eachWorksheetCell calls fn for each cell of each worksheet of a v3 (or v2) notebook, in
// order, as nbformat's code walks them; noCells is the error of a worksheet without "cells".
func eachWorksheetCell(worksheets any, noCells error, fn func(cell any) error) error {
	wss, err := pyIter(worksheets, "worksheets")
	if err != nil {
		return err
	}
	for _, w := range wss {
		ws, ok := w.(map[string]any)
		if !ok {
			return fmt.Errorf("a worksheet is a %s, not an object", pyType(w))
		}
		cellsValue, ok := ws["cells"]
		if !ok {
			return noCells
		}
		cells, err := pyIter(cellsValue, "cells")
		if err != nil {
			return err
		}
		for _, c := range cells {
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return nil
}
