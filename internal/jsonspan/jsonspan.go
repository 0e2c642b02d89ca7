// Package jsonspan finds where the values of a JSON document lie in its text, without decoding
// them, so that a program can copy most of a document byte for byte and rewrite only the
// values it must change. Decoding a large document into Go values and encoding it again costs
// far more than copying its text, most of which (long strings several levels deep) is never
// looked at.
//
// ParseObject validates the whole text once: RFC 8259's grammar, as encoding/json accepts it,
// in UTF-8 only, and nested no deeper than the caller allows, so that hostile input cannot
// exhaust the stack. A Doc is only ever made from valid text, so picking the members or
// elements of one of its values out afterwards needs no checks: it looks only for the ends of
// strings, at memchr speed.
//
// AppendString and AppendEscaped go the other way: they write a string as JSON text, as
// encoding/json does but with U+2028 and U+2029 kept as Python's json keeps them, for the
// encoders of notebooks (package nbformat) and of Jupyter's models (package jupyter).
//
// The package uses the standard library only.
package jsonspan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Errors of ParseObject for text that is not a JSON object at all, before any syntax check.
var (
	ErrNotUTF8   = errors.New("JSON text is not UTF-8 encoded")
	ErrNotObject = errors.New("JSON text is not an object")
)

// Span is the text of a JSON value: Doc's text from Start up to End.
type Span struct{ Start, End int }

// Member is a member of a JSON object: its decoded key, the key's text and its value.
type Member struct {
	Key     string
	KeyText Span
	Value   Span
}

// Doc is the text of a valid JSON document, as ParseObject returns it.
type Doc struct {
	b         []byte
	maxDepth  int
	validated bool
}

// ParseObject validates b as one JSON object, with only white space around it, whose objects
// and arrays nest at most maxDepth deep (the object itself counting as one), and returns its
// members in the order written, repeated keys included. b must not change while the Doc is in
// use.
func ParseObject(b []byte, maxDepth int) (Doc, []Member, error) {
	if !utf8.Valid(b) {
		return Doc{}, nil, ErrNotUTF8
	}
	d := Doc{b: b, maxDepth: maxDepth}
	start := d.space(0)
	if start >= len(b) || b[start] != '{' {
		return Doc{}, nil, ErrNotObject
	}
	members, end, err := d.object(start, 1, true)
	if err != nil {
		return Doc{}, nil, err
	}
	if end = d.space(end); end != len(b) {
		return Doc{}, nil, d.syntaxError(end)
	}
	d.validated = true
	return d, members, nil
}

// Text returns the text of s.
func (d *Doc) Text(s Span) []byte { return d.b[s.Start:s.End] }

// Members returns the members of the object at s in the order written, or false if s is not
// an object.
func (d *Doc) Members(s Span) ([]Member, bool) {
	if d.b[s.Start] != '{' {
		return nil, false
	}
	// The value was validated with the whole document: this cannot fail.
	m, _, err := d.object(s.Start, 0, true)
	return m, err == nil
}

// Elements returns the elements of the array at s, or false if s is not an array.
func (d *Doc) Elements(s Span) ([]Span, bool) {
	if d.b[s.Start] != '[' {
		return nil, false
	}
	e, _, err := d.array(s.Start, 0, true)
	return e, err == nil
}

// StringValue returns the decoded string at s, or false if s is not a string.
func (d *Doc) StringValue(s Span) (string, bool) {
	if d.b[s.Start] != '"' {
		return "", false
	}
	return d.text(s.Start, s.End, nil), true
}

// RawString returns the text of the string at s between its quotes, escapes as written, or
// false if s is not a string. Every escape lies within its own string, so the raw texts of
// several strings, put between one pair of quotes, are the JSON string of their
// concatenation (except that halves of a surrogate pair escaped in two strings join into one
// character, as they do when Python joins the strings).
func (d *Doc) RawString(s Span) ([]byte, bool) {
	if d.b[s.Start] != '"' {
		return nil, false
	}
	return d.b[s.Start+1 : s.End-1], true
}

// Last returns the value of the last member named key, which is the one encoding/json and
// Python's json keep.
func Last(members []Member, key string) (Span, bool) {
	for i := len(members) - 1; i >= 0; i-- {
		if members[i].Key == key {
			return members[i].Value, true
		}
	}
	return Span{}, false
}

func (d *Doc) syntaxError(i int) error {
	if i >= len(d.b) {
		return fmt.Errorf("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid character %q at offset %d", d.b[i], i)
}

func (d *Doc) space(i int) int {
	for i < len(d.b) {
		switch d.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value validates the JSON value at i (after white space) and returns its span.
func (d *Doc) value(i, depth int) (Span, error) {
	i = d.space(i)
	if i >= len(d.b) {
		return Span{}, d.syntaxError(i)
	}
	var end int
	var err error
	switch c := d.b[i]; {
	case c == '{':
		_, end, err = d.object(i, depth+1, false)
	case c == '[':
		_, end, err = d.array(i, depth+1, false)
	case c == '"':
		end, err = d.str(i)
	case c == 't':
		end, err = d.literal(i, "true")
	case c == 'f':
		end, err = d.literal(i, "false")
	case c == 'n':
		end, err = d.literal(i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		end, err = d.number(i)
	default:
		err = d.syntaxError(i)
	}
	return Span{i, end}, err
}

func (d *Doc) literal(i int, lit string) (int, error) {
	if !bytes.HasPrefix(d.b[i:], []byte(lit)) {
		return i, d.syntaxError(i)
	}
	return i + len(lit), nil
}

func (d *Doc) digits(i int) int {
	for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
		i++
	}
	return i
}

func (d *Doc) number(i int) (int, error) {
	start := i
	if d.b[i] == '-' {
		i++
	}
	switch {
	case i < len(d.b) && d.b[i] == '0':
		i++
	case i < len(d.b) && d.b[i] >= '1' && d.b[i] <= '9':
		i = d.digits(i)
	default:
		return start, d.syntaxError(i)
	}
	if i < len(d.b) && d.b[i] == '.' {
		j := d.digits(i + 1)
		if j == i+1 {
			return start, d.syntaxError(j)
		}
		i = j
	}
	if i < len(d.b) && (d.b[i] == 'e' || d.b[i] == 'E') {
		i++
		if i < len(d.b) && (d.b[i] == '+' || d.b[i] == '-') {
			i++
		}
		j := d.digits(i)
		if j == i {
			return start, d.syntaxError(j)
		}
		i = j
	}
	return i, nil
}

// str validates the string at i; the whole input was checked to be UTF-8 beforehand.
func (d *Doc) str(i int) (int, error) {
	if d.validated {
		return d.skipString(i), nil
	}
	for i++; i < len(d.b); {
		// Eight bytes at a time while none ends the string, escapes or is a control
		// character: a base64 image of a megabyte is passed over in a fraction of a millisecond.
		for i+8 <= len(d.b) && plain8(binary.LittleEndian.Uint64(d.b[i:])) {
			i += 8
		}
		if i >= len(d.b) {
			break
		}
		switch c := d.b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(d.b) {
				return i, d.syntaxError(i + 1)
			}
			switch d.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d.b) {
					return i, d.syntaxError(len(d.b))
				}
				for _, h := range d.b[i+2 : i+6] {
					if !isHex(h) {
						return i, fmt.Errorf("invalid escape in string at offset %d", i)
					}
				}
				i += 6
			default:
				return i, fmt.Errorf("invalid escape in string at offset %d", i)
			}
		case c < 0x20:
			return i, d.syntaxError(i)
		default:
			i++
		}
	}
	return i, d.syntaxError(i)
}

// plain8 says none of the eight bytes of w is a quote, a backslash or below 0x20: each is
// a character of a string as it is (UTF-8 was checked beforehand). Each test is the classic
// one for a byte below n, (w - n·ones) &^ w in the high bits, which borrows across bytes only
// from a byte that is below n: exact as to whether there is one.
func plain8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	control := (w - 0x20*ones) &^ w
	return (control|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs == 0
}

// plainASCII8 says each of the eight bytes of w (little-endian: w's low byte first) is
// ASCII that a JSON string holds as it is: no quote, backslash, control character or byte
// of a multi-byte character. Encoders copy such runs of a string without looking closer.
func plainASCII8(w uint64) bool {
	const highs = 0x8080808080808080
	return w&highs == 0 && plain8(w)
}

// skipString returns the end of the valid string at i: the first quote that an even number of
// backslashes precedes.
func (d *Doc) skipString(i int) int {
	for i++; ; {
		j := bytes.IndexByte(d.b[i:], '"')
		if j < 0 {
			return len(d.b)
		}
		i += j
		k := i - 1
		for d.b[k] == '\\' {
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

func (d *Doc) depthError(i int) error {
	return fmt.Errorf("JSON nested deeper than %d at offset %d", d.maxDepth, i)
}

// object validates the object at i and returns its members if collect is set.
func (d *Doc) object(i, depth int, collect bool) ([]Member, int, error) {
	var members []Member
	i, empty, err := d.open(i, depth, '}')
	if err != nil || empty {
		return members, i, err
	}
	for {
		keyEnd, valueStart, err := d.key(i)
		if err != nil {
			return nil, valueStart, err
		}
		m := Member{KeyText: Span{i, keyEnd}}
		if m.Value, err = d.value(valueStart, depth); err != nil {
			return nil, i, err
		}
		if collect {
			m.Key = d.text(m.KeyText.Start, m.KeyText.End, nil)
			members = append(members, m)
		}
		var done bool
		if i, done, err = d.after(m.Value.End, '}'); err != nil || done {
			return members, i, err
		}
	}
}

// array validates the array at i and returns its elements if collect is set.
func (d *Doc) array(i, depth int, collect bool) ([]Span, int, error) {
	var elems []Span
	i, empty, err := d.open(i, depth, ']')
	if err != nil || empty {
		return elems, i, err
	}
	for {
		v, err := d.value(i, depth)
		if err != nil {
			return nil, i, err
		}
		if collect {
			elems = append(elems, v)
		}
		var done bool
		if i, done, err = d.after(v.End, ']'); err != nil || done {
			return elems, i, err
		}
	}
}

// key validates the member's key at i and the colon after it: it returns the key's end and
// where the member's value starts (or where the text went wrong, with the error).
func (d *Doc) key(i int) (keyEnd, value int, err error) {
	if i >= len(d.b) || d.b[i] != '"' {
		return i, i, d.syntaxError(i)
	}
	if keyEnd, err = d.str(i); err != nil {
		return i, i, err
	}
	j := d.space(keyEnd)
	if j >= len(d.b) || d.b[j] != ':' {
		return keyEnd, j, d.syntaxError(j)
	}
	return keyEnd, d.space(j + 1), nil
}

// open enters the object or array at i, depth deep (counting it): it returns where its first
// member or element starts, or, when it is empty, its end and empty.
func (d *Doc) open(i, depth int, close byte) (next int, empty bool, err error) {
	if depth > d.maxDepth {
		return i, false, d.depthError(i)
	}
	i = d.space(i + 1)
	if i < len(d.b) && d.b[i] == close {
		return i + 1, true, nil
	}
	return i, false, nil
}

// after reads what follows a member or an element that ends at i: a comma, after which it
// returns where the next one starts, or close, after which it returns the end and done.
func (d *Doc) after(i int, close byte) (next int, done bool, err error) {
	i = d.space(i)
	switch {
	case i < len(d.b) && d.b[i] == ',':
		return d.space(i + 1), false, nil
	case i < len(d.b) && d.b[i] == close:
		return i + 1, true, nil
	}
	return i, false, d.syntaxError(i)
}

// text decodes the valid string from start to end, quotes included; most have no escapes
// and are their bytes. buf, when not nil, holds the bytes to reuse for unescaping.
func (d *Doc) text(start, end int, buf *[]byte) string {
	text := d.b[start+1 : end-1]
	esc := bytes.IndexByte(text, '\\')
	if esc < 0 {
		return string(text)
	}
	var own []byte
	if buf == nil {
		buf = &own
	}
	*buf = unescape(append((*buf)[:0], text[:esc]...), text[esc:])
	return string(*buf)
}
