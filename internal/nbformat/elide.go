package nbformat

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
)

// A notebook of plots is mostly a few large strings: base64 PNGs of hundreds of kilobytes in
// its outputs. Decoding them into Go strings and encoding them again was two thirds of a
// save's time, for bytes that come out as they went in: a JSON string of printable ASCII
// without escapes is written by nbformat exactly as it is read. So a save replaces each such
// large string of the body by a short placeholder before decoding, and the encoder writes
// the body's own bytes in its place. Nothing that looks at a notebook's strings needs their
// content: splitting lines finds no newline in either, the schema asks only that they be
// strings, and ids (compared for duplicates) are never elided. A validation that fails is
// redone on the whole notebook, so that its message shows what the client sent.

// elideFrom is the length from which a string is elided: below it, decoding costs less than
// the placeholder's bookkeeping.
const elideFrom = 4 << 10

// elided are the strings taken out of a notebook's JSON: spans of the body, quotes included.
type elided struct {
	// prefix starts every placeholder: a NUL, which no elided string holds (they are
	// printable ASCII), and a random nonce, so that no string of the client's is mistaken
	// for one.
	prefix string
	spans  [][]byte
}

// elideLargeStrings returns data with its large plain strings replaced by placeholders, and
// what was taken out; data itself, and nil, when there is nothing to take out. Strings are
// found as JSON's lexer finds them (a quote outside a string opens one, the next unescaped
// quote closes it), so the result is valid JSON exactly when data is.
func elideLargeStrings(data []byte) ([]byte, *elided) {
	var (
		out  []byte
		e    *elided
		last int
		// afterID says the string before was the key "id": its value is compared with
		// other ids, so it stays whole.
		afterID bool
	)
	for i := 0; ; {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end := stringEnd(data, start)
		if end < 0 {
			return data, nil // unterminated: the decoder says so
		}
		j := end
		for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
			j++
		}
		isKey := j < len(data) && data[j] == ':'
		inner := data[start+1 : end-1]
		if !isKey && !afterID && len(inner) >= elideFrom && plainASCII(inner) {
			if e == nil {
				e = &elided{prefix: "\x00" + randomHex(8) + ":"}
				out = make([]byte, 0, len(data)/8+1024)
			}
			out = append(out, data[last:start]...)
			out = append(out, `"\u0000`...)
			out = append(out, e.prefix[1:]...)
			out = strconv.AppendInt(out, int64(len(e.spans)), 10)
			out = append(out, '"')
			e.spans = append(e.spans, data[start:end])
			last = end
		}
		afterID = isKey && string(inner) == "id"
		i = end
	}
	if e == nil {
		return data, nil
	}
	return append(out, data[last:]...), e
}

// stringEnd is the index just past the closing quote of the JSON string opening at start, or
// -1 if it is not closed.
func stringEnd(data []byte, start int) int {
	for i := start + 1; ; {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return -1
		}
		k := i + q
		backslashes := 0
		for b := k - 1; b > start && data[b] == '\\'; b-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return k + 1
		}
		i = k + 1
	}
}

// plainASCII says p holds only printable ASCII other than the backslash: such a JSON string
// means its bytes, and nbformat writes it back as is. Eight bytes at a time: a base64 PNG of
// a megabyte is checked in well under a millisecond.
func plainASCII(p []byte) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(p); i += 8 {
		w := binary.LittleEndian.Uint64(p[i:])
		// A byte with its high bit set, below 0x20 (w - 0x20 borrows into its high bit), or
		// equal to the backslash or DEL.
		if w&highs != 0 || (w-0x20*ones)&^w&highs != 0 || hasByte(w, '\\') || hasByte(w, 0x7f) {
			return false
		}
	}
	for ; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// hasByte says one of w's bytes is c (the classic zero-byte test on w xor c in each byte).
func hasByte(w uint64, c byte) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	x := w ^ (ones * uint64(c))
	return (x-ones)&^x&highs != 0
}

// span is the elided string a placeholder stands for.
func (e *elided) span(s string) ([]byte, bool) {
	if e == nil || !strings.HasPrefix(s, e.prefix) {
		return nil, false
	}
	n, err := strconv.Atoi(s[len(e.prefix):])
	if err != nil || n < 0 || n >= len(e.spans) {
		return nil, false
	}
	return e.spans[n], true
}

// expand is v, a notebook decoded with e's placeholders, with the strings they stand for, as
// decoding the whole body would have given it. It changes v in place and returns it.
func (e *elided) expand(v any) any {
	switch t := v.(type) {
	case string:
		if span, ok := e.span(t); ok {
			return string(span[1 : len(span)-1]) // plain ASCII: the JSON text is the string
		}
	case map[string]any:
		for k, el := range t {
			t[k] = e.expand(el)
		}
	case []any:
		for i, el := range t {
			t[i] = e.expand(el)
		}
	}
	return v
}
