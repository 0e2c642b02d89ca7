package nbconvert

import (
	"strings"
)

var rstPriority = priority{"text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png", "image/jpeg", "text/markdown", "text/plain"}

// exportRST is nbconvert's reStructuredText: code as code directives, text outputs as parsed
// literals, HTML as raw HTML, LaTeX as math, images as image directives to their files.
func exportRST(nb *notebook, o *out, _ Options) (*Result, error) {
	r := &Result{Extension: ".rst", Mimetype: "text/restructuredtext"}
	files := extractOutputs(nb, r)
	lang := nb.lexerName()
	for ci := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[ci]
		switch c.CellType {
		case "markdown":
			o.w(convertMarkdown(string(c.Source), rstMarkup{}), "\n")
		case "raw":
			if c.includesRaw("text/restructuredtext", "") {
				o.w("\n", string(c.Source), "\n")
			}
		case "code":
			if strings.TrimSpace(string(c.Source)) != "" {
				l := lang
				if c.Metadata.MagicsLanguage != "" {
					l = c.Metadata.MagicsLanguage
				}
				o.w(".. code:: ", l, "\n\n", indent(string(c.Source)), "\n\n")
			}
			for oi := range c.Outputs {
				rstOutput(o, &c.Outputs[oi], files[[2]int{ci, oi}])
			}
		}
	}
	return r, nil
}

func rstOutput(o *out, out *output, files map[string]string) {
	switch out.OutputType {
	case "stream":
		o.w("\n.. parsed-literal::\n\n", indent(string(out.Text)), "\n\n")
	case "error":
		o.w("\n::\n\n")
		for _, l := range out.Traceback {
			o.w(indent(stripANSI(l)), "\n\n")
		}
	case "execute_result", "display_data":
		mime := rstPriority.pick(out.Data)
		data := out.Data.str(mime)
		o.w("\n")
		switch mime {
		case "text/html":
			o.w(".. raw:: html\n\n", indent(data), "\n\n")
		case "text/latex":
			o.w(".. math::\n\n", indent(strings.Trim(data, "$")), "\n\n")
		case "image/svg+xml", "image/png", "image/jpeg", "application/pdf":
			o.w(".. image:: ", pathURL(files[mime]), "\n")
			for _, attr := range []string{"width", "height"} {
				if v, ok := out.metaScalar(attr, mime); ok {
					o.w("   :", attr, ": ", v, "px\n")
				}
			}
			o.w("\n")
		case "text/markdown":
			o.w(convertMarkdown(data, rstMarkup{}), "\n")
		case "text/plain":
			o.w(".. parsed-literal::\n\n", indent(data), "\n\n")
		}
	}
}

var asciidocPriority = priority{"text/html", "text/markdown", "image/svg+xml", "image/png", "image/jpeg", "text/plain", "text/latex"}

// exportAsciiDoc is nbconvert's AsciiDoc: prompts, code as source blocks, text outputs as
// listing blocks, HTML passed through, images as image macros to their files.
func exportAsciiDoc(nb *notebook, o *out, _ Options) (*Result, error) {
	r := &Result{Extension: ".asciidoc", Mimetype: "text/asciidoc"}
	files := extractOutputs(nb, r)
	lang := nb.lexerName()
	for ci := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[ci]
		switch c.CellType {
		case "markdown":
			o.w(convertMarkdown(string(c.Source), asciidocMarkup{}), "\n")
		case "raw":
			if c.includesRaw("text/asciidoc", "text/markdown", "text/html", "") {
				o.w(string(c.Source), "\n")
			}
		case "code":
			attr := "[source]"
			if l := c.Metadata.MagicsLanguage; l != "" {
				attr = "[source, " + l + "]"
			} else if lang != "" {
				attr = "[source, " + lang + "]"
			}
			o.w("\n+*In[", c.executionCount(), "]:*+\n", attr, "\n----\n", string(c.Source), "\n----\n")
			if len(c.Outputs) > 0 {
				o.w("\n+*Out[", c.executionCount(), "]:*+\n")
			}
			for oi := range c.Outputs {
				asciidocOutput(o, &c.Outputs[oi], files[[2]int{ci, oi}])
			}
		}
	}
	return r, nil
}

func asciidocOutput(o *out, out *output, files map[string]string) {
	switch out.OutputType {
	case "stream":
		o.w("----\n", strings.TrimSuffix(string(out.Text), "\n"), "\n----\n")
	case "error":
		o.w("----\n")
		for _, l := range out.Traceback {
			o.w(indent(stripANSI(l)), "\n")
		}
		o.w("----\n")
	case "execute_result", "display_data":
		mime := asciidocPriority.pick(out.Data)
		data := out.Data.str(mime)
		switch mime {
		case "text/html":
			o.w("++++\n", strings.TrimSuffix(data, "\n"), "\n++++\n")
		case "text/markdown":
			o.w(convertMarkdown(data, asciidocMarkup{}))
		case "image/svg+xml", "image/png", "image/jpeg":
			o.w("image::", pathURL(files[mime]), "[]\n")
		case "text/plain":
			o.w("----\n", strings.TrimSuffix(data, "\n"), "\n----\n")
		case "text/latex":
			o.w("[latexmath]\n++++\n", data, "\n++++\n")
		}
	}
	o.w("\n")
}
