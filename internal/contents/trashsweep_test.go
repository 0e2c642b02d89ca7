package contents

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestTrash_EntriesExpireAfterMaxAge(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testTime)
	s, dir := newTestStore(t, Options{Clock: clk, TrashMaxAge: 30 * 24 * time.Hour})
	forever := newTestStoreAt(t, dir, Options{Clock: clk})
	writeTree(t, dir, map[string]string{"old.txt": "o", "d/x": "x"})
	if err := s.Delete(ctx, "alice", "old.txt"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(testTime.Add(10 * 24 * time.Hour))
	if err := s.Delete(ctx, "bob", "d"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(testTime.Add(30 * 24 * time.Hour))
	if err := s.SweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(listTrash(t, s, "alice")); len(got) != 1 {
		t.Fatalf("an entry expired at its max age exactly: %v", got)
	}
	clk.SetTime(testTime.Add(30*24*time.Hour + time.Second))
	// A store that keeps entries forever sweeps nothing.
	if err := forever.SweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(listTrash(t, s, "alice")); len(got) != 1 {
		t.Fatalf("a sweep without max age removed %v", got)
	}
	if err := s.SweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listTrash(t, s, "alice"); len(got) != 0 || exists(dir, ".nbkube/trash/alice/files/old.txt") || exists(dir, ".nbkube/trash/alice/info/old.txt.trashinfo") {
		t.Errorf("expired entry still there: %v", got)
	}
	if got := ids(listTrash(t, s, "bob")); len(got) != 1 {
		t.Errorf("an entry 20 days old expired: %v", got)
	}
	clk.SetTime(testTime.Add(41 * 24 * time.Hour))
	if err := s.SweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listTrash(t, s, "bob"); len(got) != 0 || exists(dir, ".nbkube/trash/bob/files/d/x") {
		t.Errorf("expired directory still there: %v", got)
	}
}

// newTestStoreAt is another store (a replica) on the tree at dir.
func newTestStoreAt(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestTrash_ReplicasSweepingAndDeletingAtOnceLoseNothing(t *testing.T) {
	// The old entries are dated ten minutes back, so that they have expired when the sweeps
	// run at the real time; the files the deletes make meanwhile are recent to the sweeps (a
	// clock far ahead would make a delete's temporary files look like a crash's leftovers,
	// which no real clock does), and an entry without its info file must not be judged one.
	clk := clocktesting.NewFakePassiveClock(time.Now().Add(-10 * time.Minute))
	opts := Options{Clock: clk, TrashMaxAge: time.Minute}
	a, dir := newTestStore(t, opts)
	b := newTestStoreAt(t, dir, opts)
	const n = 40
	for i := range n {
		writeTree(t, dir, map[string]string{fmt.Sprintf("old%d.txt", i): "old"})
		if err := a.Delete(ctx, "alice", fmt.Sprintf("old%d.txt", i)); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(time.Now())
	// Both replicas sweep the expired entries while both trash files of the same name.
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for _, s := range []*Store{a, b} {
		wg.Go(func() { errs <- s.SweepTrash(ctx) })
		wg.Go(func() { errs <- s.SweepTrash(ctx) })
	}
	for i := range n {
		writeTree(t, dir, map[string]string{fmt.Sprintf("new%d/a.txt", i): fmt.Sprint(i)})
	}
	for i := range n {
		s := []*Store{a, b}[i%2]
		wg.Go(func() { errs <- s.Delete(ctx, "alice", fmt.Sprintf("new%d/a.txt", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	list := listTrash(t, a, "alice")
	if len(list) != n {
		t.Fatalf("%d entries in the trash, want the %d new ones: %v", len(list), n, ids(list))
	}
	seen := map[string]bool{}
	for _, e := range list {
		got := readFile(t, dir, ".nbkube/trash/alice/files/"+e.ID)
		if want := e.OriginalPath[len("new") : len(e.OriginalPath)-len("/a.txt")]; got != want {
			t.Errorf("entry %s from %s holds %q", e.ID, e.OriginalPath, got)
		}
		seen[e.OriginalPath] = true
	}
	if len(seen) != n {
		t.Errorf("entries of %d paths, want %d", len(seen), n)
	}
}

func TestTrash_SweepRemovesLeftoversOfInterruptedOperationsAfterAGrace(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s, dir := newTestStore(t, Options{Clock: clk})
	writeTree(t, dir, map[string]string{"kept.txt": "k", "orphan/x": "x"})
	if err := s.Delete(ctx, "alice", "kept.txt"); err != nil {
		t.Fatal(err)
	}
	// What crashes leave: an entry whose info file was taken, an info file whose entry never
	// arrived (or was restored), a taken info file and a temporary file.
	if err := os.Rename(filepath.Join(dir, "orphan"), filepath.Join(dir, ".nbkube/trash/alice/files/orphan")); err != nil {
		t.Fatal(err)
	}
	info := trashInfo{path: "gone.txt", deleted: clk.Now()}.marshal()
	writeTree(t, dir, map[string]string{
		".nbkube/trash/alice/info/gone.txt.trashinfo":              string(info),
		".nbkube/trash/alice/info/" + tempPrefix + "1234.expunged": string(info),
		".nbkube/trash/alice/info/" + tempPrefix + "5678.tmp":      "",
		".nbkube/trash/alice/info/admin-notes":                     "not ours",
	})
	leftovers := []string{"files/orphan", "info/gone.txt.trashinfo", "info/" + tempPrefix + "1234.expunged", "info/" + tempPrefix + "5678.tmp"}
	if err := s.SweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range leftovers {
		if !exists(dir, ".nbkube/trash/alice/"+name) {
			t.Errorf("%s removed before the grace ran out", name)
		}
	}
	clk.SetTime(clk.Now().Add(trashGrace + time.Minute))
	if err := s.SweepTrash(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range leftovers {
		if exists(dir, ".nbkube/trash/alice/"+name) {
			t.Errorf("%s not removed", name)
		}
	}
	if diff := cmp.Diff([]string{"kept.txt"}, ids(listTrash(t, s, "alice"))); diff != "" {
		t.Errorf("trash (-want +got):\n%s", diff)
	}
	if !exists(dir, ".nbkube/trash/alice/info/admin-notes") {
		t.Error("the sweep removed a file it did not make")
	}
}

// A FIFO planted as an info file (a kernel mounting the tree can) is skipped by the sweep
// and the listing, which would otherwise wait in its open for a writer, for good.
func TestTrash_SweepAndListingSkipAFIFOInfoFile(t *testing.T) {
	s, dir := newTestStore(t, Options{TrashMaxAge: time.Hour})
	writeTree(t, dir, map[string]string{".nbkube/trash/alice/files/f": "f", ".nbkube/trash/alice/info/": ""})
	fifo := filepath.Join(dir, ".nbkube/trash/alice/info/f.trashinfo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Release what today's code would leave waiting.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	done := make(chan error, 1)
	go func() {
		if err := s.SweepTrash(ctx); err != nil {
			done <- err
			return
		}
		_, err := s.ListTrash(ctx, "alice")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep or the listing waits on the FIFO")
	}
}
