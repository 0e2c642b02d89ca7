package apiserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestContents_SaveWithAStaleETagIsConflictAndWritesNothing(t *testing.T) {
	s := newServer(t)
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"v0"}`), http.StatusCreated)
	r := s.do("GET", "/api/contents/f.txt", nil)
	expect(t, r, http.StatusOK)
	loaded := r.header.Get("ETag")
	if !strings.HasPrefix(loaded, `"`) || !strings.HasSuffix(loaded, `"`) || len(loaded) < 3 {
		t.Fatalf("ETag %q, want a strong entity tag", loaded)
	}
	if _, err := http.ParseTime(r.header.Get("Last-Modified")); err != nil {
		t.Fatalf("Last-Modified %q: %v", r.header.Get("Last-Modified"), err)
	}

	r = s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"first"}`, "If-Match", loaded)
	expect(t, r, http.StatusOK)
	fresh := r.header.Get("ETag")
	if fresh == "" || fresh == loaded {
		t.Fatalf("ETag after the save %q, want a new one (was %q)", fresh, loaded)
	}

	r = s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"second"}`, "If-Match", loaded)
	expect(t, r, http.StatusConflict)
	if m := r.json(t); !strings.Contains(m["message"].(string), "changed on disk since it was loaded") || m["reason"] != "changed on disk" {
		t.Errorf("conflict body %s", r.body)
	}
	if data, _ := os.ReadFile(filepath.Join(s.root, "f.txt")); string(data) != "first" {
		t.Errorf("f.txt = %q after a refused save, want the first save's", data)
	}

	r = s.do("GET", "/api/contents/f.txt?content=0", nil)
	if got := r.header.Get("ETag"); got != fresh {
		t.Errorf("GET ETag %q, want the save's %q", got, fresh)
	}
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"third"}`, "If-Match", `"x", `+fresh), http.StatusOK)
	if data, _ := os.ReadFile(filepath.Join(s.root, "f.txt")); string(data) != "third" {
		t.Errorf("f.txt = %q, want the third save's", data)
	}
}

func TestContents_SaveIfUnmodifiedSince(t *testing.T) {
	s := newServer(t)
	expect(t, s.do("PUT", "/api/contents/n.ipynb", `{"type":"notebook","format":"json","content":`+notebookJSON+`}`), http.StatusCreated)
	p := filepath.Join(s.root, "n.ipynb")
	mtime := time.Date(2025, 3, 4, 5, 6, 7, 500_000_000, time.UTC)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	r := s.do("GET", "/api/contents/n.ipynb", nil)
	lastModified := r.header.Get("Last-Modified")
	if lastModified != mtime.Format(http.TimeFormat) {
		t.Fatalf("Last-Modified %q, want %q", lastModified, mtime.Format(http.TimeFormat))
	}
	body := `{"type":"notebook","format":"json","content":` + notebookJSON + `}`
	expect(t, s.do("PUT", "/api/contents/n.ipynb", body, "If-Unmodified-Since", mtime.Add(-time.Second).Format(http.TimeFormat)), http.StatusConflict)
	expect(t, s.do("PUT", "/api/contents/n.ipynb", body, "If-Unmodified-Since", "yesterday"), http.StatusBadRequest)
	if fi, err := os.Stat(p); err != nil || !fi.ModTime().Equal(mtime) {
		t.Fatalf("refused saves touched the notebook: %v %v", fi.ModTime(), err)
	}
	expect(t, s.do("PUT", "/api/contents/n.ipynb", body, "If-Unmodified-Since", lastModified), http.StatusOK)
}

func TestContents_SaveOfADeletedFileWithAPreconditionIsConflict(t *testing.T) {
	s := newServer(t)
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"v0"}`), http.StatusCreated)
	etag := s.do("GET", "/api/contents/f.txt", nil).header.Get("ETag")
	expect(t, s.do("DELETE", "/api/contents/f.txt", nil), http.StatusNoContent)
	r := s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"x"}`, "If-Match", etag)
	expect(t, r, http.StatusConflict)
	if _, err := os.Stat(filepath.Join(s.root, "f.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused save recreated the file: %v", err)
	}
	// Without a precondition, nothing changes: the save creates the file.
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"x"}`), http.StatusCreated)
}

func TestContents_MalformedIfMatchIsBadRequest(t *testing.T) {
	s := newServer(t)
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"v0"}`), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"x"}`, "If-Match", `abc`), http.StatusBadRequest)
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"x"}`, "If-Match", `*`), http.StatusOK)
}
