package nbconvert

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// Markdown cells in reStructuredText, AsciiDoc and LaTeX: nbconvert has pandoc convert them;
// nbkube writes the same constructs from goldmark's tree. Math passes through as MathJax and
// LaTeX read it; raw HTML, which none of the three can show, is dropped (as pandoc drops it)
// except as a passthrough block where the format has one.

// markup is one target format's way of writing Markdown's constructs.
type markup interface {
	heading(level int, text string) string
	code(lang, code string) string
	quote(body string) string
	list(ordered bool, start int, items []string) string
	table(aligns []extast.Alignment, rows [][]string) string
	htmlBlock(html string) string
	mathBlock(raw string) string
	rule() string
	text(s string) string
	emphasis(level int, s string) string
	codeSpan(s string) string
	link(url, text string) string
	image(url, alt string) string
	figure(url, alt string) string
	strike(s string) string
	math(raw string) string
	lineBreak(hard bool) string
}

// convertMarkdown renders a cell's Markdown in m's format.
func convertMarkdown(src string, m markup) string {
	source := []byte(src)
	doc := parseMarkdown(source, nil)
	c := converter{src: source, m: m}
	return strings.TrimRight(c.blocks(doc), "\n") + "\n"
}

type converter struct {
	src   []byte
	m     markup
	subst []string // definitions that the paragraph being written refers to
}

// blocks renders the block children of n, separated by blank lines.
func (c *converter) blocks(n ast.Node) string {
	var parts []string
	for ch := n.FirstChild(); ch != nil; ch = ch.NextSibling() {
		if s := c.block(ch); s != "" {
			parts = append(parts, strings.TrimRight(s, "\n"))
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}

func (c *converter) block(n ast.Node) string {
	switch t := n.(type) {
	case *ast.Heading:
		return c.m.heading(t.Level, c.inlines(t))
	case *ast.Paragraph, *ast.TextBlock:
		// An image alone in its paragraph is a figure, captioned with its text, as pandoc
		// makes it.
		if img, ok := n.FirstChild().(*ast.Image); ok && n.ChildCount() == 1 {
			return c.m.figure(string(img.Destination), plainText(img, c.src))
		}
		c.subst = nil
		s := c.inlines(n)
		for _, d := range c.subst {
			s += "\n\n" + d
		}
		return s
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		code, lang := codeOf(n, c.src)
		return c.m.code(lang, strings.TrimSuffix(code, "\n"))
	case *ast.Blockquote:
		return c.m.quote(c.blocks(t))
	case *ast.List:
		var items []string
		for it := t.FirstChild(); it != nil; it = it.NextSibling() {
			items = append(items, strings.TrimRight(c.blocks(it), "\n"))
		}
		return c.m.list(t.IsOrdered(), t.Start, items)
	case *extast.Table:
		var rows [][]string
		for r := t.FirstChild(); r != nil; r = r.NextSibling() {
			var row []string
			for cell := r.FirstChild(); cell != nil; cell = cell.NextSibling() {
				row = append(row, c.inlines(cell))
			}
			rows = append(rows, row)
		}
		return c.m.table(t.Alignments, rows)
	case *ast.HTMLBlock:
		var b strings.Builder
		for i := range t.Lines().Len() {
			seg := t.Lines().At(i)
			b.Write(seg.Value(c.src))
		}
		if t.HasClosure() {
			cl := t.ClosureLine
			b.Write(cl.Value(c.src))
		}
		return c.m.htmlBlock(strings.TrimRight(b.String(), "\n"))
	case *mathBlock:
		return c.m.mathBlock(t.Raw)
	case *ast.ThematicBreak:
		return c.m.rule()
	}
	return c.blocks(n)
}

func (c *converter) inlines(n ast.Node) string {
	var b strings.Builder
	for ch := n.FirstChild(); ch != nil; ch = ch.NextSibling() {
		b.WriteString(c.inline(ch))
	}
	return b.String()
}

func (c *converter) inline(n ast.Node) string {
	switch t := n.(type) {
	case *ast.Text:
		s := c.m.text(string(t.Segment.Value(c.src)))
		switch {
		case t.HardLineBreak():
			s += c.m.lineBreak(true)
		case t.SoftLineBreak():
			s += c.m.lineBreak(false)
		}
		return s
	case *ast.String:
		return c.m.text(string(t.Value))
	case *ast.Emphasis:
		return c.m.emphasis(t.Level, c.inlines(t))
	case *ast.CodeSpan:
		var b strings.Builder
		for ch := t.FirstChild(); ch != nil; ch = ch.NextSibling() {
			if tx, ok := ch.(*ast.Text); ok {
				b.Write(tx.Segment.Value(c.src))
			}
		}
		return c.m.codeSpan(b.String())
	case *ast.Link:
		return c.m.link(string(t.Destination), c.inlines(t))
	case *ast.AutoLink:
		u := string(t.URL(c.src))
		return c.m.link(u, c.m.text(string(t.Label(c.src))))
	case *ast.Image:
		if r, ok := c.m.(rstMarkup); ok {
			// reStructuredText has no inline image: a substitution stands for it.
			ref, def := r.substitution(string(t.Destination), plainText(t, c.src), len(c.subst))
			c.subst = append(c.subst, def)
			return ref
		}
		return c.m.image(string(t.Destination), plainText(t, c.src))
	case *extast.Strikethrough:
		return c.m.strike(c.inlines(t))
	case *mathNode:
		return c.m.math(t.Raw)
	case *ast.RawHTML:
		return ""
	}
	return c.inlines(n)
}

// stripMathDelimiters is math without its $, $$, \\( or \\[ delimiters.
func stripMathDelimiters(raw string) (inner string, display bool) {
	for _, d := range [][2]string{{"$$", "$$"}, {`\\[`, `\\]`}} {
		if strings.HasPrefix(raw, d[0]) && strings.HasSuffix(raw, d[1]) && len(raw) >= len(d[0])+len(d[1]) {
			return raw[len(d[0]) : len(raw)-len(d[1])], true
		}
	}
	for _, d := range [][2]string{{"$", "$"}, {`\\(`, `\\)`}} {
		if strings.HasPrefix(raw, d[0]) && strings.HasSuffix(raw, d[1]) && len(raw) >= len(d[0])+len(d[1]) {
			return raw[len(d[0]) : len(raw)-len(d[1])], false
		}
	}
	return raw, false
}

func indentBy(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// rstMarkup writes reStructuredText as pandoc writes it.
type rstMarkup struct{}

func (rstMarkup) heading(level int, text string) string {
	chars := "=-~^'`"
	ch := chars[min(level, len(chars))-1 : min(level, len(chars))]
	return text + "\n" + strings.Repeat(ch, max(utf8.RuneCountInString(text), 1))
}
func (rstMarkup) code(lang, code string) string {
	if lang == "" {
		return "::\n\n" + indentBy(code, "   ")
	}
	return ".. code:: " + lang + "\n\n" + indentBy(code, "   ")
}
func (rstMarkup) quote(body string) string {
	return "..\n\n" + indentBy(strings.TrimRight(body, "\n"), "   ")
}
func (rstMarkup) list(ordered bool, start int, items []string) string {
	var b strings.Builder
	for i, it := range items {
		marker := "-  "
		if ordered {
			marker = fmt.Sprintf("%d. ", start+i)
		}
		b.WriteString(marker + strings.TrimLeft(indentBy(it, strings.Repeat(" ", len(marker))), " ") + "\n")
	}
	return b.String()
}
func (rstMarkup) table(_ []extast.Alignment, rows [][]string) string {
	var b strings.Builder
	b.WriteString(".. list-table::\n   :header-rows: 1\n\n")
	for _, row := range rows {
		for j, cell := range row {
			lead := "     - "
			if j == 0 {
				lead = "   * - "
			}
			b.WriteString(lead + strings.ReplaceAll(cell, "\n", " ") + "\n")
		}
	}
	return b.String()
}
func (rstMarkup) htmlBlock(h string) string   { return ".. raw:: html\n\n" + indentBy(h, "   ") }
func (rstMarkup) mathBlock(raw string) string { return rstMath(raw, true) }
func (rstMarkup) rule() string                { return "--------------" }
func (rstMarkup) text(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "`", "\\`", "|", `\|`).Replace(s)
}
func (rstMarkup) emphasis(level int, s string) string {
	if level >= 2 {
		return "**" + s + "**"
	}
	return "*" + s + "*"
}
func (rstMarkup) codeSpan(s string) string   { return "``" + s + "``" }
func (rstMarkup) link(u, text string) string { return "`" + text + " <" + u + ">`__" }
func (rstMarkup) image(u, alt string) string {
	return "\n\n.. image:: " + u + "\n   :alt: " + alt + "\n\n"
}
func (rstMarkup) figure(u, alt string) string {
	s := ".. figure:: " + u + "\n   :alt: " + alt
	if alt != "" {
		s += "\n\n   " + alt
	}
	return s
}

// substitution is the reference that stands for an inline image and the definition that
// follows its paragraph, as pandoc writes them; the alt text names it unless it is empty or
// taken, when its position in the paragraph does.
func (rstMarkup) substitution(u, alt string, i int) (ref, def string) {
	name := strings.Join(strings.Fields(alt), " ")
	if name == "" || i > 0 {
		name = fmt.Sprintf("image%d", i)
		if alt != "" {
			name = fmt.Sprintf("%s %d", alt, i)
		}
	}
	return "|" + name + "|", ".. |" + name + "| image:: " + u
}
func (rstMarkup) strike(s string) string     { return "[STRIKEOUT:" + s + "]" }
func (rstMarkup) math(raw string) string     { return rstMath(raw, false) }
func (rstMarkup) lineBreak(hard bool) string { return "\n" }

func rstMath(raw string, block bool) string {
	if raw == `\$` {
		return "$"
	}
	if strings.HasPrefix(raw, `\begin{`) {
		return ":raw-latex:`" + raw + "`"
	}
	inner, display := stripMathDelimiters(raw)
	if display || block {
		return "\n\n.. math::\n\n" + indentBy(strings.TrimSpace(inner), "   ") + "\n\n"
	}
	return ":math:`" + inner + "`"
}

// asciidocMarkup writes AsciiDoc as pandoc writes it.
type asciidocMarkup struct{}

func (asciidocMarkup) heading(level int, text string) string {
	return strings.Repeat("=", level+1) + " " + text
}
func (asciidocMarkup) code(lang, code string) string {
	attr := "[source]"
	if lang != "" {
		attr = "[source," + lang + "]"
	}
	return attr + "\n----\n" + code + "\n----"
}
func (asciidocMarkup) quote(body string) string {
	return "____\n" + strings.TrimRight(body, "\n") + "\n____"
}
func (asciidocMarkup) list(ordered bool, _ int, items []string) string {
	var b strings.Builder
	marker := "* "
	if ordered {
		marker = ". "
	}
	for _, it := range items {
		// Nested lists deepen their markers.
		it = strings.NewReplacer("\n* ", "\n** ", "\n. ", "\n.. ").Replace(it)
		b.WriteString(marker + it + "\n")
	}
	return b.String()
}
func (asciidocMarkup) table(aligns []extast.Alignment, rows [][]string) string {
	var cols []string
	for _, a := range aligns {
		cols = append(cols, map[extast.Alignment]string{extast.AlignCenter: "^", extast.AlignRight: ">"}[a])
	}
	var b strings.Builder
	b.WriteString(`[cols="` + strings.Join(cols, ",") + `",options="header",]` + "\n|===\n")
	for _, row := range rows {
		for _, cell := range row {
			b.WriteString("|" + cell + " ")
		}
		b.WriteString("\n")
	}
	return b.String() + "|==="
}
func (asciidocMarkup) htmlBlock(h string) string { return "++++\n" + h + "\n++++" }
func (asciidocMarkup) mathBlock(raw string) string {
	if raw == `\$` {
		return "$"
	}
	return "[latexmath]\n++++\n" + raw + "\n++++"
}
func (asciidocMarkup) rule() string         { return "'''''" }
func (asciidocMarkup) text(s string) string { return s }
func (asciidocMarkup) emphasis(level int, s string) string {
	if level >= 2 {
		return "*" + s + "*"
	}
	return "_" + s + "_"
}
func (asciidocMarkup) codeSpan(s string) string    { return "`" + s + "`" }
func (asciidocMarkup) link(u, text string) string  { return u + "[" + text + "]" }
func (asciidocMarkup) image(u, alt string) string  { return "image:" + u + "[" + alt + "]" }
func (asciidocMarkup) figure(u, alt string) string { return "image::" + u + "[" + alt + "]" }
func (asciidocMarkup) strike(s string) string      { return "[line-through]*" + s + "*" }
func (asciidocMarkup) math(raw string) string {
	if raw == `\$` {
		return "$"
	}
	inner, display := stripMathDelimiters(raw)
	if display {
		return "\n[latexmath]\n++++\n\\[" + inner + "\\]\n++++\n"
	}
	if strings.HasPrefix(raw, `\begin{`) {
		return "latexmath:[" + raw + "]"
	}
	return "latexmath:[$" + inner + "$]"
}
func (asciidocMarkup) lineBreak(hard bool) string {
	if hard {
		return " +\n"
	}
	return "\n"
}

// latexMarkup writes LaTeX as pandoc writes it, for nbconvert's LaTeX preamble.
type latexMarkup struct{}

func (latexMarkup) heading(level int, text string) string {
	cmds := []string{"section", "subsection", "subsubsection", "paragraph", "subparagraph"}
	return `\` + cmds[min(level, len(cmds))-1] + "{" + text + "}"
}
func (latexMarkup) code(_, code string) string {
	return "\\begin{verbatim}\n" + strings.ReplaceAll(code, `\end{verbatim}`, `\end {verbatim}`) + "\n\\end{verbatim}"
}
func (latexMarkup) quote(body string) string {
	return "\\begin{quote}\n" + strings.TrimRight(body, "\n") + "\n\\end{quote}"
}
func (latexMarkup) list(ordered bool, _ int, items []string) string {
	env := "itemize"
	if ordered {
		env = "enumerate"
	}
	var b strings.Builder
	b.WriteString("\\begin{" + env + "}\n\\tightlist\n")
	for _, it := range items {
		b.WriteString("\\item\n  " + strings.TrimLeft(indentBy(it, "  "), " ") + "\n")
	}
	return b.String() + "\\end{" + env + "}"
}
func (latexMarkup) table(aligns []extast.Alignment, rows [][]string) string {
	spec := ""
	for _, a := range aligns {
		spec += map[extast.Alignment]string{extast.AlignCenter: "c", extast.AlignRight: "r"}[a]
		if a != extast.AlignCenter && a != extast.AlignRight {
			spec += "l"
		}
	}
	var b strings.Builder
	b.WriteString("\\begin{longtable}[]{@{}" + spec + "@{}}\n\\toprule\n")
	for i, row := range rows {
		b.WriteString(strings.Join(row, " & ") + " \\\\\n")
		if i == 0 {
			b.WriteString("\\midrule\n\\endhead\n")
		}
	}
	return b.String() + "\\bottomrule\n\\end{longtable}"
}
func (latexMarkup) htmlBlock(string) string     { return "" }
func (latexMarkup) mathBlock(raw string) string { return raw }
func (latexMarkup) rule() string {
	return "\\begin{center}\\rule{0.5\\linewidth}{0.5pt}\\end{center}"
}
func (latexMarkup) text(s string) string { return escapeLaTeX(s) }
func (latexMarkup) emphasis(level int, s string) string {
	if level >= 2 {
		return `\textbf{` + s + "}"
	}
	return `\emph{` + s + "}"
}
func (latexMarkup) codeSpan(s string) string { return `\texttt{` + escapeLaTeX(s) + "}" }
func (latexMarkup) link(u, text string) string {
	return `\href{` + strings.NewReplacer("%", `\%`, "#", `\#`).Replace(u) + "}{" + text + "}"
}

// image includes an image file; LaTeX cannot include data URIs, which are dropped as pandoc
// drops them.
func (latexMarkup) image(u, _ string) string {
	if strings.HasPrefix(u, "data:") {
		return ""
	}
	return `\includegraphics{` + u + "}"
}
func (m latexMarkup) figure(u, alt string) string {
	if strings.HasPrefix(u, "data:") {
		return ""
	}
	return "\\begin{figure}\n\\centering\n" + m.image(u, alt) + "\n\\caption{" + escapeLaTeX(alt) + "}\n\\end{figure}"
}
func (latexMarkup) strike(s string) string { return `\sout{` + s + "}" }
func (latexMarkup) math(raw string) string { return raw }
func (latexMarkup) lineBreak(hard bool) string {
	if hard {
		return "\\\\\n"
	}
	return "\n"
}

// escapeLaTeX is nbconvert's escape_latex.
func escapeLaTeX(s string) string {
	s = strings.NewReplacer(
		"&", `\&`, "%", `\%`, "$", `\$`, "#", `\#`, "_", `\_`, "{", `\{`, "}", `\}`,
		"~", `\textasciitilde{}`, "^", `\^{}`, `\`, `\textbackslash{}`,
	).Replace(s)
	return ellipsis.ReplaceAllString(s, `{\ldots}`)
}
