package contents

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/internal/nbformat"
)

// benchNotebook is a notebook of about 50 KB in nbformat's layout: markdown, code with
// stream output, HTML tables and one PNG image, like a working notebook.
func benchNotebook(b *testing.B) []byte {
	png := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x89PNG\r\n\x1a\n\x00\x01\x02", 1400)))
	var cells []any
	for i := range 20 {
		cells = append(cells, map[string]any{"cell_type": "markdown", "id": fmt.Sprintf("m%07d", i), "metadata": map[string]any{},
			"source": fmt.Sprintf("# Section %d\n\nSome *markdown* text.\nAnother line with `code` and <b>html</b>.\n", i)})
		var outputs []any
		var text strings.Builder
		for k := range 10 {
			fmt.Fprintf(&text, "line %d of output\n", k)
		}
		outputs = append(outputs, map[string]any{"output_type": "stream", "name": "stdout", "text": text.String()})
		if i == 5 {
			outputs = append(outputs, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": png, "text/plain": "<Figure size 640x480 with 1 Axes>"}})
		}
		if i%4 == 0 {
			var table strings.Builder
			table.WriteString("<table>\n")
			for k := range 15 {
				fmt.Fprintf(&table, "<tr><td>%d</td><td>v</td></tr>\n", k)
			}
			outputs = append(outputs, map[string]any{"output_type": "execute_result", "execution_count": i, "metadata": map[string]any{},
				"data": map[string]any{"text/html": table.String() + "</table>", "text/plain": "   a  b\n0  1  2\n"}})
		}
		var src strings.Builder
		for j := range 8 {
			fmt.Fprintf(&src, "x_%d = compute(%d, 'value')  # comment\n", j, j)
		}
		cells = append(cells, map[string]any{"cell_type": "code", "id": fmt.Sprintf("c%07d", i), "execution_count": i,
			"metadata": map[string]any{}, "source": src.String(), "outputs": outputs})
	}
	content, err := json.Marshal(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5})
	if err != nil {
		b.Fatal(err)
	}
	return saveCPU(b, content)
}

// saveCPU is what a save computes besides writing: the notebook encoded as nbformat writes it
// and validated (valid: the benchmarks' notebooks are).
func saveCPU(b *testing.B, content []byte) []byte {
	data, validate, err := nbformat.Write(content)
	if err != nil {
		b.Fatal(err)
	}
	if msg, err := validate(); err != nil || msg != "" {
		b.Fatal(err, msg)
	}
	return data
}

// BenchmarkGetNotebook reads one 50 KB notebook with its content: "warm" reads a file
// version read before, "cold" the first read of a version, which validates it, and
// "marshal" adds encoding the model with encoding/json as a handler would.
func BenchmarkGetNotebook(b *testing.B) {
	s, dir := newTestStore(b, Options{})
	data := benchNotebook(b)
	writeTree(b, dir, map[string]string{"nb.ipynb": string(data)})
	for _, bc := range []struct {
		name          string
		cold, marshal bool
	}{{name: "warm", cold: false, marshal: false}, {name: "cold", cold: true, marshal: false}, {name: "marshal", cold: false, marshal: true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if bc.cold {
					s.results = newValidationCache(validationCacheSize)
				}
				m, err := s.Get(ctx, "nb.ipynb", GetOptions{Content: true})
				if err != nil {
					b.Fatal(err)
				}
				if bc.marshal {
					if _, err := json.Marshal(m); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkListDir lists a directory of 200 notebooks of 50 KB.
func BenchmarkListDir(b *testing.B) {
	s, dir := newTestStore(b, Options{})
	data := string(benchNotebook(b))
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("nbs/notebook-%03d.ipynb", i)] = data
	}
	writeTree(b, dir, files)
	for b.Loop() {
		m, err := s.Get(ctx, "nbs", GetOptions{Content: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveNotebookEncode is the CPU of a save without the disk: decode, normalize,
// encode and validate a 50 KB notebook.
func BenchmarkSaveNotebookEncode(b *testing.B) {
	nb := benchNotebook(b)
	for b.Loop() {
		saveCPU(b, nb)
	}
}

// BenchmarkSaveNotebookEncodePlots is the same for a notebook of plots, as test/bench's
// shapes: 150 cells, 25 of them with a PNG of 216 KB of base64, 5.4 MB in all.
func BenchmarkSaveNotebookEncodePlots(b *testing.B) {
	png := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAB", 216<<10/25)
	var cells []string
	for i := range 150 {
		out := `{"output_type": "stream", "name": "stdout", "text": "step ` + strconv.Itoa(i) + `\n"}`
		if i%6 == 0 {
			out = `{"output_type": "display_data", "metadata": {}, "data": {"image/png": "` + png + `", "text/plain": "<Figure size 640x480 with 1 Axes>"}}`
		}
		cells = append(cells, `{"cell_type": "code", "id": "c`+strconv.Itoa(i)+`", "metadata": {}, "execution_count": `+strconv.Itoa(i+1)+`, "source": "plt.plot(x, y)\nplt.show()", "outputs": [`+out+`]}`)
	}
	nb := []byte(`{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [` + strings.Join(cells, ",") + `]}`)
	b.SetBytes(int64(len(nb)))
	b.ReportAllocs()
	for b.Loop() {
		saveCPU(b, nb)
	}
}

// BenchmarkCreateCheckpoint is POST .../checkpoints of a 55 KB and a 5.4 MB file, on the file
// system of the test's temporary directory, the unsharing copies that follow included (each
// iteration waits for them).
func BenchmarkCreateCheckpoint(b *testing.B) {
	for _, size := range []int{55 << 10, 5400 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KB", func(b *testing.B) {
			s, dir := newTestStore(b, Options{})
			writeTree(b, dir, map[string]string{"n.ipynb": strings.Repeat("x", size)})
			b.Run("answer", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.CreateCheckpoint(ctx, "n.ipynb"); err != nil {
						b.Fatal(err)
					}
				}
				s.checkpoints.share.waitUnshared()
			})
			b.Run("with-unshare", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.CreateCheckpoint(ctx, "n.ipynb"); err != nil {
						b.Fatal(err)
					}
					s.checkpoints.share.waitUnshared()
				}
			})
		})
	}
}
