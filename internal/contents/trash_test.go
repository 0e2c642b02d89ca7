package contents

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func size(n int64) *int64 { return &n }

func listTrash(t *testing.T, s *Store, user string) []jupyter.TrashEntry {
	t.Helper()
	list, err := s.ListTrash(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func ids(list []jupyter.TrashEntry) []string {
	out := []string{}
	for _, e := range list {
		out = append(out, e.ID)
	}
	return out
}

func TestTrash_DeleteMovesANonEmptyDirectoryToTheUsersTrash(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/x.txt": "x", "d/sub/n.ipynb": emptyNotebook, "d/.ipynb_checkpoints/x-checkpoint.txt": "old"})
	if err := s.Delete(ctx, "alice", "d"); err != nil {
		t.Fatal(err)
	}
	if exists(dir, "d") {
		t.Fatal("the directory is still there")
	}
	want := []jupyter.TrashEntry{{ID: "d", Name: "d", OriginalPath: "d", Type: jupyter.TypeDirectory, Deleted: jupyter.Time{Time: testTime}}}
	if diff := cmp.Diff(want, listTrash(t, s, "alice")); diff != "" {
		t.Errorf("alice's trash (-want +got):\n%s", diff)
	}
	if got := listTrash(t, s, "bob"); len(got) != 0 {
		t.Errorf("bob's trash has alice's entries: %v", got)
	}
	// The layout is the XDG trash's, for an admin to inspect; the whole tree moved.
	if got := readFile(t, dir, ".nbkube/trash/alice/info/d.trashinfo"); got != "[Trash Info]\nPath=d\nDeletionDate=2024-06-01T12:00:00\n" {
		t.Errorf("trashinfo %q", got)
	}
	for _, name := range []string{"x.txt", "sub/n.ipynb", ".ipynb_checkpoints/x-checkpoint.txt"} {
		if !exists(dir, ".nbkube/trash/alice/files/d/"+name) {
			t.Errorf("%s is not in the trash", name)
		}
	}
}

func TestTrash_FileEntriesHaveTypeSizeAndEncodedPaths(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a b/ü%.txt": "hello", "a b/n.ipynb": emptyNotebook})
	for _, p := range []string{"a b/ü%.txt", "a b/n.ipynb"} {
		if err := s.Delete(ctx, "alice", p); err != nil {
			t.Fatal(err)
		}
	}
	want := []jupyter.TrashEntry{
		{ID: "n.ipynb", Name: "n.ipynb", OriginalPath: "a b/n.ipynb", Type: jupyter.TypeNotebook, Size: size(int64(len(emptyNotebook))), Deleted: jupyter.Time{Time: testTime}},
		{ID: "ü%.txt", Name: "ü%.txt", OriginalPath: "a b/ü%.txt", Type: jupyter.TypeFile, Size: size(5), Deleted: jupyter.Time{Time: testTime}},
	}
	if diff := cmp.Diff(want, listTrash(t, s, "alice")); diff != "" {
		t.Errorf("trash (-want +got):\n%s", diff)
	}
	if got := readFile(t, dir, ".nbkube/trash/alice/info/ü%.txt.trashinfo"); got != "[Trash Info]\nPath=a%20b/%C3%BC%25.txt\nDeletionDate=2024-06-01T12:00:00\n" {
		t.Errorf("trashinfo %q", got)
	}
}

func TestTrash_NameCollisionsGetUniqueIDsAndListNewestFirst(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testTime)
	s, dir := newTestStore(t, Options{Clock: clk})
	for i := range 3 {
		writeTree(t, dir, map[string]string{"data.tar.gz": fmt.Sprint(i)})
		if err := s.Delete(ctx, "alice", "data.tar.gz"); err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk.Now().Add(time.Minute))
	}
	list := listTrash(t, s, "alice")
	if diff := cmp.Diff([]string{"data-2.tar.gz", "data-1.tar.gz", "data.tar.gz"}, ids(list)); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	for i, e := range list {
		if e.OriginalPath != "data.tar.gz" || e.Name != "data.tar.gz" {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if got := readFile(t, dir, ".nbkube/trash/alice/files/data-1.tar.gz"); got != "1" {
		t.Errorf("second deletion holds %q", got)
	}
}

func TestTrash_RestoreBringsItBackWhereItWas(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/x.txt": "x", "d/e/y.txt": "y"})
	if err := s.Delete(ctx, "alice", "d/e/y.txt"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "alice", "d"); err != nil {
		t.Fatal(err)
	}
	// The file's directory is gone too: restoring makes it again.
	m, err := s.RestoreTrash(ctx, "alice", "y.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != "d/e/y.txt" || m.Type != jupyter.TypeFile || readFile(t, dir, "d/e/y.txt") != "y" {
		t.Errorf("restored %+v", m)
	}
	// Now d exists: the directory's restore conflicts, elsewhere it works.
	_, err = s.RestoreTrash(ctx, "alice", "d", "")
	wantError(t, err, domainerr.ErrConflict, "File already exists: d")
	m, err = s.RestoreTrash(ctx, "alice", "d", "/d2/")
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != "d2" || m.Type != jupyter.TypeDirectory || readFile(t, dir, "d2/x.txt") != "x" {
		t.Errorf("restored elsewhere %+v", m)
	}
	if got := listTrash(t, s, "alice"); len(got) != 0 || exists(dir, ".nbkube/trash/alice/info/d.trashinfo") {
		t.Errorf("restored entries are still in the trash: %v", got)
	}
}

func TestTrash_RestoreRefusals(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "f"})
	if err := s.Delete(ctx, "alice", "f.txt"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, id, to string
		kind         error
		msg          string
	}{
		{user: "alice", id: "nope", kind: domainerr.ErrNotFound, msg: "No such entry in the trash: nope"},
		{user: "bob", id: "f.txt", kind: domainerr.ErrNotFound, msg: "No such entry in the trash: f.txt"},
		{user: "alice", id: "../alice/files/f.txt", kind: domainerr.ErrNotFound},
		{user: "alice", id: "..", kind: domainerr.ErrNotFound},
		{user: "alice", id: "f.txt", to: "missing/f.txt", kind: domainerr.ErrNotFound, msg: "No such directory: missing"},
		{user: "alice", id: "f.txt", to: "../f.txt", kind: domainerr.ErrForbidden},
		{user: "alice", id: "f.txt", to: ".hidden", kind: domainerr.ErrForbidden, msg: "Cannot restore file or directory '.hidden'"},
		{user: "alice", id: "f.txt", to: ".nbkube/f.txt", kind: domainerr.ErrForbidden},
	} {
		_, err := s.RestoreTrash(ctx, tc.user, tc.id, tc.to)
		wantError(t, err, tc.kind, tc.msg)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RestoreTrash(ctx, "alice", "f.txt", "out/f.txt"); err == nil {
		t.Error("restored through a link out of the root")
	}
	if _, err := os.Stat(filepath.Join(outside, "f.txt")); err == nil {
		t.Error("a file was restored outside the root")
	}
	if got := ids(listTrash(t, s, "alice")); len(got) != 1 {
		t.Errorf("a refused restore changed the trash: %v", got)
	}
}

func TestTrash_FileCheckpointsAreDeletedAsJupyterDoes(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/": "", "keep/": ""})
	saveNotebook := func(p string) {
		t.Helper()
		if _, err := s.create(p, jupyter.TypeNotebook, false); err != nil {
			t.Fatal(err)
		}
	}
	saveNotebook("d/n.ipynb")
	saveNotebook("keep/k.ipynb")
	if err := s.Delete(ctx, "alice", "d/n.ipynb"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.checkpoints.list("d/n.ipynb"); len(list) != 0 {
		t.Errorf("checkpoints of a deleted file remain: %v", list)
	}
	if _, err := s.RestoreTrash(ctx, "alice", "n.ipynb", ""); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.checkpoints.list("d/n.ipynb"); len(list) != 0 {
		t.Errorf("a restored file brought checkpoints back: %v", list)
	}
	// A directory's checkpoints are part of its tree and come back with it.
	if err := s.Delete(ctx, "alice", "keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RestoreTrash(ctx, "alice", "keep", ""); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.checkpoints.list("keep/k.ipynb"); len(list) != 1 {
		t.Errorf("restored directory's checkpoints: %v", list)
	}
}

func TestTrash_DeleteEntryAndEmpty(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "b/c.txt": "c", "e.txt": "e"})
	for _, p := range []string{"a.txt", "b", "e.txt"} {
		if err := s.Delete(ctx, "alice", p); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, dir, map[string]string{"a.txt": "bob's"})
	if err := s.Delete(ctx, "bob", "a.txt"); err != nil {
		t.Fatal(err)
	}
	wantError(t, s.DeleteTrash(ctx, "alice", "nope"), domainerr.ErrNotFound, "No such entry in the trash: nope")
	if err := s.DeleteTrash(ctx, "alice", "b"); err != nil {
		t.Fatal(err)
	}
	if exists(dir, ".nbkube/trash/alice/files/b") || exists(dir, ".nbkube/trash/alice/info/b.trashinfo") {
		t.Error("a deleted entry is still on disk")
	}
	wantError(t, s.DeleteTrash(ctx, "alice", "b"), domainerr.ErrNotFound, "")
	if err := s.EmptyTrash(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if got := listTrash(t, s, "alice"); len(got) != 0 {
		t.Errorf("emptied trash lists %v", got)
	}
	if diff := cmp.Diff([]string{"a.txt"}, ids(listTrash(t, s, "bob"))); diff != "" {
		t.Errorf("emptying alice's trash touched bob's (-want +got):\n%s", diff)
	}
	if err := s.EmptyTrash(ctx, "carol"); err != nil {
		t.Errorf("emptying a trash that was never made: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, ".nbkube/trash/alice/files"))
	if err != nil || len(entries) != 0 {
		t.Errorf("files left after emptying: %v %v", entries, err)
	}
}

func TestTrash_IsNeitherListedNorReachable(t *testing.T) {
	s, dir := newTestStore(t, Options{AllowHidden: true})
	writeTree(t, dir, map[string]string{"d/x": "x"})
	if err := s.Delete(ctx, "alice", "d"); err != nil {
		t.Fatal(err)
	}
	m, err := s.Get(ctx, "", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := m.Content.([]jupyter.ContentsModel); len(entries) != 0 {
		t.Errorf("root lists %v", entries)
	}
	for _, p := range []string{".nbkube/trash", ".nbkube/trash/alice/files/d/x", "/.nbkube/trash/alice/info/d.trashinfo"} {
		_, err := s.Get(ctx, p, GetOptions{Content: true})
		wantError(t, err, domainerr.ErrForbidden, "")
		wantError(t, s.Delete(ctx, "alice", p), domainerr.ErrForbidden, "")
	}
}

func TestTrash_ReadOnlyFilesAreNotTrashedAsInJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"ro.txt": "r"})
	readOnly(t, filepath.Join(dir, "ro.txt"))
	wantError(t, s.Delete(ctx, "alice", "ro.txt"), domainerr.ErrForbidden, "Permission denied: ro.txt")
}

// fsImmutableFL is Linux's FS_IMMUTABLE_FL (linux/fs.h), which x/sys/unix does not name.
const fsImmutableFL = 0x10

// readOnly makes a file that the process may not write: by its mode, or, for root, whom
// modes do not stop (and who runs CI), by the immutable flag.
func readOnly(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags|fsImmutableFL)
	}
	if err != nil {
		t.Skipf("running as root, and the file system of %s has no immutable flag: %v", path, err)
	}
	t.Cleanup(func() {
		if f, err := os.Open(path); err == nil {
			_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
			f.Close()
		}
	})
}
