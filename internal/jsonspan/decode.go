package jsonspan

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// Decode decodes the JSON text b into Go values as encoding/json does into an any with
// UseNumber: objects become map[string]any (the last of repeated keys wins), arrays []any,
// numbers json.Number, strings string, and true, false and null bool and nil. It reads the
// text once, where encoding/json scans all of it to find where the value ends and then again
// to decode it; a notebook saved decodes in a third of the time.
//
// b must be UTF-8 (ErrNotUTF8 otherwise: encoding/json would replace what is not), hold one
// value with only white space around it, and nest at most maxDepth deep.
func Decode(b []byte, maxDepth int) (any, error) {
	if !utf8.Valid(b) {
		return nil, ErrNotUTF8
	}
	d := decoder{Doc: Doc{b: b, maxDepth: maxDepth}}
	v, end, err := d.any(d.space(0), 0)
	if err != nil {
		return nil, err
	}
	if end = d.space(end); end != len(b) {
		return nil, d.syntaxError(end)
	}
	return v, nil
}

// decoder builds Go values while it validates, with Doc's scanners.
type decoder struct {
	Doc
	// buf is reused to unescape strings.
	buf []byte
}

// any decodes the value at i (no white space before it) and returns its end.
func (d *decoder) any(i, depth int) (any, int, error) {
	if i >= len(d.b) {
		return nil, i, d.syntaxError(i)
	}
	switch c := d.b[i]; {
	case c == '{':
		return d.object(i, depth+1)
	case c == '[':
		return d.array(i, depth+1)
	case c == '"':
		return d.string(i)
	case c == 't':
		end, err := d.literal(i, "true")
		return true, end, err
	case c == 'f':
		end, err := d.literal(i, "false")
		return false, end, err
	case c == 'n':
		end, err := d.literal(i, "null")
		return nil, end, err
	case c == '-' || (c >= '0' && c <= '9'):
		end, err := d.number(i)
		if err != nil {
			return nil, end, err
		}
		return json.Number(d.b[i:end]), end, nil
	}
	return nil, i, d.syntaxError(i)
}

func (d *decoder) object(i, depth int) (any, int, error) {
	m := map[string]any{}
	i, empty, err := d.open(i, depth, '}')
	if err != nil || empty {
		return m, i, err
	}
	for {
		keyEnd, valueStart, err := d.key(i)
		if err != nil {
			return nil, valueStart, err
		}
		v, end, err := d.any(valueStart, depth)
		if err != nil {
			return nil, end, err
		}
		m[d.text(i, keyEnd, &d.buf)] = v
		var done bool
		if i, done, err = d.after(end, '}'); err != nil || done {
			return m, i, err
		}
	}
}

func (d *decoder) array(i, depth int) (any, int, error) {
	a := []any{}
	i, empty, err := d.open(i, depth, ']')
	if err != nil || empty {
		return a, i, err
	}
	for {
		v, end, err := d.any(d.space(i), depth)
		if err != nil {
			return nil, end, err
		}
		a = append(a, v)
		var done bool
		if i, done, err = d.after(end, ']'); err != nil || done {
			return a, i, err
		}
	}
}

// string validates and decodes the string at i. One without escapes is its text.
func (d *decoder) string(i int) (any, int, error) {
	end, err := d.str(i)
	if err != nil {
		return nil, end, err
	}
	return d.text(i, end, &d.buf), end, nil
}

// unescape appends the valid string text s (between its quotes, escapes included) to out, its
// escapes decoded as encoding/json decodes them: a \u escape of half a surrogate pair that
// is not followed by the other half is U+FFFD.
func unescape(out, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			out = append(out, s[i:j]...)
			i = j
			continue
		}
		switch s[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, hex4(s[i+2:i+6])); pair != utf8.RuneError {
						out = utf8.AppendRune(out, pair)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, s[i+1])
		}
		i += 2
	}
	return out
}

// hex4 is the value of four validated hexadecimal digits.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= 'a':
			c -= 'a' - 10
		case c >= 'A':
			c -= 'A' - 10
		default:
			c -= '0'
		}
		r = r<<4 | rune(c)
	}
	return r
}
