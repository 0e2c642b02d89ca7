package nbconvert

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/nbkube/nbkube/internal/pytext"
)

// ipythonToPython turns a cell's IPython syntax into the Python IPython runs for it, as
// nbconvert's ipython2python filter (IPython's TransformerManager.transform_cell) does:
// prompts pasted from a console are stripped, a cell magic becomes run_cell_magic, and at the
// start of a logical line %magic, !shell, !!shell, ?help and help? become the calls of
// get_ipython(), as do "x = %magic" and "x = !shell".
func ipythonToPython(cell string) string {
	if !strings.HasSuffix(cell, "\n") {
		cell += "\n"
	}
	lines := pytext.SplitLines(cell)
	lines = dropLeadingEmptyLines(lines)
	lines = dropLeadingIndent(lines)
	lines = stripPrompts(lines, classicPrompt, classicFirst)
	lines = stripPrompts(lines, ipythonPrompt, ipythonPrompt)
	if lines = cellMagic(lines); len(lines) == 1 && strings.HasPrefix(lines[0], "get_ipython().run_cell_magic(") {
		return lines[0]
	}
	// As IPython, transform one construct at a time, re-reading the cell after each.
	for range 500 {
		next, changed := transformOnce(lines)
		if !changed {
			break
		}
		lines = next
	}
	return strings.Join(lines, "")
}

func dropLeadingEmptyLines(lines []string) []string {
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			return lines[i:]
		}
	}
	return lines
}

var leadingSpace = regexp.MustCompile(`^[ \t]+`)

func dropLeadingIndent(lines []string) []string {
	if len(lines) == 0 {
		return lines
	}
	space := leadingSpace.FindString(lines[0])
	if space == "" {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimPrefix(l, space)
	}
	return out
}

var (
	classicPrompt = regexp.MustCompile(`^(>>>|\.\.\.)( |$)`)
	classicFirst  = regexp.MustCompile(`^>>>( |$)`)
	ipythonPrompt = regexp.MustCompile(`^(In \[\d+\]: |\s*\.{3,}: ?)`)
)

// stripPrompts removes console prompts when the cell starts with one (or its second line
// continues one).
func stripPrompts(lines []string, prompt, first *regexp.Regexp) []string {
	if len(lines) == 0 {
		return lines
	}
	continued := len(lines) > 1 && prompt.MatchString(lines[1])
	if !first.MatchString(lines[0]) && !continued {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if loc := prompt.FindStringIndex(l); loc != nil {
			l = l[:loc[0]] + l[loc[1]:]
		}
		out[i] = l
	}
	return out
}

var cellMagicHelp = regexp.MustCompile(`^%%\w+\?`)

func cellMagic(lines []string) []string {
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "%%") || cellMagicHelp.MatchString(lines[0]) {
		return lines
	}
	name, first, _ := strings.Cut(strings.TrimRightFunc(lines[0][2:], unicode.IsSpace), " ")
	body := strings.Join(lines[1:], "")
	return []string{fmt.Sprintf("get_ipython().run_cell_magic(%s, %s, %s)\n", pyRepr(name), pyRepr(first), pyRepr(body))}
}

// transformOnce applies the first token transform of the cell, if any.
func transformOnce(lines []string) ([]string, bool) {
	logical := tokenizeLines(lines)
	// Help at the end of a line goes first where both apply (IPython's priority), so that
	// "%magic?" asks for the magic's help.
	type candidate struct {
		line, col, prio int
		apply           func() ([]string, bool)
	}
	var cands []candidate
	for _, toks := range logical {
		if len(toks) > 2 && toks[len(toks)-2].s == "?" && toks[len(toks)-1].kind == tokNewline {
			first, q := toks[0], toks[len(toks)-2]
			cands = append(cands, candidate{first.line, first.col, 5, func() ([]string, bool) { return helpEnd(lines, first, q) }})
			break
		}
	}
	for _, toks := range logical {
		if len(toks) > 0 && strings.Contains("!?%,;/", toks[0].s) && len(toks[0].s) == 1 {
			t := toks[0]
			cands = append(cands, candidate{t.line, t.col, 10, func() ([]string, bool) { return escapedCommand(lines, t), true }})
			break
		}
	}
	for _, toks := range logical {
		ix := assignIndex(toks)
		if ix < 0 || ix+2 >= len(toks) {
			continue
		}
		if toks[ix+1].s == "%" && toks[ix+2].kind == tokName {
			t := toks[ix+1]
			cands = append(cands, candidate{t.line, t.col, 10, func() ([]string, bool) { return assignCall(lines, t, "run_line_magic"), true }})
			break
		}
	}
	for _, toks := range logical {
		ix := assignIndex(toks)
		if ix < 0 || ix+1 >= len(toks) || strings.HasPrefix(strings.TrimSpace(lines[toks[ix].line]), "=") {
			continue
		}
		if toks[ix+1].s == "!" && toks[ix+1].kind == tokError {
			t := toks[ix+1]
			cands = append(cands, candidate{t.line, t.col, 10, func() ([]string, bool) { return assignCall(lines, t, "getoutput"), true }})
			break
		}
	}
	for len(cands) > 0 {
		best := 0
		for i, c := range cands {
			b := cands[best]
			if c.line < b.line || c.line == b.line && (c.col < b.col || c.col == b.col && c.prio < b.prio) {
				best = i
			}
		}
		if out, ok := cands[best].apply(); ok {
			return out, true
		}
		cands = append(cands[:best], cands[best+1:]...)
	}
	return lines, false
}

// assignIndex is the position of the first "=" outside brackets, -1 when none.
func assignIndex(toks []token) int {
	depth := 0
	for i, t := range toks {
		switch t.s {
		case "=":
			if depth == 0 {
				return i
			}
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth > 0 {
				depth--
			}
		}
	}
	return -1
}

// continuedLine is the logical line that starts at (line, col), its backslash continuations
// joined, and the index of its last physical line.
func continuedLine(lines []string, line, col int) (string, int) {
	end := line
	for end < len(lines)-1 && strings.HasSuffix(strings.TrimRight(lines[end], "\r\n"), "\\") {
		end++
	}
	parts := append([]string{lines[line][col:]}, lines[line+1:end+1]...)
	for i := range parts[:len(parts)-1] {
		p := strings.TrimRightFunc(parts[i], unicode.IsSpace)
		parts[i] = p[:len(p)-1]
	}
	parts[len(parts)-1] = strings.TrimRightFunc(parts[len(parts)-1], unicode.IsSpace)
	return strings.Join(parts, " "), end
}

func replaceLines(lines []string, from, to int, repl string) []string {
	out := append([]string{}, lines[:from]...)
	out = append(out, repl)
	return append(out, lines[to+1:]...)
}

func escapedCommand(lines []string, t token) []string {
	indent := lines[t.line][:t.col]
	line, end := continuedLine(lines, t.line, t.col)
	escape, content := line[:1], line[1:]
	if len(line) > 1 && (line[:2] == "!!" || line[:2] == "??") {
		escape, content = line[:2], line[2:]
	}
	var call string
	switch escape {
	case "!":
		call = "get_ipython().system(" + pyRepr(content) + ")"
	case "!!":
		call = "get_ipython().getoutput(" + pyRepr(content) + ")"
	case "?":
		call = helpCall(content, "?")
	case "??":
		call = helpCall(content, "??")
	case "%":
		name, args, _ := strings.Cut(content, " ")
		call = "get_ipython().run_line_magic(" + pyRepr(name) + ", " + pyRepr(args) + ")"
	case "/":
		name, args, _ := strings.Cut(content, " ")
		call = name + "(" + strings.Join(strings.Fields(args), ", ") + ")"
	case ",":
		name, args, _ := strings.Cut(content, " ")
		call = name + `("` + strings.Join(strings.Fields(args), `", "`) + `")`
	case ";":
		name, args, _ := strings.Cut(content, " ")
		call = name + `("` + args + `")`
	}
	return replaceLines(lines, t.line, end, indent+call+"\n")
}

func helpCall(target, esc string) string {
	if target == "" {
		return "get_ipython().show_usage()"
	}
	method := "pinfo"
	switch {
	case esc == "??":
		method = "pinfo2"
	case strings.Contains(target, "*"):
		method = "psearch"
	}
	name, args, _ := strings.Cut(method+" "+target, " ")
	return "get_ipython().run_line_magic(" + pyRepr(strings.TrimLeft(name, "%")) + ", " + pyRepr(args) + ")"
}

// assignCall turns "lhs = %magic args" or "lhs = !cmd" into a call.
func assignCall(lines []string, t token, method string) []string {
	lhs := lines[t.line][:t.col]
	rhs, end := continuedLine(lines, t.line, t.col)
	var call string
	if method == "run_line_magic" {
		name, args, _ := strings.Cut(rhs[1:], " ")
		call = "get_ipython().run_line_magic(" + pyRepr(name) + ", " + pyRepr(args) + ")"
	} else {
		call = "get_ipython().getoutput(" + pyRepr(rhs[1:]) + ")"
	}
	return replaceLines(lines, t.line, end, lhs+call+"\n")
}

// helpEndTarget is what "name?" asks about: a dotted name, maybe indexed, maybe a magic.
var helpEndTarget = regexp.MustCompile(`(%{0,2}[\p{L}_*][\p{L}\p{N}_*]*(?:\.[\p{L}_*][\p{L}\p{N}_*]*|\[-?[0-9]+\])*)(\?\??)\r?\n?$`)

func helpEnd(lines []string, first, q token) ([]string, bool) {
	piece := strings.Join(lines[first.line:q.line+1], "")
	indent, content := piece[:first.col], piece[first.col:]
	m := helpEndTarget.FindStringSubmatch(content)
	if m == nil {
		return lines, false
	}
	return replaceLines(lines, first.line, q.line, indent+helpCall(m[1], m[2])+"\n"), true
}

// pyRepr is Python's repr of a str.
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteString(`\` + string(quote))
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && !unicode.IsPrint(r):
			switch {
			case r < 0x100:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}
