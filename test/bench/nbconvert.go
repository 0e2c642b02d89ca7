package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The export scenarios: GET /nbconvert/html/<path> on both servers, over the bench's 50 KB
// notebook, a notebook of many small cells and one of a few large outputs. An export takes
// Jupyter Server about a second, so fewer clients than the contents scenarios, each measured
// three times as long, lest a loaded Jupyter complete no request in the window.
var exportClients = []int{1, 4}

const exportDurationFactor = 3

func nbconvertScenarios() []scenario {
	get := func(path string) func(s *server, w, i int) (*http.Request, error) {
		return func(s *server, w, i int) (*http.Request, error) {
			return http.NewRequest(http.MethodGet, s.base+"nbconvert/html/"+path, nil)
		}
	}
	return []scenario{
		{name: "export-50k", title: "export the 50 KB notebook to HTML", request: get("many/nb007.ipynb")},
		{name: "export-small-cells", title: "export 500 small cells (code, Markdown with math) to HTML", request: get("export/small-cells.ipynb")},
		{name: "export-large-outputs", title: "export 4 large outputs (3 × 1 MB PNG, 1 MB of text) to HTML", request: get("export/large-outputs.ipynb")},
	}
}

// nbconvertFixture writes the notebooks of the export scenarios under root/export.
func nbconvertFixture(root string) error {
	dir := filepath.Join(root, "export")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type cell = map[string]any
	write := func(name string, cells []cell) error {
		data, err := json.MarshalIndent(map[string]any{
			"cells": cells, "nbformat": 4, "nbformat_minor": 5,
			"metadata": map[string]any{"language_info": map[string]any{"name": "python", "pygments_lexer": "ipython3"}},
		}, "", " ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	code := func(i int, src string, outputs ...any) cell {
		return cell{"cell_type": "code", "id": fmt.Sprintf("c%d", i), "execution_count": i + 1, "metadata": cell{},
			"source": src, "outputs": append([]any{}, outputs...)}
	}
	var small []cell
	for i := range 500 {
		if i%5 == 0 {
			small = append(small, cell{"cell_type": "markdown", "id": fmt.Sprintf("m%d", i), "metadata": cell{},
				"source": fmt.Sprintf("## Step %d\n\nThe *mean* of $x_i$ is $\\bar x = \\frac{1}{n}\\sum_i x_i$, see [the docs](https://example.org/%d).", i, i)})
			continue
		}
		small = append(small, code(i, fmt.Sprintf("values = [x ** 2 for x in range(%d)]\nsum(values)", i),
			cell{"output_type": "execute_result", "execution_count": i + 1, "metadata": cell{}, "data": cell{"text/plain": fmt.Sprint(i * i)}}))
	}
	if err := write("small-cells.ipynb", small); err != nil {
		return err
	}
	var large []cell
	for i := range 3 {
		img := make([]byte, 750<<10)
		if _, err := rand.Read(img); err != nil {
			return err
		}
		large = append(large, code(i, "plot()", cell{"output_type": "display_data", "metadata": cell{},
			"data": cell{"image/png": base64.StdEncoding.EncodeToString(img), "text/plain": "<Figure>"}}))
	}
	large = append(large, code(3, "print(table)", cell{"output_type": "stream", "name": "stdout",
		"text": strings.Repeat("row <b>&</b> 0123456789 abcdefghijklmnopqrstuvwxyz\n", 1<<20/50)}))
	return write("large-outputs.ipynb", large)
}

func measureNbconvert(servers []*server, d time.Duration) (map[string]map[string]result, error) {
	results := map[string]map[string]result{}
	for _, sc := range nbconvertScenarios() {
		for _, c := range exportClients {
			cell, err := measureCell(servers, sc, c, exportDurationFactor*d, 1)
			if err != nil {
				return nil, err
			}
			results[fmt.Sprintf("%s@%d", sc.name, c)] = cell
		}
	}
	return results, nil
}

// writeNbconvert appends the export section to the report.
func writeNbconvert(b *strings.Builder, results map[string]map[string]result) {
	fmt.Fprintf(b, "## Exports (nbconvert)\n\n`GET /nbconvert/html/<path>` on both servers: nbkube's exporters in Go against Jupyter Server's nbconvert %s.\n\n", nbconvertVersion())
	fmt.Fprintf(b, "| scenario | clients | nbkube req/s | nbkube p50 / p99 ms | Jupyter req/s | Jupyter p50 / p99 ms | ratio |\n|---|---|---|---|---|---|---|\n")
	for _, sc := range nbconvertScenarios() {
		for _, c := range exportClients {
			r := results[fmt.Sprintf("%s@%d", sc.name, c)]
			n := r["nbkube"]
			row := fmt.Sprintf("| %s | %d | %.1f | %.2f / %.2f |", sc.title, c, n.rps, ms(n.p50), ms(n.p99))
			if j, ok := r["jupyter"]; ok {
				row += fmt.Sprintf(" %.1f | %.2f / %.2f | %.1f× |", j.rps, ms(j.p50), ms(j.p99), n.rps/j.rps)
			} else {
				row += " – | – | – |"
			}
			b.WriteString(row + "\n")
		}
	}
	b.WriteString(nbconvertNotes)
}

func nbconvertVersion() string {
	out, err := exec.Command("/usr/bin/python3", "-c", "import nbconvert; print(nbconvert.__version__)").Output()
	if err != nil {
		return "(not installed)"
	}
	return strings.TrimSpace(string(out))
}

const nbconvertNotes = `
### Reading the export numbers

* Both exports are the same page: nbconvert's lab template (JupyterLab's classes and styles),
  code highlighted (Pygments there, Chroma here), Markdown rendered with its math left to
  MathJax, images inline as data URIs. Each cell is measured three times as long as a contents
  cell; a p99 from a few dozen requests, as Jupyter's rows have, is close to their maximum.
* Jupyter Server runs each export in a thread beside its event loop; nbconvert holds Python's
  global interpreter lock while it renders, so several clients share one core. nbkube's exports
  run in parallel, each bounded in time and output size.
* Most of nbkube's time goes to highlighting: Chroma's Python lexer runs on backtracking
  regular expressions (regexp2). Unhighlighted, the 50 KB notebook's export took 1.6 ms at one
  client (a run on a quieter machine in which nbkube did not yet fall back to IPython 3 for
  notebooks that name no language, as this one).
`
