package nbconvert

import (
	"bufio"
	"fmt"
	"html"
	"strings"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// The Markdown of cells is read as nbconvert's Markdown (mistune with its math rules) reads
// it, with GitHub's tables, strikethrough and bare links, which notebook front ends render
// too. Raw HTML passes through: nbconvert does not sanitise by default.

var (
	mdOnce   sync.Once
	mdParser parser.Parser
)

// markdownParser is shared: goldmark's parsers keep their state in each parse's context.
func markdownParser() parser.Parser {
	mdOnce.Do(func() {
		md := goldmark.New(
			goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify),
			goldmark.WithParserOptions(
				parser.WithBlockParsers(util.Prioritized(mathBlockParser{}, 90)),
				parser.WithInlineParsers(util.Prioritized(mathInlineParser{}, 10)),
			),
		)
		mdParser = md.Parser()
	})
	return mdParser
}

// parseMarkdown parses a cell's Markdown, its images' attachment: references resolved to
// data URIs when attachments is given.
func parseMarkdown(src []byte, attachments map[string]mimeBundle) ast.Node {
	doc := markdownParser().Parse(text.NewReader(src))
	if attachments != nil {
		_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if img, ok := n.(*ast.Image); ok && entering {
				if uri, ok := attachmentURI(string(img.Destination), attachments); ok {
					img.Destination = []byte(uri)
				}
			}
			return ast.WalkContinue, nil
		})
	}
	return doc
}

// attachmentURI is the data URI of an attachment:<name> image: its SVG, PNG or JPEG form,
// vector over raster, lossless over lossy, as nbconvert chooses.
func attachmentURI(dest string, attachments map[string]mimeBundle) (string, bool) {
	name, ok := strings.CutPrefix(dest, "attachment:")
	if !ok {
		return "", false
	}
	bundle, ok := attachments[name]
	if !ok || len(bundle) == 0 {
		return "", false
	}
	mime := priority{"image/svg+xml", "image/png", "image/jpeg"}.pick(bundle)
	if mime == "" {
		for m := range bundle {
			if mime == "" || m < mime {
				mime = m
			}
		}
	}
	return "data:" + mime + ";base64," + strings.TrimSpace(bundle.str(mime)), true
}

// markdownToHTML renders a cell's Markdown into o, which bounds it. The renderer is made for
// each call, since its code blocks write to o.
func markdownToHTML(o *out, src string, attachments map[string]mimeBundle) {
	source := []byte(src)
	doc := parseMarkdown(source, attachments)
	r := renderer.NewRenderer(renderer.WithNodeRenderers(
		util.Prioritized(ghtml.NewRenderer(ghtml.WithUnsafe()), 1000),
		util.Prioritized(extension.NewTableHTMLRenderer(), 500),
		util.Prioritized(extension.NewStrikethroughHTMLRenderer(ghtml.WithUnsafe()), 500),
		util.Prioritized(&nbHTMLRenderer{o: o}, 10),
	))
	bw := bufio.NewWriter(o)
	_ = r.Render(bw, source, doc)
	_ = bw.Flush()
}

// nbHTMLRenderer renders what nbconvert renders its own way: headings with an id and an
// anchor link, code blocks highlighted, math as written.
type nbHTMLRenderer struct{ o *out }

func (h *nbHTMLRenderer) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindHeading, renderHeading)
	r.Register(ast.KindFencedCodeBlock, h.renderCodeBlock)
	r.Register(ast.KindCodeBlock, h.renderCodeBlock)
	r.Register(kindMath, func(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			_, _ = w.WriteString(escapeText(n.(*mathNode).Raw))
		}
		return ast.WalkSkipChildren, nil
	})
	r.Register(kindMathBlock, func(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			_, _ = w.WriteString(escapeText(n.(*mathBlock).Raw) + "\n")
		}
		return ast.WalkSkipChildren, nil
	})
}

// escapeText escapes &, < and > only, as nbconvert escapes math.
func escapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func renderHeading(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Heading)
	if entering {
		id := headingID(plainText(n, source))
		fmt.Fprintf(w, `<h%d id="%s">`, n.Level, html.EscapeString(id))
		return ast.WalkContinue, nil
	}
	id := headingID(plainText(n, source))
	fmt.Fprintf(w, `<a class="anchor-link" href="#%s">&#182;</a></h%d>`+"\n", html.EscapeString(id), n.Level)
	return ast.WalkContinue, nil
}

// headingID is nbconvert's id of a heading: its text, spaces as dashes, quoted for a URL
// fragment.
func headingID(s string) string {
	const safe = "?/:@!$&'()*+,;=-._~"
	var b strings.Builder
	for _, c := range []byte(strings.ReplaceAll(s, " ", "-")) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(safe, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// plainText is the text a node shows, without markup.
func plainText(n ast.Node, source []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			b.Write(t.Segment.Value(source))
			if t.SoftLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(t.Value)
		case *mathNode:
			b.WriteString(t.Raw)
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// codeOf is the text of a code block and its language.
func codeOf(n ast.Node, source []byte) (code, lang string) {
	var b strings.Builder
	lines := n.Lines()
	for i := range lines.Len() {
		seg := lines.At(i)
		b.Write(seg.Value(source))
	}
	if f, ok := n.(*ast.FencedCodeBlock); ok && f.Info != nil {
		lang = string(f.Language(source))
	}
	return b.String(), lang
}

// renderCodeBlock highlights a fenced block whose language is known, as nbconvert's
// renderer does; other blocks are preformatted text.
func (h *nbHTMLRenderer) renderCodeBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	code, lang := codeOf(node, source)
	if lang != "" && lexerFor(lang) != nil {
		// Straight into the bounded output, after what the renderer has buffered.
		_ = w.Flush()
		highlightHTML(h.o, code, lang, "highlight")
		return ast.WalkSkipChildren, nil
	}
	if lang != "" {
		code = lang + "\n" + code
	}
	_, _ = w.WriteString("<pre><code>" + html.EscapeString(code) + "</code></pre>\n")
	return ast.WalkSkipChildren, nil
}
