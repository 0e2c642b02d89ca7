package contents

import (
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
