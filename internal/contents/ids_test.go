package contents

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nbkube/nbkube/internal/domainerr"
)

func TestNotebookIDs_StableAcrossStoresRenamesAndReplicas(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.ipynb": emptyNotebook, "d/b.ipynb": emptyNotebook, "e/": ""})
	idA, err := s.NotebookID(ctx, "a.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	idB, err := s.NotebookID(ctx, "d/b.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	if !notebookIDPattern.MatchString(idA) || idA == idB {
		t.Fatalf("ids %q %q", idA, idB)
	}
	// Another replica (or the same after a restart) on the same tree.
	other, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if again, _ := other.NotebookID(ctx, "a.ipynb"); again != idA {
		t.Errorf("other store's id %q, want %q", again, idA)
	}
	if _, err := other.Rename(ctx, "a.ipynb", "e/a2.ipynb"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rename(ctx, "d", "e/d2"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{idA: "e/a2.ipynb", idB: "e/d2/b.ipynb"} {
		if p, err := s.NotebookPath(ctx, id); err != nil || p != want {
			t.Errorf("NotebookPath(%s) = %q, %v; want %q", id, p, err, want)
		}
		if again, _ := s.NotebookID(ctx, want); again != id {
			t.Errorf("NotebookID(%s) = %q, want %q", want, again, id)
		}
	}
	if err := s.Delete(ctx, "alice", "e/d2/b.ipynb"); err != nil {
		t.Fatal(err)
	}
	_, err = s.NotebookPath(ctx, idB)
	wantError(t, err, domainerr.ErrNotFound, "No notebook with id "+idB)
	writeTree(t, dir, map[string]string{"e/d2/b.ipynb": emptyNotebook})
	if fresh, _ := s.NotebookID(ctx, "e/d2/b.ipynb"); fresh == idB {
		t.Error("a new notebook at a deleted one's path got its id")
	}
}

func TestNotebookIDs_UnknownAndMissingAreNotFound(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	_, err := s.NotebookPath(ctx, "../../etc/passwd")
	wantError(t, err, domainerr.ErrNotFound, "")
	_, err = s.NotebookPath(ctx, newNotebookID())
	wantError(t, err, domainerr.ErrNotFound, "")
	_, err = s.NotebookID(ctx, "missing.ipynb")
	wantError(t, err, domainerr.ErrNotFound, "No such file or directory: missing.ipynb")
}

// TestFileIDs_FollowFilesAndDirectories: any file or directory gets an id (jupyter_server_fileid),
// which follows it through renames of it and of its parents, is the notebook id of a notebook,
// is new on a copy, is forgotten on delete, and is the same from another store on the tree.
func TestFileIDs_FollowFilesAndDirectories(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"data/x.csv": "1,2\n", "data/sub/n.ipynb": emptyNotebook, "other/": ""})
	ids := map[string]string{}
	for _, p := range []string{"data", "data/x.csv", "data/sub", "data/sub/n.ipynb", ""} {
		id, got, err := s.FileID(ctx, p)
		if err != nil || !notebookIDPattern.MatchString(id) || got != p {
			t.Fatalf("FileID(%q) = %q, %q, %v", p, id, got, err)
		}
		ids[p] = id
	}
	if nb, _ := s.NotebookID(ctx, "data/sub/n.ipynb"); nb != ids["data/sub/n.ipynb"] {
		t.Errorf("the notebook id %q is not its file id %q", nb, ids["data/sub/n.ipynb"])
	}
	if again, _, _ := s.FileID(ctx, "data/sub"); again != ids["data/sub"] {
		t.Errorf("a second request gave %q, want %q", again, ids["data/sub"])
	}

	// A file renamed inside a directory keeps its id, and the directory keeps its own.
	if _, err := s.Rename(ctx, "data/x.csv", "data/y.csv"); err != nil {
		t.Fatal(err)
	}
	// The directory moves with everything in it, through another replica's store.
	other, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Rename(ctx, "data", "other/moved"); err != nil {
		t.Fatal(err)
	}
	for was, now := range map[string]string{"data": "other/moved", "data/x.csv": "other/moved/y.csv",
		"data/sub": "other/moved/sub", "data/sub/n.ipynb": "other/moved/sub/n.ipynb", "": ""} {
		if p, err := s.FilePath(ctx, ids[was]); err != nil || p != now {
			t.Errorf("FilePath(id of %q) = %q, %v; want %q", was, p, err, now)
		}
		if id, _, _ := other.FileID(ctx, now); id != ids[was] {
			t.Errorf("FileID(%q) = %q, want the id %q it had as %q", now, id, ids[was], was)
		}
	}
	if _, err := s.NotebookPath(ctx, ids["data/sub"]); err == nil {
		t.Error("a directory's id answered as a notebook's")
	}

	// A copy is a new file.
	if _, err := s.Copy(ctx, "other/moved/y.csv", "other"); err != nil {
		t.Fatal(err)
	}
	if id, _, _ := s.FileID(ctx, "other/y.csv"); id == ids["data/x.csv"] || id == "" {
		t.Errorf("the copy's id %q", id)
	}

	// A deleted directory's ids, its own and its files', are forgotten; a new one there is new.
	if err := s.Delete(ctx, "alice", "other/moved/sub"); err != nil {
		t.Fatal(err)
	}
	for _, was := range []string{"data/sub", "data/sub/n.ipynb"} {
		_, err := s.FilePath(ctx, ids[was])
		wantError(t, err, domainerr.ErrNotFound, "No file with id "+ids[was])
	}
	writeTree(t, dir, map[string]string{"other/moved/sub/": ""})
	if id, _, _ := s.FileID(ctx, "other/moved/sub"); id == ids["data/sub"] {
		t.Error("a new directory at a deleted one's path got its id")
	}
	// A directory whose id is asked for after a file stood at its path (replaced behind the
	// store's back) gets an id of its own, and the file's id answers nothing.
	if err := s.Delete(ctx, "alice", "other/moved/y.csv"); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"f": "x"})
	fileID, _, _ := s.FileID(ctx, "f")
	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"f/": ""})
	dirID, _, err := s.FileID(ctx, "f")
	if err != nil || dirID == fileID {
		t.Errorf("the directory f: %q, %v (the file's was %q)", dirID, err, fileID)
	}
	if _, err := s.FilePath(ctx, fileID); !errors.Is(err, domainerr.ErrNotFound) {
		t.Errorf("the replaced file's id: %v", err)
	}
}

func TestFileIDs_RefusedAndUnknown(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{".hidden/a.txt": "x"})
	_, _, err := s.FileID(ctx, "missing.txt")
	wantError(t, err, domainerr.ErrNotFound, "")
	_, _, err = s.FileID(ctx, ".hidden/a.txt")
	wantError(t, err, domainerr.ErrForbidden, "")
	_, _, err = s.FileID(ctx, ".nbkube/ids")
	wantError(t, err, domainerr.ErrForbidden, "")
	_, _, err = s.FileID(ctx, "../x")
	if err == nil {
		t.Error("a path above the root got an id")
	}
	for _, id := range []string{"nope", "00000000-0000-4000-8000-000000000000", "../../etc/passwd"} {
		_, err := s.FilePath(ctx, id)
		wantError(t, err, domainerr.ErrNotFound, "")
	}
}
