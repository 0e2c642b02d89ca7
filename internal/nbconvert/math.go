package nbconvert

import (
	"bytes"
	"regexp"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// Math is left for MathJax as nbconvert leaves it: $...$, $$...$$, \\(...\\), \\[...\\] and
// \begin{env}...\end{env} pass through unchanged (HTML-escaped in HTML), so that Markdown does
// not read the underscores and stars of an equation as emphasis. A "\$" stays as written, for
// MathJax's processEscapes.

// mathNode is math (or an escaped dollar) kept as written; Block tells display math that
// stands as a block of its own.
type mathNode struct {
	ast.BaseInline
	Raw   string
	Block bool
}

var kindMath = ast.NewNodeKind("Math")

func (n *mathNode) Kind() ast.NodeKind { return kindMath }

func (n *mathNode) Dump(source []byte, level int) {
	ast.DumpHelper(n, source, level, map[string]string{"Raw": n.Raw}, nil)
}

// mathBlock is a paragraph that is display math: it opens with $$, \\[ or \begin{env} and
// runs, blank lines included, to its closing delimiter.
type mathBlock struct {
	ast.BaseBlock
	Raw   string
	lines int // lines after the first that the parser has still to consume
}

var kindMathBlock = ast.NewNodeKind("MathBlock")

func (n *mathBlock) Kind() ast.NodeKind { return kindMathBlock }

func (n *mathBlock) Dump(source []byte, level int) {
	ast.DumpHelper(n, source, level, map[string]string{"Raw": n.Raw}, nil)
}

// mathClosers find where math that starts a text ends.
var (
	displayDollar = regexp.MustCompile(`(?s)^\$\$(.*?)\$\$`)
	displayParen  = regexp.MustCompile(`(?s)^\\\\\[(.*?)\\\\\]`)
	inlineDollar  = regexp.MustCompile(`(?s)^\$(.+?)\$`)
	inlineParen   = regexp.MustCompile(`(?s)^\\\\\((.+?)\\\\\)`)
	latexBegin    = regexp.MustCompile(`^\\begin\{([a-z]*\*?)\}`)
)

// matchMath returns the length of the math at the start of s, 0 when none.
func matchMath(s []byte) int {
	for _, re := range []*regexp.Regexp{displayDollar, displayParen, inlineDollar, inlineParen} {
		if m := re.FindIndex(s); m != nil {
			return m[1]
		}
	}
	return matchEnv(s)
}

// matchEnv matches \begin{x}...\end{x} with the same x (Go's regexp has no back-references).
func matchEnv(s []byte) int {
	m := latexBegin.FindSubmatchIndex(s)
	if m == nil {
		return 0
	}
	end := []byte(`\end{` + string(s[m[2]:m[3]]) + `}`)
	i := bytes.Index(s[m[1]:], end)
	if i < 0 {
		return 0
	}
	return m[1] + i + len(end)
}

type mathInlineParser struct{}

func (mathInlineParser) Trigger() []byte { return []byte{'$', '\\'} }

// Parse reads math that may run over the lines of its paragraph.
func (mathInlineParser) Parse(_ ast.Node, block text.Reader, _ parser.Context) ast.Node {
	line, _ := block.PeekLine()
	if len(line) >= 2 && line[0] == '\\' && line[1] == '$' {
		block.Advance(2)
		return &mathNode{Raw: `\$`}
	}
	escaped := len(line) > 1 && (line[1] == '\\' || line[1] == 'b')
	if line[0] == '\\' && !escaped {
		return nil
	}
	// Gather the rest of the paragraph, remembering where each line starts in it.
	startLine, startSeg := block.Position()
	var rest []byte
	type mark struct{ at, line int }
	var marks []mark
	for n := 0; len(line) > 0; n++ {
		marks = append(marks, mark{at: len(rest), line: n})
		rest = append(rest, line...)
		block.AdvanceLine()
		line, _ = block.PeekLine()
	}
	block.SetPosition(startLine, startSeg)
	length := matchMath(rest)
	if length == 0 {
		return nil
	}
	// Advance over whole lines, then within the last one.
	consumed := 0
	for i := 1; i < len(marks) && marks[i].at <= length; i++ {
		block.AdvanceLine()
		consumed = marks[i].at
	}
	block.Advance(length - consumed)
	return &mathNode{Raw: string(rest[:length])}
}

type mathBlockParser struct{}

func (mathBlockParser) Trigger() []byte { return []byte{'$', '\\'} }

// Open reads ahead to the closing delimiter; without one, this is no math block.
func (mathBlockParser) Open(_ ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	line, _ := reader.PeekLine()
	pos := pc.BlockOffset()
	if pos < 0 {
		return nil, parser.NoChildren
	}
	first := line[pos:]
	opens := bytes.HasPrefix(first, []byte("$$")) || bytes.HasPrefix(first, []byte(`\\[`)) || bytes.HasPrefix(first, []byte(`\begin{`))
	if !opens {
		return nil, parser.NoChildren
	}
	startLine, startSeg := reader.Position()
	defer reader.SetPosition(startLine, startSeg)
	raw := append([]byte(nil), first...)
	for lines := 0; ; lines++ {
		if n := matchMath(raw); n > 0 {
			return &mathBlock{Raw: string(bytes.TrimRight(raw, "\r\n")), lines: lines}, parser.NoChildren
		}
		reader.AdvanceLine()
		line, _ = reader.PeekLine()
		if len(line) == 0 {
			return nil, parser.NoChildren
		}
		raw = append(raw, line...)
	}
}

// Continue consumes the lines that Open read ahead.
func (mathBlockParser) Continue(node ast.Node, reader text.Reader, _ parser.Context) parser.State {
	n := node.(*mathBlock)
	if n.lines == 0 {
		return parser.Close
	}
	n.lines--
	reader.AdvanceToEOL()
	return parser.Continue | parser.NoChildren
}

func (mathBlockParser) Close(ast.Node, text.Reader, parser.Context) {}
func (mathBlockParser) CanInterruptParagraph() bool                 { return false }
func (mathBlockParser) CanAcceptIndentedLine() bool                 { return false }
