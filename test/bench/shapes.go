package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Notebooks of the shapes users have besides many small code cells (issue 25): most of a
// notebook with plots is a few large outputs, and a typical working notebook mixes small
// images, an HTML table, streams and an error.

// plotsNotebook is about 5.4 MB: 150 cells, 125 outputs, 25 of them PNGs of 216 KB of base64.
func plotsNotebook() []byte {
	var cells []any
	outputs := 0
	for i := range 150 {
		var out []any
		switch {
		case i%6 == 0:
			img := make([]byte, 158<<10)
			_, _ = rand.Read(img) // never fails (crypto/rand)
			out = append(out, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(img) + "\n", "text/plain": []string{"<Figure size 640x480 with 1 Axes>"}}})
		case outputs < 125 && i%6 != 5:
			out = append(out, map[string]any{"output_type": "stream", "name": "stdout",
				"text": []string{fmt.Sprintf("epoch %d: loss %.4f\n", i, 1/float64(i+1)), "done\n"}})
		}
		outputs += len(out)
		cells = append(cells, codeCell(i, fmt.Sprintf("fig, ax = plt.subplots()\nax.plot(x, y%d)\nplt.show()", i), out...))
	}
	return marshalNotebook(cells)
}

// mixedNotebook is about 60 KB: 16 cells with PNGs of 8 KB of base64, an HTML table, streams,
// markdown and an error with a coloured traceback.
func mixedNotebook() []byte {
	var cells []any
	for i := range 16 {
		switch i % 4 {
		case 0:
			cells = append(cells, map[string]any{"cell_type": "markdown", "id": fmt.Sprintf("m%d", i), "metadata": map[string]any{},
				"source": fmt.Sprintf("## Part %d\n\nWe fit $y = ax + b$ to the *cleaned* data, see [notes](notes-%d.md).", i, i)})
		case 1:
			img := make([]byte, 6<<10)
			_, _ = rand.Read(img)
			cells = append(cells, codeCell(i, "plt.hist(data)", map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": base64.StdEncoding.EncodeToString(img) + "\n", "text/plain": []string{"<Figure>"}}}))
		case 2:
			var table strings.Builder
			table.WriteString("<table class=\"dataframe\"><thead><tr><th></th><th>a</th><th>b</th></tr></thead><tbody>")
			for r := range 40 {
				fmt.Fprintf(&table, "<tr><th>%d</th><td>%d.5</td><td>row %d</td></tr>", r, r*i, r)
			}
			table.WriteString("</tbody></table>")
			cells = append(cells, codeCell(i, "df.head(40)", map[string]any{"output_type": "execute_result", "execution_count": i + 1, "metadata": map[string]any{},
				"data": map[string]any{"text/html": []string{table.String()}, "text/plain": []string{"    a  b\n0 ..."}}}),
			)
		default:
			cells = append(cells, codeCell(i, "for k in keys:\n    print(k, total[k])\n1/0",
				map[string]any{"output_type": "stream", "name": "stdout", "text": []string{strings.Repeat("key 12345\n", 40)}},
				map[string]any{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
					"traceback": []string{"\x1b[0;31m-----------------------------------------------------------\x1b[0m", "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"}}))
		}
	}
	return marshalNotebook(cells)
}

func codeCell(i int, src string, outputs ...any) map[string]any {
	return map[string]any{"cell_type": "code", "id": fmt.Sprintf("c%d", i), "execution_count": i + 1, "metadata": map[string]any{},
		"source": src, "outputs": append([]any{}, outputs...)}
}

func marshalNotebook(cells []any) []byte {
	data, _ := json.MarshalIndent(map[string]any{"cells": cells, "nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"language_info": map[string]any{"name": "python"}}}, "", " ")
	return data
}

// shapesFixture writes the two notebooks into <root>/shapes, for both servers alike.
func shapesFixture(root string) error {
	dir := filepath.Join(root, "shapes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, build := range map[string]func() []byte{"plots.ipynb": plotsNotebook, "mixed.ipynb": mixedNotebook} {
		if err := os.WriteFile(filepath.Join(dir, name), build(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// plotsClients are the concurrencies of the 5.4 MB notebook's scenarios: 64 clients each
// sending 5.4 MB back to back measure the load generator and the two cores more than a
// server (Jupyter finished no save within a 5 s window).
var plotsClients = []int{1, 16}

// shapesScenarios read, save and checkpoint the two notebooks; each worker saves a file of
// its own, and checkpoints pile up as a user's would (nbkube keeps its newest few, Jupyter one).
func shapesScenarios() []scenario {
	save := func(name string, nb []byte) func(s *server, w, i int) (*http.Request, error) {
		body, _ := json.Marshal(map[string]any{"type": "notebook", "format": "json", "content": json.RawMessage(nb)})
		return func(s *server, w, i int) (*http.Request, error) {
			req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("%sapi/contents/shapes/%s-%d.ipynb", s.base, name, w), bytes.NewReader(body))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
			}
			return req, err
		}
	}
	checkpoint := func(path string) func(s *server, w, i int) (*http.Request, error) {
		return func(s *server, w, i int) (*http.Request, error) {
			return http.NewRequest(http.MethodPost, s.base+"api/contents/"+path+"/checkpoints", nil)
		}
	}
	get := func(path string) func(s *server, w, i int) (*http.Request, error) {
		return func(s *server, w, i int) (*http.Request, error) {
			return http.NewRequest(http.MethodGet, s.base+"api/contents/"+path, nil)
		}
	}
	plots, mixed := plotsNotebook(), mixedNotebook()
	return []scenario{
		{name: "get-mixed", title: "get a 60 KB notebook of mixed outputs", request: get("shapes/mixed.ipynb")},
		{name: "save-mixed", title: "save a 60 KB notebook of mixed outputs (durable)", request: save("save-mixed", mixed)},
		{name: "checkpoint-mixed", title: "checkpoint a 60 KB notebook of mixed outputs", request: checkpoint("shapes/mixed.ipynb")},
		{name: "get-plots", title: "get a 5.4 MB notebook of plots", request: get("shapes/plots.ipynb"), clients: plotsClients},
		{name: "save-plots", title: "save a 5.4 MB notebook of plots (durable)", request: save("save-plots", plots), clients: plotsClients},
		{name: "checkpoint-plots", title: "checkpoint a 5.4 MB notebook of plots", request: checkpoint("shapes/plots.ipynb"), clients: plotsClients},
	}
}
