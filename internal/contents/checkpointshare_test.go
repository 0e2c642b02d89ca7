package contents

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func inodeOf(t *testing.T, path string) (ino uint64, nlink uint64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Ino, st.Nlink
}

// A checkpoint is made without a copy where it can be, and gets a file of its own right
// after, so that a program writing the file in place (as nbformat.write does) cannot change
// it: the version kept is the one asked for.
func TestCheckpoints_SharedThenUnsharedSurviveWritesInPlace(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxCheckpoints: 5})
	saveText(t, s, "f.txt", "version one")
	var ids []string
	for range 3 {
		cp, err := s.CreateCheckpoint(ctx, "f.txt")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cp.ID)
	}
	s.checkpoints.share.waitUnshared()
	fileIno, nlink := inodeOf(t, filepath.Join(dir, "f.txt"))
	if nlink != 1 {
		t.Errorf("the file has %d links after its checkpoints were unshared, want 1", nlink)
	}
	for _, id := range ids {
		if ino, _ := inodeOf(t, filepath.Join(dir, checkpointPath("f.txt", id))); ino == fileIno {
			t.Errorf("checkpoint %s is still the file's inode", id)
		}
	}
	// Written in place, as a kernel would.
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("overwritten in place"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		m, err := s.GetCheckpoint(ctx, "f.txt", id, GetOptions{Content: true})
		if err != nil {
			t.Fatal(err)
		}
		if m.Content != "version one" {
			t.Errorf("checkpoint %s = %q after the file was written in place, want the version checkpointed", id, m.Content)
		}
	}
	if err := s.RestoreCheckpoint(ctx, "f.txt", ids[0]); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "f.txt"); got != "version one" {
		t.Errorf("restored %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, checkpointDir, tempPrefix+"*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A save replaces the file by rename, so a checkpoint linked to the version before keeps it,
// and the client's ETag of a version is not changed by checkpointing it.
func TestCheckpoints_LinkedCheckpointKeepsItsVersionThroughSaves(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	saveText(t, s, "f.txt", "one")
	m, err := s.Get(ctx, "f.txt", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.CreateCheckpoint(ctx, "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveIf(ctx, "f.txt", textModel("two"), Precondition{IfMatch: []string{m.ETag}}); err != nil {
		t.Fatalf("a save with the ETag read before a checkpoint: %v", err)
	}
	s.checkpoints.share.waitUnshared()
	got, err := s.GetCheckpoint(ctx, "f.txt", cp.ID, GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != "one" || readFile(t, dir, "f.txt") != "two" {
		t.Errorf("checkpoint %q, file %q", got.Content, readFile(t, dir, "f.txt"))
	}
}

// Renaming a file whose checkpoints share its inode keeps them, and unshares them under the
// new name.
func TestCheckpoints_RenamedFileCheckpointsFollow(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	saveText(t, s, "a.txt", "kept")
	cp, err := s.CreateCheckpoint(ctx, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rename(ctx, "a.txt", "b.txt"); err != nil {
		t.Fatal(err)
	}
	s.checkpoints.share.waitUnshared()
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCheckpoint(ctx, "b.txt", cp.ID, GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != "kept" {
		t.Errorf("checkpoint after rename and a write in place = %q", got.Content)
	}
}

// The checkpoint itself is a link (or, where the file system has them, a reflink): no bytes
// are copied while the client waits.
func TestCheckpoints_AreMadeWithoutCopying(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	saveText(t, s, "f.txt", "content")
	in, st, err := s.openRegular("f.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.Mkdir(filepath.Join(dir, checkpointDir), 0o755); err != nil {
		t.Fatal(err)
	}
	cp := checkpointPath("f.txt", "checkpoint")
	linked, err := s.checkpoints.link(in, st, cp)
	if err != nil || !linked {
		t.Fatalf("link = %v, %v; want a link or a clone", linked, err)
	}
	fileIno, nlink := inodeOf(t, filepath.Join(dir, "f.txt"))
	cpIno, _ := inodeOf(t, filepath.Join(dir, cp))
	if s.checkpoints.share.noReflink.Load() {
		if cpIno != fileIno || nlink != 2 {
			t.Errorf("checkpoint inode %d, file's %d with %d links: want a hard link", cpIno, fileIno, nlink)
		}
	} else if cpIno == fileIno {
		t.Errorf("a reflink is a file of its own, yet the checkpoint is the file's inode")
	}
	if got := readFile(t, dir, cp); got != "content" {
		t.Errorf("checkpoint = %q", got)
	}
}

// xfsDir is a directory on an XFS file system, which has reflinks: a loop mount of an image
// in the test's temporary directory, for root with mkfs.xfs (hack/install-test-deps.sh
// installs xfsprogs); others skip.
func xfsDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting an XFS image needs root")
	}
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		t.Skip("mkfs.xfs is not installed (xfsprogs)")
	}
	base := t.TempDir()
	img, mnt := filepath.Join(base, "xfs.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// XFS's smallest file system is 300 MB; the image is sparse.
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-f", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("no loop mount here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	return mnt
}

// On a file system with reflinks the checkpoint is a clone: a file of its own at once, with
// nothing to unshare, which a write in place cannot reach.
func TestCheckpoints_AreReflinksWhereTheFileSystemHasThem(t *testing.T) {
	dir := xfsDir(t)
	s, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saveText(t, s, "f.txt", "cloned")
	cp, err := s.CreateCheckpoint(ctx, "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if s.checkpoints.share.noReflink.Load() {
		t.Fatal("the store found no reflinks on XFS")
	}
	fileIno, nlink := inodeOf(t, filepath.Join(dir, "f.txt"))
	if cpIno, _ := inodeOf(t, filepath.Join(dir, checkpointPath("f.txt", cp.ID))); cpIno == fileIno || nlink != 1 {
		t.Errorf("checkpoint inode %d, file's %d with %d links: want a clone", cpIno, fileIno, nlink)
	}
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("in place"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCheckpoint(ctx, "f.txt", cp.ID, GetOptions{Content: true})
	if err != nil || got.Content != "cloned" {
		t.Errorf("checkpoint after a write in place: %v %v", got, err)
	}
}

// A checkpoint syncs the data it links unless the store synced that version itself: a file
// the store saved is linked at once, one written by another program, or changed in place after
// the store's save, is synced first, and once synced is not synced again while unchanged.
func TestCheckpoints_SyncOnlyWhatTheStoreHasNotSynced(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxCheckpoints: 20})
	var syncs int
	fdatasync = func(fd int) error {
		syncs++
		return unix.Fdatasync(fd)
	}
	t.Cleanup(func() { fdatasync = unix.Fdatasync })
	checkpoint := func(what string, want int) {
		t.Helper()
		syncs = 0
		if _, err := s.CreateCheckpoint(ctx, "f.txt"); err != nil {
			t.Fatal(err)
		}
		if s.checkpoints.share.noReflink.Load() && syncs != want {
			t.Errorf("%s: %d data syncs at the checkpoint, want %d", what, syncs, want)
		}
	}
	saveText(t, s, "f.txt", "saved by the store")
	checkpoint("a file the store saved", 0)
	checkpoint("the same version again", 0)

	path := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(path, []byte("saved by the store, then appended to in place"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkpoint("a file written in place since", 1)
	checkpoint("that version again", 0)

	saveText(t, s, "f.txt", "saved by the store again")
	checkpoint("a file the store saved again", 0)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, another modification time: what a write in place leaves.
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	checkpoint("a file of the same size modified since", 1)

	if err := os.WriteFile(filepath.Join(dir, "g.txt"), []byte("written by a kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	syncs = 0
	if _, err := s.CreateCheckpoint(ctx, "g.txt"); err != nil {
		t.Fatal(err)
	}
	if s.checkpoints.share.noReflink.Load() && syncs != 1 {
		t.Errorf("a file the store never wrote: %d data syncs at the checkpoint, want 1", syncs)
	}
	syncs = 0
	if _, err := s.CreateCheckpoint(ctx, "g.txt"); err != nil {
		t.Fatal(err)
	}
	if s.checkpoints.share.noReflink.Load() && syncs != 0 {
		t.Errorf("that file, unchanged since its checkpoint: %d data syncs at the next, want 0", syncs)
	}
	if !s.checkpoints.share.noReflink.Load() {
		t.Log("the file system clones files: checkpoints are reflinks, which sync themselves")
	}
}

// A file checkpointed again and again has its checkpoints copied in batches: once no
// checkpoint has come for a quiet moment, and meanwhile at most every so often. Not after each
// checkpoint (each copy is the whole file written and synced, and holds up the links made
// meanwhile), nor never while checkpoints go on (a write in place would change them).
func TestCheckpoints_RepeatedCheckpointsAreCopiedInBatches(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxCheckpoints: 1000})
	s.checkpoints.share.quiet, s.checkpoints.share.most = 150*time.Millisecond, 400*time.Millisecond
	// Links, also where the file system could clone: clones are files of their own already.
	s.checkpoints.share.noReflink.Store(true)
	saveText(t, s, "f.txt", "content")
	var ids []string
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		cp, err := s.CreateCheckpoint(ctx, "f.txt")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cp.ID)
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	s.checkpoints.share.waitUnshared()
	// A copy gives every checkpoint still linked to the file one new inode: each inode is a copy.
	fileIno, _ := inodeOf(t, filepath.Join(dir, "f.txt"))
	copies := map[uint64]bool{}
	for _, id := range ids {
		ino, _ := inodeOf(t, filepath.Join(dir, checkpointPath("f.txt", id)))
		if ino == fileIno {
			t.Errorf("checkpoint %s is still the file's inode once the copies are done", id)
		}
		copies[ino] = true
	}
	// One each 400 ms while the checkpoints go on, and one after; pauses of the machine
	// longer than the quiet time may add some.
	most := int(elapsed/(400*time.Millisecond)) + 3
	if len(copies) < 2 || len(copies) > most {
		t.Errorf("%d checkpoints in %s were copied %d times, want 2 to %d", len(ids), elapsed.Round(time.Millisecond), len(copies), most)
	}
}
