package contents

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func newSub(t testing.TB, s *Store, dir string) *Store {
	t.Helper()
	v, err := s.Sub(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func listNames(t *testing.T, s *Store, dir string) []string {
	t.Helper()
	m, err := s.Get(ctx, dir, GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range m.Content.([]jupyter.ContentsModel) {
		names = append(names, e.Name)
	}
	return names
}

func trySaveText(s *Store, p, text string) error {
	content, _ := json.Marshal(text)
	_, err := s.Save(ctx, p, &jupyter.SaveModel{Type: jupyter.TypeFile, Format: jupyter.FormatText, Content: content})
	return err
}

func TestSub_ViewIsRootedAtItsDirectoryWhichItCreates(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"ben/b.txt": "ben's", "top.txt": "top"})
	ann := newSub(t, s, "users/ann")
	if err := trySaveText(ann, "a.txt", "ann's"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "users/ann/a.txt"); got != "ann's" {
		t.Fatalf("ann's file holds %q", got)
	}
	if got := listNames(t, ann, ""); !slices.Equal(got, []string{"a.txt"}) {
		t.Fatalf("ann's root lists %v", got)
	}
	m, err := ann.Get(ctx, "a.txt", GetOptions{})
	if err != nil || m.Path != "a.txt" {
		t.Fatalf("model %+v, %v: want the path relative to the view", m, err)
	}
	for _, p := range []string{"../ben/b.txt", "../../top.txt", "%2e%2e/top.txt"} {
		if _, err := ann.Get(ctx, p, GetOptions{Content: true}); err == nil {
			t.Errorf("Get(%q) served a file outside the view", p)
		}
	}
	if got := listNames(t, s, "users"); !slices.Equal(got, []string{"ann"}) {
		t.Fatalf("the store's listing of users is %v", got)
	}
}

func TestSub_RefusesPathsThatAreNotAHome(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	for _, d := range []string{"", "/", "../x", "a/../b", ".nbkube", "users/.hidden"} {
		if v, err := s.Sub(d); err == nil {
			v.Close()
			t.Errorf("Sub(%q) was accepted", d)
		}
	}
}

func TestSub_LinksLeavingTheViewAreRefused(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"ben/b.txt": "ben's", "ann/": ""})
	ann := newSub(t, s, "ann")
	// Links a kernel mounting ann's home could make: to another home, to the volume's root
	// by a relative and by an absolute path.
	for name, target := range map[string]string{"toben": "../ben", "up": "..", "abs": dir, "benfile": "../ben/b.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, "ann", name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"toben/b.txt", "up/ben/b.txt", "abs/ben/b.txt", "benfile"} {
		if _, err := ann.Get(ctx, p, GetOptions{Content: true}); err == nil {
			t.Errorf("Get(%q) served another home's file", p)
		}
		if f, _, err := ann.Open(ctx, p); err == nil {
			f.Close()
			t.Errorf("Open(%q) opened another home's file", p)
		}
		if err := trySaveText(ann, p, "planted"); err == nil {
			t.Errorf("Save(%q) wrote through a link out of the home", p)
		}
	}
	if got := readFile(t, dir, "ben/b.txt"); got != "ben's" {
		t.Fatalf("ben's file now holds %q", got)
	}
	if got := listNames(t, ann, ""); len(got) != 0 {
		t.Fatalf("ann's listing shows links out of her home: %v", got)
	}
}

// TestStore_LinksIntoMetadataAreRefusedByTheirTarget makes the links a kernel could make into
// the store's own directory, in a home and at the root, and checks that no operation goes
// through them although their names look harmless.
func TestStore_LinksIntoMetadataAreRefusedByTheirTarget(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"ann/n.ipynb": emptyNotebook, "top.ipynb": emptyNotebook})
	ann := newSub(t, s, "ann")
	for _, c := range []struct {
		name  string
		store *Store
		home  string // where the links are made, relative to dir
	}{{"home", ann, "ann"}, {"root", s, ""}} {
		t.Run(c.name, func(t *testing.T) {
			nb := "n.ipynb"
			if c.home == "" {
				nb = "top.ipynb"
			}
			id, err := c.store.NotebookID(ctx, nb)
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(dir, c.home)
			idFile := ".nbkube/ids/by-id/" + id
			for name, target := range map[string]string{"notes": ".nbkube", "deep": ".nbkube/ids", "entry": idFile} {
				if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{"notes", "notes/ids/by-id/" + id, "deep/by-id", "entry"} {
				if _, err := c.store.Get(ctx, p, GetOptions{Content: true}); !isKind(err, domainerr.ErrForbidden) {
					t.Errorf("Get(%q) = %v, want forbidden", p, err)
				}
				if f, _, err := c.store.Open(ctx, p); err == nil {
					f.Close()
					t.Errorf("Open(%q) opened the store's own files", p)
				}
			}
			for _, p := range []string{"entry", "notes/ids/by-id/" + id, "notes/planted.txt", "deep/planted"} {
				if err := trySaveText(c.store, p, "x"); err == nil {
					t.Errorf("Save(%q) wrote into the store's own directory", p)
				}
			}
			if _, err := c.store.Rename(ctx, nb, "notes/moved.ipynb"); err == nil {
				t.Errorf("Rename into a link to the store's own directory was accepted")
			}
			if _, err := c.store.Copy(ctx, nb, "deep"); err == nil {
				t.Errorf("Copy into a link to the store's own directory was accepted")
			}
			if got := readFile(t, base, idFile); got != nb {
				t.Fatalf("the id's entry now holds %q", got)
			}
			if _, err := os.Lstat(filepath.Join(base, ".nbkube/planted.txt")); err == nil {
				t.Fatal("a file was planted in the store's own directory")
			}
			for _, n := range listNames(t, c.store, "") {
				if n == "notes" || n == "deep" || n == "entry" {
					t.Errorf("the listing shows the link %s", n)
				}
			}
		})
	}
}

func TestStore_HomesOwnDirectoriesAreRefusedByNameAtTheRoot(t *testing.T) {
	s, dir := newTestStore(t, Options{AllowHidden: true})
	writeTree(t, dir, map[string]string{"ann/.nbkube/ids/by-id/x": "n.ipynb", "ann/n.ipynb": emptyNotebook})
	if _, err := s.Get(ctx, "ann/.nbkube/ids/by-id/x", GetOptions{Content: true}); !isKind(err, domainerr.ErrForbidden) {
		t.Fatalf("Get of a home's own directory = %v, want forbidden", err)
	}
	if got := listNames(t, s, "ann"); !slices.Equal(got, []string{"n.ipynb"}) {
		t.Fatalf("the admin's listing of ann's home is %v", got)
	}
}

func TestSub_TrashAndIDsLiveInTheHome(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"ann/n.ipynb": emptyNotebook, "ann/old.txt": "x"})
	ann := newSub(t, s, "ann")
	if _, err := ann.NotebookID(ctx, "n.ipynb"); err != nil {
		t.Fatal(err)
	}
	if err := ann.Delete(ctx, "ann", "old.txt"); err != nil {
		t.Fatal(err)
	}
	entries, err := ann.ListTrash(ctx, "ann")
	if err != nil || len(entries) != 1 {
		t.Fatalf("ann's trash: %v, %v", entries, err)
	}
	if !exists(dir, "ann/.nbkube/trash/ann/files/old.txt") || !exists(dir, "ann/.nbkube/ids/by-path/n.ipynb") || exists(dir, ".nbkube") {
		t.Fatal("the home's trash and ids are not in the home's own directory")
	}
	if got, _ := s.ListTrash(ctx, "ann"); len(got) != 0 {
		t.Fatalf("the root's trash shows a home's entries: %v", got)
	}
}

func isKind(err, kind error) bool { return errors.Is(err, kind) }

// BenchmarkSub is what a request of a user with a home pays for its view: opening the view
// of an existing home and closing it.
func BenchmarkSub(b *testing.B) {
	s, dir := newTestStore(b, Options{})
	writeTree(b, dir, map[string]string{"users/ann/": ""})
	for b.Loop() {
		v, err := s.Sub("users/ann")
		if err != nil {
			b.Fatal(err)
		}
		v.Close()
	}
}
