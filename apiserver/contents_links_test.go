package apiserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestContents_RenamingAndRestoringALinkAnswersWhatHappened: a symbolic link is renamed,
// deleted and restored as itself, wherever it leads; the answer is 200 with a model, of its
// target when the store serves that, else of the link itself (never of a target out of the
// home or in .nbkube), and the link has moved. Nothing outside is touched.
func TestContents_RenamingAndRestoringALinkAnswersWhatHappened(t *testing.T) {
	s := newServer(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "TOPSECRET")
	s.put("real.txt", "12345")
	for link, target := range map[string]string{"out": filepath.Join(outside, "secret"), "dangling": "nowhere", "in": "real.txt"} {
		if err := os.Symlink(target, filepath.Join(s.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	isLink := func(name string) bool {
		fi, err := os.Lstat(filepath.Join(s.root, name))
		return err == nil && fi.Mode()&os.ModeSymlink != 0
	}
	for _, tc := range []struct {
		from, to string
		size     float64
	}{
		{"out", "out2", float64(len(filepath.Join(outside, "secret")))},
		{"dangling", "dangling2", float64(len("nowhere"))},
		{"in", "in2", 5},
	} {
		r := s.do("PATCH", "/api/contents/"+tc.from, map[string]string{"path": tc.to})
		expect(t, r, http.StatusOK)
		if m := r.json(t); m["path"] != tc.to || m["type"] != "file" || m["size"] != tc.size {
			t.Errorf("rename of %s: %s", tc.from, r.body)
		}
		if !isLink(tc.to) || isLink(tc.from) {
			t.Errorf("rename of %s: the link did not move", tc.from)
		}
	}

	// Deleted and restored, the link leading out comes back as itself.
	expect(t, s.do("DELETE", "/api/contents/out2", nil), http.StatusNoContent)
	r := s.do("POST", "/api/trash/out2/restore", nil)
	expect(t, r, http.StatusOK)
	if m := r.json(t); m["path"] != "out2" || m["writable"] != false || !isLink("out2") {
		t.Errorf("restore of a link out: %s", r.body)
	}

	// A link a kernel planted in the trash that, restored, leads into .nbkube: its model is
	// the link's, not the directory's.
	expect(t, s.do("DELETE", "/api/contents/real.txt", nil), http.StatusNoContent)
	files := filepath.Join(s.root, ".nbkube", "trash", "alice", "files")
	if err := os.Symlink(".nbkube", filepath.Join(files, "meta")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(files, "..", "info", "meta.trashinfo"), "[Trash Info]\nPath=meta\nDeletionDate=2024-01-01T00:00:00\n")
	r = s.do("POST", "/api/trash/meta/restore", nil)
	expect(t, r, http.StatusOK)
	if m := r.json(t); m["type"] != "file" || m["size"] != float64(len(".nbkube")) || !isLink("meta") {
		t.Errorf("restore of a link into .nbkube: %s", r.body)
	}

	if data, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(data) != "TOPSECRET" {
		t.Errorf("the target outside: %q %v", data, err)
	}
}
