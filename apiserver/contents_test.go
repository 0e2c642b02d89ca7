package apiserver_test

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const notebookJSON = `{"cells":[{"cell_type":"code","execution_count":1,"id":"a1","metadata":{},"outputs":[],"source":"1+1"}],"metadata":{},"nbformat":4,"nbformat_minor":5}`

func TestContents_NotebookLifecycle(t *testing.T) {
	s := newServer(t)
	r := s.do("POST", "/api/contents", map[string]string{"type": "notebook"})
	expect(t, r, http.StatusCreated)
	if loc := r.header.Get("Location"); loc != "/api/contents/Untitled.ipynb" {
		t.Errorf("Location %q", loc)
	}
	m := r.json(t)
	if m["name"] != "Untitled.ipynb" || m["type"] != "notebook" || m["content"] != nil || m["format"] != nil {
		t.Errorf("new notebook model %v", m)
	}
	r = s.do("POST", "/api/contents", map[string]string{"type": "notebook"})
	expect(t, r, http.StatusCreated)
	if r.json(t)["name"] != "Untitled1.ipynb" {
		t.Errorf("second untitled %s", r.body)
	}

	r = s.do("PUT", "/api/contents/Untitled.ipynb", `{"type":"notebook","format":"json","content":`+notebookJSON+`}`)
	expect(t, r, http.StatusOK)
	if r.header.Get("Last-Modified") == "" {
		t.Error("no Last-Modified header")
	}
	r = s.do("GET", "/api/contents/Untitled.ipynb", nil)
	expect(t, r, http.StatusOK)
	m = r.json(t)
	nb, _ := m["content"].(map[string]any)
	cells, _ := nb["cells"].([]any)
	if m["format"] != "json" || len(cells) != 1 || m["mimetype"] != nil {
		t.Errorf("notebook model %s", r.body)
	}
	if _, ok := m["message"]; ok {
		t.Errorf("a valid notebook has a validation message: %v", m["message"])
	}

	r = s.do("GET", "/api/contents/Untitled.ipynb?content=0", nil)
	if m := r.json(t); m["content"] != nil || m["format"] != nil {
		t.Errorf("content=0 model %s", r.body)
	}

	// Rename; onto an existing file it is a conflict.
	r = s.do("PATCH", "/api/contents/Untitled.ipynb", map[string]string{"path": "analysis.ipynb"})
	expect(t, r, http.StatusOK)
	if r.header.Get("Location") != "/api/contents/analysis.ipynb" || r.json(t)["path"] != "analysis.ipynb" {
		t.Errorf("rename answered %v %s", r.header, r.body)
	}
	expect(t, s.do("PATCH", "/api/contents/analysis.ipynb", map[string]string{"path": "Untitled1.ipynb"}), http.StatusConflict)
	expect(t, s.do("PATCH", "/api/contents/analysis.ipynb", nil), http.StatusBadRequest)

	// Copy names the copy after the original.
	r = s.do("POST", "/api/contents", map[string]string{"copy_from": "analysis.ipynb"})
	expect(t, r, http.StatusCreated)
	if r.json(t)["name"] != "analysis-Copy1.ipynb" {
		t.Errorf("copy %s", r.body)
	}
	expect(t, s.do("PUT", "/api/contents/x.ipynb", map[string]string{"copy_from": "analysis.ipynb"}), http.StatusBadRequest)
	expect(t, s.do("POST", "/api/contents/analysis.ipynb", map[string]string{"type": "notebook"}), http.StatusBadRequest)

	expect(t, s.do("DELETE", "/api/contents/analysis.ipynb", nil), http.StatusNoContent)
	expect(t, s.do("GET", "/api/contents/analysis.ipynb", nil), http.StatusNotFound)
}

func TestContents_InvalidNotebookIsSavedWithAMessage(t *testing.T) {
	s := newServer(t)
	r := s.do("PUT", "/api/contents/bad.ipynb", `{"type":"notebook","format":"json","content":{"cells":"nope","metadata":{},"nbformat":4,"nbformat_minor":5}}`)
	expect(t, r, http.StatusCreated)
	if msg, _ := r.json(t)["message"].(string); msg == "" {
		t.Errorf("no validation message: %s", r.body)
	}
	if _, err := os.Stat(filepath.Join(s.root, "bad.ipynb")); err != nil {
		t.Errorf("invalid notebook not saved: %v", err)
	}
	expect(t, s.do("PUT", "/api/contents/broken.ipynb", `{"type":"notebook","format":"json","content":`), http.StatusBadRequest)
}

func TestContents_FilesDirectoriesAndQueryErrors(t *testing.T) {
	s := newServer(t)
	r := s.do("POST", "/api/contents", map[string]string{"type": "directory"})
	expect(t, r, http.StatusCreated)
	if r.json(t)["name"] != "Untitled Folder" {
		t.Errorf("new directory %s", r.body)
	}
	expect(t, s.do("PUT", "/api/contents/data/notes.txt", map[string]string{"type": "file", "format": "text", "content": "x"}), http.StatusNotFound)
	expect(t, s.do("PUT", "/api/contents/data", map[string]string{"type": "directory"}), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/data/notes.txt", map[string]string{"type": "file", "format": "text", "content": "héllo"}), http.StatusCreated)
	bin := []byte{0, 1, 2, 0xff, 0xfe}
	expect(t, s.do("PUT", "/api/contents/data/blob.bin", map[string]string{"type": "file", "format": "base64", "content": base64.StdEncoding.EncodeToString(bin)}), http.StatusCreated)

	r = s.do("GET", "/api/contents/data", nil)
	expect(t, r, http.StatusOK)
	m := r.json(t)
	entries, _ := m["content"].([]any)
	if m["type"] != "directory" || len(entries) != 2 {
		t.Fatalf("directory model %s", r.body)
	}
	for _, e := range entries {
		if e.(map[string]any)["content"] != nil {
			t.Errorf("directory entry with content: %v", e)
		}
	}
	r = s.do("GET", "/api/contents/data/notes.txt", nil)
	if m := r.json(t); m["content"] != "héllo" || m["format"] != "text" || m["mimetype"] != "text/plain" {
		t.Errorf("text file model %s", r.body)
	}
	r = s.do("GET", "/api/contents/data/blob.bin?format=text", nil)
	expect(t, r, http.StatusBadRequest)
	r = s.do("GET", "/api/contents/data/blob.bin", nil)
	// Jupyter encodes with Python's encodebytes: lines of 76 characters, each ending in "\n".
	if m := r.json(t); m["format"] != "base64" || m["content"] != base64.StdEncoding.EncodeToString(bin)+"\n" {
		t.Errorf("binary file model %s", r.body)
	}
	r = s.do("GET", "/api/contents/data/notes.txt?hash=1", nil)
	if m := r.json(t); m["hash"] == nil || m["hash_algorithm"] == nil {
		t.Errorf("hash not given: %s", r.body)
	}

	for q, msg := range map[string]string{"type=bogus": "Type 'bogus' is invalid", "format=xml": "Format 'xml' is invalid", "content=2": "Content '2' is invalid"} {
		r := s.do("GET", "/api/contents/data/notes.txt?"+q, nil)
		expect(t, r, http.StatusBadRequest)
		if r.json(t)["message"] != msg {
			t.Errorf("%s: %s", q, r.body)
		}
	}
	expect(t, s.do("GET", "/api/contents/data?type=file", nil), http.StatusBadRequest)
	expect(t, s.do("PUT", "/api/contents/x.txt", "{not json"), http.StatusBadRequest)
	expect(t, s.do("GET", "/api/contents/nowhere/x.txt", nil), http.StatusNotFound)
	// As Jupyter's default delete_to_trash, a directory with contents goes to the trash.
	expect(t, s.do("DELETE", "/api/contents/data", nil), http.StatusNoContent)
	expect(t, s.do("GET", "/api/contents/data", nil), http.StatusNotFound)
}

func TestContents_HiddenAndEscapingPathsAreRefused(t *testing.T) {
	s := newServer(t)
	if err := os.WriteFile(filepath.Join(s.root, ".secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, s.do("GET", "/api/contents/.secret", nil), http.StatusNotFound)
	expect(t, s.do("PUT", "/api/contents/.env", map[string]string{"type": "file", "format": "text", "content": "x"}), http.StatusBadRequest)
	expect(t, s.do("DELETE", "/api/contents/.secret", nil), http.StatusBadRequest)
	expect(t, s.do("PATCH", "/api/contents/.secret", map[string]string{"path": "visible"}), http.StatusBadRequest)
	expect(t, s.do("GET", "/files/.secret", nil), http.StatusNotFound)
	if r := s.do("GET", "/api/contents", nil); strings.Contains(string(r.body), ".secret") {
		t.Errorf("listing shows a hidden file: %s", r.body)
	}

	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "passwd"), []byte("TOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/contents/..%2F..%2Fetc%2Fpasswd", "/api/contents/a/..%2F..%2F..%2Fetc", "/api/contents/link/passwd", "/files/link/passwd", "/files/..%2F..%2Fetc%2Fpasswd"} {
		r := s.do("GET", p, nil)
		if r.status < 400 || strings.Contains(string(r.body), "TOPSECRET") {
			t.Errorf("GET %s escaped the root: %d %s", p, r.status, r.body)
		}
	}
	r := s.do("PUT", "/api/contents/link/x.txt", map[string]string{"type": "file", "format": "text", "content": "x"})
	if r.status < 400 {
		t.Errorf("PUT through a symlink out of the root: %d", r.status)
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); err == nil {
		t.Error("a file was written outside the root")
	}
}

func TestContents_OversizedBodyIs413(t *testing.T) {
	s := newServer(t)
	big := `{"type":"file","format":"text","content":"` + strings.Repeat("a", 2<<20) + `"}`
	expect(t, s.do("PUT", "/api/contents/big.txt", big), http.StatusRequestEntityTooLarge)
	if _, err := os.Stat(filepath.Join(s.root, "big.txt")); err == nil {
		t.Error("a rejected upload left a file")
	}
}

func TestContents_Checkpoints(t *testing.T) {
	s := newServer(t)
	save := func(content string) {
		t.Helper()
		expect(t, s.do("PUT", "/api/contents/f.txt", map[string]string{"type": "file", "format": "text", "content": content}), map[bool]int{true: 201, false: 200}[content == "v1"])
	}
	save("v1")
	r := s.do("POST", "/api/contents/f.txt/checkpoints", nil)
	expect(t, r, http.StatusCreated)
	cp := r.json(t)
	id, _ := cp["id"].(string)
	if id == "" || cp["last_modified"] == nil || r.header.Get("Location") != "/api/contents/f.txt/checkpoints/"+id {
		t.Fatalf("checkpoint %s Location %q", r.body, r.header.Get("Location"))
	}
	save("v2")
	r = s.do("GET", "/api/contents/f.txt/checkpoints/"+id, nil)
	expect(t, r, http.StatusOK)
	if r.json(t)["content"] != "v1" {
		t.Errorf("checkpoint content %s", r.body)
	}
	expect(t, s.do("POST", "/api/contents/f.txt/checkpoints/"+id, nil), http.StatusNoContent)
	if r := s.do("GET", "/api/contents/f.txt", nil); r.json(t)["content"] != "v1" {
		t.Errorf("after restore: %s", r.body)
	}
	r = s.do("GET", "/api/contents/f.txt/checkpoints", nil)
	if !strings.Contains(string(r.body), id) {
		t.Errorf("list %s", r.body)
	}
	expect(t, s.do("DELETE", "/api/contents/f.txt/checkpoints/"+id, nil), http.StatusNoContent)
	if r := s.do("GET", "/api/contents/f.txt/checkpoints", nil); string(r.body) != "[]" {
		t.Errorf("list after delete %s", r.body)
	}
	expect(t, s.do("POST", "/api/contents/f.txt/checkpoints/"+id, nil), http.StatusNotFound)
}

func TestFiles_RawBytesWithMimetypeAndDownload(t *testing.T) {
	s := newServer(t)
	if err := os.WriteFile(filepath.Join(s.root, "page.html"), []byte("<script>alert(1)</script>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, "ünï code.ipynb"), []byte(notebookJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.do("GET", "/files/page.html", nil)
	expect(t, r, http.StatusOK)
	if string(r.body) != "<script>alert(1)</script>" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("page %q %v", r.body, r.header)
	}
	if !strings.Contains(r.header.Get("Content-Security-Policy"), "sandbox allow-scripts") {
		t.Errorf("served HTML is not sandboxed: %q", r.header.Get("Content-Security-Policy"))
	}
	r = s.do("GET", "/files/%C3%BCn%C3%AF%20code.ipynb?download=1", nil)
	expect(t, r, http.StatusOK)
	if r.header.Get("Content-Type") != "application/x-ipynb+json" || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("download headers %v", r.header)
	}
	expect(t, s.do("GET", "/files/missing.txt", nil), http.StatusNotFound)
	r = s.do("GET", "/files/page.html", nil, "Range", "bytes=1-6")
	expect(t, r, http.StatusPartialContent)
	if string(r.body) != "script" {
		t.Errorf("range answered %q", r.body)
	}
}

func TestContents_TrustAnswers201ForExistingNotebooksOnly(t *testing.T) {
	s := newServer(t)
	expect(t, s.do("PUT", "/api/contents/n.ipynb", `{"type":"notebook","format":"json","content":`+notebookJSON+`}`), http.StatusCreated)
	expect(t, s.do("POST", "/api/contents/n.ipynb/trust", nil), http.StatusCreated)
	expect(t, s.do("POST", "/api/contents/missing.ipynb/trust", nil), http.StatusNotFound)
	expect(t, s.do("GET", "/api/contents/n.ipynb/trust", nil), http.StatusMethodNotAllowed)
}

func TestLegacyNotebooks_IDsStayWithTheFile(t *testing.T) {
	s := newServer(t)
	r := s.do("POST", "/notebooks", nil)
	expect(t, r, http.StatusCreated)
	var id string
	if err := jsonUnmarshal(r.body, &id); err != nil || id == "" || r.header.Get("Location") != "/notebooks/"+id {
		t.Fatalf("new notebook %s %v", r.body, r.header)
	}
	r = s.do("POST", "/notebooks?name=report", notebookJSON)
	expect(t, r, http.StatusCreated)
	var reportID string
	if err := jsonUnmarshal(r.body, &reportID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.root, "report.ipynb")); err != nil {
		t.Errorf("POST with a name did not save report.ipynb: %v", err)
	}

	r = s.do("GET", "/notebooks", nil)
	var list []map[string]any
	if err := jsonUnmarshal(r.body, &list); err != nil || len(list) != 2 {
		t.Fatalf("list %s", r.body)
	}
	if list[0]["name"] != "Untitled" || list[1]["name"] != "report" || list[1]["notebook_id"] != reportID {
		t.Errorf("list %s", r.body)
	}

	r = s.do("GET", "/notebooks/"+reportID, nil)
	expect(t, r, http.StatusOK)
	if !strings.Contains(r.header.Get("Content-Disposition"), `filename="report.ipynb"`) || !strings.Contains(string(r.body), `"1+1"`) {
		t.Errorf("get by id %v %s", r.header, r.body)
	}
	// Saving under a new name renames; the id follows the file.
	expect(t, s.do("PUT", "/notebooks/"+reportID+"?name=final", notebookJSON), http.StatusNoContent)
	if _, err := os.Stat(filepath.Join(s.root, "final.ipynb")); err != nil {
		t.Errorf("rename by PUT: %v", err)
	}
	expect(t, s.do("GET", "/notebooks/"+reportID, nil), http.StatusOK)

	// Another server (a restart, another replica) on the same files gives the same ids.
	other := newServerAt(t, s.root)
	r = other.do("GET", "/notebooks", nil)
	if !strings.Contains(string(r.body), reportID) || !strings.Contains(string(r.body), id) {
		t.Errorf("ids differ on another server: %s", r.body)
	}

	expect(t, s.do("DELETE", "/notebooks/"+reportID, nil), http.StatusNoContent)
	expect(t, s.do("GET", "/notebooks/"+reportID, nil), http.StatusNotFound)
	expect(t, s.do("GET", "/notebooks/"+id+"?format=py", nil), http.StatusBadRequest)
}

func TestContents_ChunkedUploadAssemblesTheFile(t *testing.T) {
	s := newServer(t)
	parts := [][]byte{[]byte("first part,"), {0xff, 0x00, 0x01}, []byte("last")}
	for i, part := range parts {
		chunk := i + 1
		if i == len(parts)-1 {
			chunk = -1
		}
		r := s.do("PUT", "/api/contents/upload.bin", map[string]any{
			"type": "file", "format": "base64", "chunk": chunk, "content": base64.StdEncoding.EncodeToString(part),
		})
		if r.status != http.StatusOK && r.status != http.StatusCreated {
			t.Fatalf("chunk %d: %d %s", chunk, r.status, r.body)
		}
		if chunk != -1 {
			if _, err := os.Stat(filepath.Join(s.root, "upload.bin")); err == nil {
				t.Fatalf("the file appeared before the last chunk")
			}
		}
	}
	got, err := os.ReadFile(filepath.Join(s.root, "upload.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("first part,\xff\x00\x01last"); string(got) != string(want) {
		t.Errorf("assembled %q, want %q", got, want)
	}
}

// TestContents_HiddenRefusalsAreJupytersAnswers: the status and message of each handler-level
// refusal of a hidden path are those of Jupyter Server 1.23, which quotes the request's path
// with its leading slash. A copy into a hidden directory that exists is refused like the
// others, not answered by the store's own refusal.
func TestContents_HiddenRefusalsAreJupytersAnswers(t *testing.T) {
	s := newServer(t)
	for name, data := range map[string]string{".secret": "x", "a.txt": "y"} {
		if err := os.WriteFile(filepath.Join(s.root, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(s.root, "sub", ".hid"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		message      string
	}{
		{"POST", "/api/contents", map[string]string{"copy_from": ".secret"}, 400, "Cannot copy file or directory ''"},
		{"POST", "/api/contents/sub/.hid", map[string]string{"copy_from": "a.txt"}, 400, "Cannot copy file or directory '/sub/.hid'"},
		{"POST", "/api/contents/sub%2F.hid", map[string]string{"copy_from": "a.txt"}, 400, "Cannot copy file or directory '/sub/.hid'"},
		{"POST", "/api/contents/.nope", map[string]string{"copy_from": "a.txt"}, 400, "Cannot copy file or directory '/.nope'"},
		{"POST", "/api/contents/sub", map[string]string{"copy_from": "/.secret"}, 400, "Cannot copy file or directory '/sub'"},
		{"DELETE", "/api/contents/.secret", nil, 400, "Cannot delete file or directory '/.secret'"},
		{"PATCH", "/api/contents/.secret", map[string]string{"path": "v"}, 400, "Cannot rename file or directory '/.secret'"},
		{"PUT", "/api/contents/.env", map[string]string{"type": "file", "format": "text", "content": "x"}, 400, "Cannot create file or directory '/.env'"},
		{"GET", "/api/contents/.secret", nil, 404, "file or directory '/.secret' does not exist"},
	} {
		r := s.do(tc.method, tc.path, tc.body)
		expect(t, r, tc.status)
		if got := r.json(t)["message"]; got != tc.message {
			t.Errorf("%s %s: message %q, want %q", tc.method, tc.path, got, tc.message)
		}
	}
	if _, err := os.Stat(filepath.Join(s.root, "sub", ".hid", "a.txt")); err == nil {
		t.Error("a refused copy was made")
	}
}

// TestContents_NewUntitledExtIsASuffix: ext is appended to "untitled", so anything but a
// suffix (a separator, "..") would name a file in another directory: the store's .nbkube, a
// hidden one. It is refused with 400 and nothing is created; the
// extensions real clients send still name their files.
func TestContents_NewUntitledExtIsASuffix(t *testing.T) {
	s := newServer(t)
	// "untitled" directories let "untitled/../x" resolve.
	for _, dir := range []string{"d/untitled", "untitled", ".nbkube"} {
		if err := os.MkdirAll(filepath.Join(s.root, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, ext := range []string{"/../.nbkube/x", "/../.hidden", "/x", "/../../x", `\x`, "..", ".a/b", ".a\x00b", "txt", "." + strings.Repeat("a", 100)} {
		for _, dir := range []string{"", "/d"} {
			r := s.do("POST", "/api/contents"+dir, map[string]string{"type": "file", "ext": ext})
			if msg, _ := r.json(t)["message"].(string); r.status != http.StatusBadRequest || !strings.HasPrefix(msg, "Invalid extension") {
				t.Errorf("POST %s with ext %q: %d %s", dir, ext, r.status, r.body)
			}
		}
	}
	for _, dir := range []string{".nbkube", "d", "untitled", "d/untitled"} {
		entries, _ := os.ReadDir(filepath.Join(s.root, dir))
		for _, e := range entries {
			if e.Name() != "untitled" {
				t.Errorf("a refused ext created %s/%s", dir, e.Name())
			}
		}
	}
	for _, name := range []string{".hidden", "x"} {
		if _, err := os.Stat(filepath.Join(s.root, name)); err == nil {
			t.Errorf("a refused ext created %s", name)
		}
	}
	for ext, want := range map[string]string{".txt": "d/untitled.txt", ".py": "d/untitled.py", ".md": "d/untitled.md", ".ipynb": "d/Untitled.ipynb", ".tar.gz": "d/untitled.tar.gz", "": "d/untitled1"} {
		r := s.do("POST", "/api/contents/d", map[string]string{"ext": ext})
		expect(t, r, http.StatusCreated)
		if got := r.json(t)["path"]; got != want {
			t.Errorf("ext %q made %v, want %s", ext, got, want)
		}
	}
}
