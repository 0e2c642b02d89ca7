package nbconvert

import (
	"crypto/rand"
	"encoding/hex"
	"html"
	"strings"
)

// htmlPriority is nbconvert's HTML exporter's choice among an output's representations.
// Widget views are left out: showing them needs the widget manager's scripts.
var htmlPriority = priority{
	"application/javascript", "text/html", "text/markdown", "image/svg+xml",
	"text/latex", "image/png", "image/jpeg", "text/plain",
}

// exportHTML writes the page of nbconvert's "lab" template: the same elements and classes,
// so that a page looks the same and its structure can be compared, with a compact style
// sheet instead of JupyterLab's. HTML in outputs, Markdown and raw cells is not sanitised, as
// nbconvert does not sanitise it by default: whoever serves the page must confine it (nbkube
// serves exports under a sandboxing Content-Security-Policy).
func exportHTML(nb *notebook, o *out, opts Options) (*Result, error) {
	title := nb.Metadata.Title
	if title == "" {
		title = opts.Name
	}
	lexer := nb.lexerName()
	if lexer == "" {
		// nbconvert's HTML highlighter defaults to IPython 3.
		lexer = "ipython3"
	}
	o.w("<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\" />\n",
		`<meta name="viewport" content="width=device-width, initial-scale=1.0">`, "\n",
		"<title>", html.EscapeString(title), "</title>\n",
		"<style type=\"text/css\">\n", pageCSS, highlightCSS(), "</style>\n",
		mathJax, "</head>\n",
		`<body class="jp-Notebook" data-jp-theme-light="true" data-jp-theme-name="JupyterLab Light">`, "\n")
	for i := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[i]
		switch c.CellType {
		case "code":
			htmlCodeCell(o, c, lexer)
		case "markdown":
			o.w(`<div class="jp-Cell jp-MarkdownCell jp-Notebook-cell">`, "\n",
				`<div class="jp-Cell-inputWrapper">`, "\n",
				`<div class="jp-Collapser jp-InputCollapser jp-Cell-inputCollapser">`, "\n</div>\n",
				`<div class="jp-InputArea jp-Cell-inputArea"><div class="jp-InputPrompt jp-InputArea-prompt">`, "\n",
				`</div><div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput `, tagClasses(c), `" data-mime-type="text/markdown">`, "\n")
			markdownToHTML(o, string(c.Source), c.Attachments)
			o.w("\n</div>\n</div>\n</div>\n</div>")
		case "raw":
			if c.includesRaw("text/html", "") {
				o.w(string(c.Source))
			}
		}
	}
	o.w("\n</body>\n</html>\n")
	return &Result{Extension: ".html", Mimetype: "text/html"}, nil
}

// tagClasses are a cell's tags as classes, as nbconvert's celltags macro writes them.
func tagClasses(c *cell) string {
	var cls []string
	for _, t := range c.Metadata.Tags {
		cls = append(cls, "celltag_"+strings.ReplaceAll(t, " ", "_"))
	}
	return strings.Join(cls, " ")
}

func htmlCodeCell(o *out, c *cell, lexer string) {
	noOutputs := ""
	if len(c.Outputs) == 0 {
		noOutputs = "jp-mod-noOutputs"
	}
	count := "&nbsp;"
	if c.ExecutionCount != nil {
		count = c.executionCount()
	}
	o.w(`<div class="jp-Cell jp-CodeCell jp-Notebook-cell `, noOutputs, "  ", tagClasses(c), `">`, "\n",
		`<div class="jp-Cell-inputWrapper">`, "\n",
		`<div class="jp-Collapser jp-InputCollapser jp-Cell-inputCollapser">`, "\n</div>\n",
		`<div class="jp-InputArea jp-Cell-inputArea">`, "\n",
		`<div class="jp-InputPrompt jp-InputArea-prompt">In&nbsp;[`, count, "]:</div>\n",
		`<div class="jp-CodeMirrorEditor jp-Editor jp-InputArea-editor" data-type="inline">`, "\n",
		`     <div class="CodeMirror cm-s-jupyter">`, "\n")
	lang := lexer
	if c.Metadata.MagicsLanguage != "" {
		lang = c.Metadata.MagicsLanguage
	}
	highlightHTML(o, string(c.Source), lang, " highlight hl-"+html.EscapeString(lang))
	o.w("\n     </div>\n</div>\n</div>\n</div>\n")
	if len(c.Outputs) > 0 {
		o.w("\n", `<div class="jp-Cell-outputWrapper">`, "\n",
			`<div class="jp-Collapser jp-OutputCollapser jp-Cell-outputCollapser">`, "\n</div>\n\n\n",
			`<div class="jp-OutputArea jp-Cell-outputArea">`, "\n")
		for i := range c.Outputs {
			if o.check() != nil {
				return
			}
			htmlOutput(o, &c.Outputs[i], count)
		}
		o.w("\n</div>\n\n</div>\n")
	}
	o.w("\n</div>\n")
}

func htmlOutput(o *out, out *output, count string) {
	prompt := ""
	if out.OutputType == "execute_result" {
		prompt = "Out[" + count + "]:"
	}
	o.w("\n", `<div class="jp-OutputArea-child">`, "\n\n    \n",
		`    <div class="jp-OutputPrompt jp-OutputArea-prompt">`, prompt, "</div>\n\n")
	switch out.OutputType {
	case "stream":
		mime := "text/plain"
		switch out.Name {
		case "stderr":
			mime = "application/vnd.jupyter.stderr"
		case "stdout":
		default:
			// stdin echoes are left out unless asked for, as nbconvert leaves them.
			o.w("</div>\n")
			return
		}
		o.w(`<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="`, mime, `">`, "\n<pre>")
		ansiToHTML(o, string(out.Text))
		o.w("</pre>\n</div>\n")
	case "error":
		o.w(`<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="application/vnd.jupyter.stderr">`, "\n<pre>")
		for _, line := range out.Traceback {
			o.w("\n")
			ansiToHTML(o, line)
		}
		o.w("\n</pre>\n</div>\n")
	case "execute_result", "display_data":
		extra := ""
		if out.OutputType == "execute_result" {
			extra = "jp-OutputArea-executeResult"
		}
		htmlData(o, out, extra)
	}
	o.w("</div>\n")
}

// htmlData writes the representation of a display output that the page shows.
func htmlData(o *out, out *output, extra string) {
	mime := htmlPriority.pick(out.Data)
	data := out.Data.str(mime)
	switch mime {
	case "application/javascript":
		id := newUUID()
		o.w(`<div id="`, id, `" class="jp-RenderedJavaScript jp-OutputArea-output `, extra, `" data-mime-type="application/javascript">`, "\n",
			"<script type=\"text/javascript\">\nvar element = document.getElementById('", id, "');\n", data, "\n</script>\n</div>\n")
	case "text/html":
		o.w(`<div class="jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output `, extra, `" data-mime-type="text/html">`, "\n", data, "\n</div>\n")
	case "text/markdown":
		o.w(`<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-OutputArea-output `, extra, `" data-mime-type="text/markdown">`, "\n")
		markdownToHTML(o, data, nil)
		o.w("\n</div>\n")
	case "image/svg+xml":
		o.w(`<div class="jp-RenderedSVG jp-OutputArea-output `, extra, `" data-mime-type="image/svg+xml">`, "\n", data, "\n</div>\n")
	case "text/latex":
		o.w(`<div class="jp-RenderedLatex jp-OutputArea-output `, extra, `" data-mime-type="text/latex">`, "\n", html.EscapeString(data), "\n</div>\n")
	case "image/png", "image/jpeg":
		o.w(`<div class="jp-RenderedImage jp-OutputArea-output `, extra, `">`, "\n",
			`<img src="data:`, mime, ";base64,", html.EscapeString(strings.TrimSpace(data)), `"`)
		for _, attr := range []string{"width", "height"} {
			if v, ok := out.metaScalar(attr, mime); ok {
				o.w(" ", attr, `="`, html.EscapeString(v), `"`)
			}
		}
		var cls []string
		if out.metaTrue("unconfined", mime) {
			cls = append(cls, "unconfined")
		}
		if bgv, ok := out.metaScalar("needs_background", mime); ok && (bgv == "light" || bgv == "dark") {
			cls = append(cls, "jp-needs-"+bgv+"-background")
		}
		o.w(` class="`, strings.Join(cls, " "), `">`, "\n</div>\n")
	case "text/plain":
		o.w(`<div class="jp-RenderedText jp-OutputArea-output `, extra, `" data-mime-type="text/plain">`, "\n<pre>")
		ansiToHTML(o, data)
		o.w("</pre>\n</div>\n")
	}
}

// newUUID is a random UUID, the id nbconvert gives a JavaScript output's element.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
