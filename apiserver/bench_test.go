package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchNotebook is a valid notebook of about size bytes.
func benchNotebook(size int) []byte {
	var cells []map[string]any
	for i := 0; ; i++ {
		cells = append(cells, map[string]any{
			"cell_type": "code", "id": fmt.Sprintf("cell-%d", i), "execution_count": i + 1, "metadata": map[string]any{},
			"source":  []string{"import math\n", fmt.Sprintf("print(%d)", i)},
			"outputs": []any{map[string]any{"name": "stdout", "output_type": "stream", "text": []string{strings.Repeat("1.0, ", 60) + "\n"}}},
		})
		data, _ := json.MarshalIndent(map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5}, "", " ")
		if len(data) >= size {
			return data
		}
	}
}

func benchHandler(b *testing.B) (http.Handler, []byte) {
	b.Helper()
	root := b.TempDir()
	nb := benchNotebook(50 << 10)
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("nb%03d.ipynb", i)), nb, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return newHandler(b, root), nb
}

func serve(b *testing.B, h http.Handler, method, path string, body []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "token "+testToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code >= 300 {
		b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
	}
}

func BenchmarkHTTP_ListDir200(b *testing.B) {
	h, _ := benchHandler(b)
	for b.Loop() {
		serve(b, h, "GET", "/api/contents", nil)
	}
}

func BenchmarkHTTP_GetNotebook(b *testing.B) {
	h, _ := benchHandler(b)
	for b.Loop() {
		serve(b, h, "GET", "/api/contents/nb007.ipynb", nil)
	}
}

func BenchmarkHTTP_SaveNotebook(b *testing.B) {
	h, nb := benchHandler(b)
	body, _ := json.Marshal(map[string]any{"type": "notebook", "format": "json", "content": json.RawMessage(nb)})
	for b.Loop() {
		serve(b, h, "PUT", "/api/contents/nb007.ipynb", body)
	}
}
