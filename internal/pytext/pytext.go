// Package pytext holds Python's string rules that nbkube must follow to the letter where it
// writes or reads what Python tools write: notebooks split their sources and outputs into
// lines as Python does, and the exports must find the same lines as nbconvert.
package pytext

import "unicode/utf8"

// SplitLines is Python's str.splitlines(keepends=True), whose line boundaries are more than
// "\n": "\r", "\r\n", "\v", "\f", the file, group and record separators, NEL, and the Unicode
// line and paragraph separators.
func SplitLines(s string) []string {
	var lines []string
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
