package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A notebook large enough to be written in parts (its content as the store holds it, not
// copied into one body) answers the same model, with the right length, as a small one does.
func TestContents_LargeNotebookAnswerIsOneModel(t *testing.T) {
	s := newServer(t)
	src := strings.Repeat("x = 1\n", (16<<10)/4)
	nb := `{"cells":[{"cell_type":"code","execution_count":1,"id":"a1","metadata":{},"outputs":[],"source":` + strconv.Quote(src) + `}],"metadata":{},"nbformat":4,"nbformat_minor":5}`
	expect(t, s.do("PUT", "/api/contents/big.ipynb", `{"type":"notebook","content":`+nb+`}`), http.StatusCreated)
	for range 2 { // the second from the store's cache
		r := s.do("GET", "/api/contents/big.ipynb", nil)
		expect(t, r, http.StatusOK)
		if r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) || r.header.Get("Content-Type") != "application/json" || r.header.Get("ETag") == "" {
			t.Fatalf("headers %v for a body of %d bytes", r.header, len(r.body))
		}
		m := r.json(t)
		content, _ := m["content"].(map[string]any)
		cells, _ := content["cells"].([]any)
		if m["name"] != "big.ipynb" || m["format"] != "json" || m["type"] != "notebook" || len(cells) != 1 {
			t.Fatalf("model %.300s", r.body)
		}
		if got := cells[0].(map[string]any)["source"]; got != src {
			t.Fatalf("source of %d characters, want %d", len(got.(string)), len(src))
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &raw); err != nil || len(raw["content"]) < 16<<10 {
			t.Fatalf("content of %d bytes: not written in parts (%v)", len(raw["content"]), err)
		}
	}
}
