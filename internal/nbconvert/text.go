package nbconvert

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
)

// The text formats (Markdown, reStructuredText, AsciiDoc, LaTeX) keep images beside the
// document, as nbconvert's ExtractOutputPreprocessor does for them: each image of a display
// output becomes a file named output_<cell>_<output><ext> (the name nbconvert gives when it
// runs for Jupyter Server), which the document links to.

// extractable are the MIME types written to files, in the order a file list keeps them.
var extractable = []struct{ mime, ext string }{
	{"image/png", ".png"}, {"image/jpeg", ".jpg"}, {"image/svg+xml", ".svg"}, {"application/pdf", ".pdf"},
}

// extractOutputs fills the files of the text formats and returns the name of each output's
// files, by cell and output index and MIME type.
func extractOutputs(nb *notebook, r *Result) map[[2]int]map[string]string {
	names := map[[2]int]map[string]string{}
	seen := map[string]bool{}
	for ci := range nb.Cells {
		for oi := range nb.Cells[ci].Outputs {
			out := &nb.Cells[ci].Outputs[oi]
			if out.OutputType != "display_data" && out.OutputType != "execute_result" {
				continue
			}
			for _, x := range extractable {
				if _, ok := out.Data[x.mime]; !ok {
					continue
				}
				data := []byte(out.Data.str(x.mime))
				if x.mime != "image/svg+xml" {
					dec, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(data)), ""))
					if err != nil {
						continue
					}
					data = dec
				}
				name := fmt.Sprintf("output_%d_%d%s", ci, oi, x.ext)
				if fn, ok := out.metaScalar("filename", ""); ok && fn != "" {
					name = fn
					if !strings.HasSuffix(name, x.ext) {
						name += x.ext
					}
				}
				if seen[name] {
					continue
				}
				seen[name] = true
				if names[[2]int{ci, oi}] == nil {
					names[[2]int{ci, oi}] = map[string]string{}
				}
				names[[2]int{ci, oi}][x.mime] = name
				r.Files = append(r.Files, File{Name: name, Data: data})
			}
		}
	}
	return names
}

// indent is nbconvert's indent filter: four spaces before every line.
func indent(s string) string {
	const ind = "    "
	out := ind + strings.ReplaceAll(s, "\n", "\n"+ind)
	if strings.HasSuffix(out, "\n"+ind) {
		out = out[:len(out)-len(ind)]
	}
	return out
}

// dedent is Python's textwrap.dedent: the whitespace all lines share removed.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	margin := ""
	first := true
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			lines[i] = ""
			continue
		}
		ws := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		switch {
		case first:
			margin, first = ws, false
		case strings.HasPrefix(ws, margin):
		case strings.HasPrefix(margin, ws):
			margin = ws
		default:
			n := 0
			for n < len(ws) && n < len(margin) && ws[n] == margin[n] {
				n++
			}
			margin = margin[:n]
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, margin)
	}
	return strings.Join(lines, "\n")
}

// pathURL quotes a file name for a link, as nbconvert's path2url.
func pathURL(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
	}
	return strings.Join(parts, "/")
}

var markdownPriority = priority{"text/html", "text/markdown", "image/svg+xml", "text/latex", "image/png", "image/jpeg", "text/plain"}

// exportMarkdown is nbconvert's Markdown: Markdown cells as written, code in fenced blocks,
// text outputs indented as code, images as links to their files.
func exportMarkdown(nb *notebook, o *out, _ Options) (*Result, error) {
	r := &Result{Extension: ".md", Mimetype: "text/markdown"}
	files := extractOutputs(nb, r)
	for ci := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[ci]
		switch c.CellType {
		case "markdown":
			o.w(string(c.Source), "\n")
		case "raw":
			if c.includesRaw("text/markdown", "text/html", "") {
				o.w(string(c.Source))
			}
		case "code":
			lang := c.Metadata.MagicsLanguage
			if lang == "" {
				lang = nb.Metadata.LanguageInfo.Name
			}
			o.w("\n\n```", lang, "\n", string(c.Source), "\n```\n")
			for oi := range c.Outputs {
				markdownOutput(o, &c.Outputs[oi], files[[2]int{ci, oi}])
			}
		}
	}
	return r, nil
}

func markdownOutput(o *out, out *output, files map[string]string) {
	switch out.OutputType {
	case "stream":
		o.w("\n", indent(string(out.Text)), "\n")
	case "error":
		o.w("\n")
		for _, l := range out.Traceback {
			o.w(indent(stripANSI(l)), "\n")
		}
	case "execute_result", "display_data":
		mime := markdownPriority.pick(out.Data)
		data := out.Data.str(mime)
		o.w("\n")
		switch mime {
		case "text/html":
			o.w(dedent(data), "\n")
		case "text/markdown", "text/latex":
			o.w(data, "\n")
		case "image/svg+xml", "image/png", "image/jpeg":
			alt := map[string]string{"image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg"}[mime]
			o.w("    \n![", alt, "](", pathURL(files[mime]), ")\n    \n")
		case "text/plain":
			o.w(indent(data), "\n")
		}
	}
}
