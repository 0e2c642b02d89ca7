package nbconvert

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Python tokenizer just fine enough for IPython's transforms: it finds the logical lines
// of a cell (brackets, backslash continuations and triple-quoted strings join physical
// lines) and, in each, the tokens that the transforms look at.

type tokenKind int

const (
	tokName tokenKind = iota
	tokNumber
	tokString
	tokOp
	tokError // what Python's tokenizer cannot read, such as IPython's ! and ?
	tokNewline
)

type token struct {
	kind      tokenKind
	s         string
	line, col int // where it starts: physical line, byte column
}

// pyOps are Python's operators, longest first.
var pyOps = []string{
	"**=", "//=", ">>=", "<<=", "...", "->", ":=", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=",
	"%=", "&=", "|=", "^=", "@=", "**", "//", "<<", ">>",
	"+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">", "(", ")", "[", "]", "{", "}",
	",", ":", ";", ".", "=",
}

// tokenizeLines returns the tokens of each logical line, each ending with a newline token.
// Comments are skipped; an unterminated string runs to the end of the cell.
func tokenizeLines(lines []string) [][]token {
	var (
		result [][]token
		cur    []token
		depth  int
	)
	endLine := func(line, col int) {
		cur = append(cur, token{kind: tokNewline, line: line, col: col})
		result = append(result, cur)
		cur = nil
	}
	ln, col := 0, 0
	for ln < len(lines) {
		l := lines[ln]
		if col >= len(l) {
			ln, col = ln+1, 0
			continue
		}
		c := l[col]
		switch {
		case c == '\n' || c == '\r':
			if depth == 0 {
				endLine(ln, col)
			}
			ln, col = ln+1, 0
		case c == ' ' || c == '\t' || c == '\f':
			col++
		case c == '#':
			col = len(strings.TrimRight(l, "\r\n"))
		case c == '\\' && strings.TrimRight(l[col+1:], "\r\n") == "":
			ln, col = ln+1, 0
		case isStringStart(l[col:]):
			startLn, startCol := ln, col
			ln, col = skipString(lines, ln, col)
			cur = append(cur, token{kind: tokString, s: "str", line: startLn, col: startCol})
		default:
			r, size := utf8.DecodeRuneInString(l[col:])
			switch {
			case r == '_' || unicode.IsLetter(r):
				end := col + size
				for end < len(l) {
					r2, s2 := utf8.DecodeRuneInString(l[end:])
					if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) && !unicode.Is(unicode.Mn, r2) {
						break
					}
					end += s2
				}
				cur = append(cur, token{kind: tokName, s: l[col:end], line: ln, col: col})
				col = end
			case unicode.IsDigit(r):
				end := col + size
				for end < len(l) && (isAlnum(l[end]) || l[end] == '.') {
					end++
				}
				cur = append(cur, token{kind: tokNumber, s: l[col:end], line: ln, col: col})
				col = end
			default:
				op := ""
				for _, o := range pyOps {
					if strings.HasPrefix(l[col:], o) {
						op = o
						break
					}
				}
				if op == "" {
					cur = append(cur, token{kind: tokError, s: l[col : col+size], line: ln, col: col})
					col += size
					continue
				}
				switch op {
				case "(", "[", "{":
					depth++
				case ")", "]", "}":
					if depth > 0 {
						depth--
					}
				}
				cur = append(cur, token{kind: tokOp, s: op, line: ln, col: col})
				col += len(op)
			}
		}
	}
	if len(cur) > 0 {
		endLine(len(lines)-1, len(lines[len(lines)-1]))
	}
	return result
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// isStringStart tells a string literal: an optional prefix and a quote.
func isStringStart(s string) bool {
	i := 0
	for i < len(s) && i < 2 && strings.IndexByte("rRbBuUfF", s[i]) >= 0 {
		i++
	}
	return i < len(s) && (s[i] == '\'' || s[i] == '"')
}

// skipString returns where the string literal at (ln, col) ends.
func skipString(lines []string, ln, col int) (int, int) {
	l := lines[ln]
	for strings.IndexByte("rRbBuUfF", l[col]) >= 0 {
		col++
	}
	q := l[col : col+1]
	if strings.HasPrefix(l[col:], q+q+q) {
		q = q + q + q
	}
	col += len(q)
	for ln < len(lines) {
		l = lines[ln]
		for col < len(l) {
			switch {
			case l[col] == '\\':
				col += 2
			case strings.HasPrefix(l[col:], q):
				return ln, col + len(q)
			case len(q) == 1 && (l[col] == '\n' || l[col] == '\r'):
				// An unterminated one-line string ends with its line.
				return ln, col
			default:
				col++
			}
		}
		ln, col = ln+1, 0
	}
	return ln, 0
}
