package nbconvert

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/nbkube/nbkube/internal/testenv"
)

// The reference is Debian's nbconvert 6.5 run as Jupyter Server runs it: exporter by name,
// the notebook's name as resources' metadata, outputs extracted with the default key.
const nbconvertScript = `
import json, sys, base64
import nbformat
from nbconvert.exporters.base import get_exporter
result = {}
for path in sys.argv[2:]:
    nb = nbformat.read(path, as_version=4)
    name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    res = {}
    for fmt in sys.argv[1].split(","):
        try:
            body, resources = get_exporter(fmt)().from_notebook_node(nb, resources={"metadata": {"name": name}})
            files = {k: base64.b64encode(v).decode() for k, v in (resources.get("outputs") or {}).items()}
            res[fmt] = {"body": body, "ext": resources.get("output_extension"), "files": files}
        except Exception as e:
            res[fmt] = {"error": "%s: %s" % (type(e).__name__, e)}
    result[name] = res
json.dump(result, sys.stdout)
`

type reference struct {
	Body  string            `json:"body"`
	Ext   string            `json:"ext"`
	Files map[string]string `json:"files"`
	Error string            `json:"error"`
}

var (
	refOnce sync.Once
	refs    map[string]map[string]reference
	refErr  error
)

var compared = []string{"html", "markdown", "rst", "asciidoc", "latex", "script", "python"}

// nbconvertReference converts the corpus with nbconvert, once for all tests.
func nbconvertReference(t *testing.T) map[string]map[string]reference {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import nbconvert").Run(); err != nil {
		testenv.Missing(t, "Debian's python3-nbconvert is not installed (hack/install-test-deps.sh installs it): nothing to compare with")
	}
	refOnce.Do(func() {
		paths, _ := filepath.Glob("testdata/*.ipynb")
		var stderr bytes.Buffer
		cmd := exec.Command("/usr/bin/python3", append([]string{"-c", nbconvertScript, strings.Join(compared, ",")}, paths...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			refErr = fmt.Errorf("nbconvert: %w: %s", err, stderr.String())
			return
		}
		refErr = json.Unmarshal(out, &refs)
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	return refs
}

func corpus(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.ipynb")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	nbs := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		nbs[strings.TrimSuffix(filepath.Base(p), ".ipynb")] = data
	}
	return nbs
}

// Each notebook of the corpus exports to each format with the cells, outputs, images and
// text that nbconvert exports.
func TestExport_MatchesNbconvertStructure(t *testing.T) {
	want := nbconvertReference(t)
	for name, data := range corpus(t) {
		for _, format := range compared {
			t.Run(name+"/"+format, func(t *testing.T) {
				ref := want[name][format]
				if ref.Error != "" {
					t.Skipf("nbconvert cannot export it here: %s", ref.Error)
				}
				got, err := Export(context.Background(), format, data, Options{Name: name})
				if err != nil {
					t.Fatal(err)
				}
				if got.Extension != ref.Ext {
					t.Errorf("extension %q, nbconvert's %q", got.Extension, ref.Ext)
				}
				gotFiles := map[string]string{}
				for _, f := range got.Files {
					gotFiles[f.Name] = base64.StdEncoding.EncodeToString(f.Data)
				}
				wantFiles := ref.Files
				if format == "latex" {
					// nbconvert turns SVG into PDF with Inkscape; nbkube keeps the SVG file.
					for k := range wantFiles {
						if strings.HasSuffix(k, ".pdf") {
							delete(wantFiles, k)
						}
					}
				}
				if wantFiles == nil {
					wantFiles = map[string]string{}
				}
				if d := cmp.Diff(wantFiles, gotFiles); d != "" {
					t.Errorf("files (-nbconvert +nbkube):\n%s", d)
				}
				switch format {
				case "html":
					if d := cmp.Diff(htmlStructure(t, ref.Body), htmlStructure(t, string(got.Body))); d != "" {
						t.Errorf("HTML structure (-nbconvert +nbkube):\n%s", d)
					}
				case "script", "python":
					if d := cmp.Diff(normalizeLines(ref.Body), normalizeLines(string(got.Body))); d != "" {
						t.Errorf("script (-nbconvert +nbkube):\n%s", d)
					}
				case "latex":
					compareText(t, latexBody(ref.Body), latexBody(string(got.Body)))
				default:
					compareText(t, ref.Body, string(got.Body))
				}
			})
		}
	}
}

// normalizeLines is text with each line's trailing space dropped and blank runs collapsed.
func normalizeLines(s string) []string {
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return out
}

// item is a piece of an HTML export's structure.
type item struct{ Kind, Text string }

var (
	spaces = regexp.MustCompile(`\s+`)
	uuids  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

func norm(s string) string {
	s = strings.ReplaceAll(s, "¶", "")
	s = uuids.ReplaceAllString(s, "UUID")
	return strings.TrimSpace(spaces.ReplaceAllString(s, " "))
}

func hasClass(n *html.Node, class string) bool {
	for _, a := range n.Attr {
		if a.Key == "class" && strings.Contains(" "+a.Val+" ", " "+class+" ") {
			return true
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func find(n *html.Node, match func(*html.Node) bool, fn func(*html.Node)) {
	if n.Type == html.ElementNode && match(n) {
		fn(n)
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		find(c, match, fn)
	}
}

// htmlStructure is the sequence of a page's cells: code inputs, Markdown headings, block
// texts and images, raw cells, and each output's kind, text and image data.
func htmlStructure(t *testing.T, page string) []item {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var body *html.Node
	find(doc, func(n *html.Node) bool { return n.Data == "body" }, func(n *html.Node) { body = n })
	if body == nil {
		t.Fatal("no body")
	}
	var items []item
	for c := body.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.ElementNode && hasClass(c, "jp-CodeCell"):
			find(c, func(n *html.Node) bool { return hasClass(n, "highlight") }, func(n *html.Node) {
				items = append(items, item{"input", norm(textOf(n))})
			})
			find(c, func(n *html.Node) bool { return hasClass(n, "jp-OutputArea-output") }, func(n *html.Node) {
				kind := attr(n, "data-mime-type")
				if kind == "" && hasClass(n, "jp-RenderedImage") {
					kind = "image"
				}
				items = append(items, item{"output " + kind, norm(textOf(n))})
				find(n, func(n *html.Node) bool { return n.Data == "img" }, func(n *html.Node) {
					items = append(items, item{"img", norm(attr(n, "src"))})
				})
			})
		case c.Type == html.ElementNode && hasClass(c, "jp-MarkdownCell"):
			find(c, func(n *html.Node) bool {
				switch n.Data {
				case "h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "th", "td", "pre", "img":
					return true
				}
				return false
			}, func(n *html.Node) {
				if n.Data == "img" {
					items = append(items, item{"img", norm(attr(n, "src"))})
					return
				}
				items = append(items, item{n.Data, norm(textOf(n))})
			})
			// Whitespace between blocks is the renderers' own; the text of each block is
			// compared above.
			items = append(items, item{"markdown", strings.Join(strings.Fields(norm(textOf(c))), "")})
		default:
			if s := norm(textOf(c)); s != "" {
				items = append(items, item{"raw", s})
			}
		}
	}
	return items
}

var (
	wordRE        = regexp.MustCompile(`[\p{L}\p{N}]+`)
	latexComments = regexp.MustCompile(`(?m)^\s*% .*$`)
	latexCommands = regexp.MustCompile(`\\(hypertarget|label)\{[^}]*\}|\\begin\{[^}]*\}(\[[^\n]*?\])?|\\end\{[^}]*\}|\\PY\{[^}]*\}|\\[A-Za-z]+|\{ansi-[a-z-]+\}|\{(in|out)color\}`)
)

// latexBody is a LaTeX document's body without its commands, which differ between
// nbconvert's template and pandoc's output on one side and nbkube's on the other.
func latexBody(doc string) string {
	if _, body, ok := strings.Cut(doc, `\begin{document}`); ok {
		doc = body
	}
	return latexCommands.ReplaceAllString(latexComments.ReplaceAllString(doc, ""), " ")
}

// compareText compares a text export with nbconvert's word by word, in order: nearly all of
// nbconvert's words must be in nbkube's export, and nearly all of nbkube's in nbconvert's. The
// slack is for what the two Markdown converters (pandoc's and nbkube's) spell differently.
func compareText(t *testing.T, want, got string) {
	t.Helper()
	w, g := wordRE.FindAllString(strings.ToLower(want), -1), wordRE.FindAllString(strings.ToLower(got), -1)
	common := float64(lcs(w, g))
	recall, precision := common/float64(max(len(w), 1)), common/float64(max(len(g), 1))
	if recall < 0.9 || precision < 0.85 {
		t.Errorf("%.0f%% of nbconvert's %d words are in nbkube's export, %.0f%% of nbkube's %d in nbconvert's:\n--- nbconvert\n%s\n--- nbkube\n%s",
			recall*100, len(w), precision*100, len(g), want, got)
	}
}

// lcs is the length of the longest common subsequence.
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			switch {
			case a[i] == b[j]:
				cur[j+1] = prev[j] + 1
			case prev[j+1] >= cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var _ = sort.Strings
