package jsonspan

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString writes s as a JSON string the way encoding/json does without HTML escaping
// (short escapes for \b \f \n \r \t, \u00XX for other control characters, U+FFFD for
// invalid UTF-8), except that U+2028 and U+2029 are written as themselves, as Python's json
// does: the bytes of a notebook must be nbformat's.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while they need no escape and are ASCII: most of a
		// notebook's text (HTML, streams, code).
		for i+8 <= len(s) && plainASCII8(load64(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// load64 is the eight bytes of s at i, little-endian; the compiler makes it one load.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendEscaped appends the JSON string escape of p, without the quotes, as AppendString
// writes it. p must be valid UTF-8, which is copied as is (so that a string written in
// pieces split between characters reads as AppendString writes it whole).
func AppendEscaped(b, p []byte) []byte {
	start := 0
	for i, c := range p {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, p[start:i]...)
		b = appendEscape(b, c)
		start = i + 1
	}
	return append(b, p[start:]...)
}

// appendEscape appends the escape of c, an ASCII character a JSON string cannot hold as is.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
