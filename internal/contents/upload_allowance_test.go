package contents

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// uploadFiles are the names in the root's uploads directory of the upload to p that exist.
func uploadFiles(dir, p string) []string {
	var names []string
	for _, ext := range []string{".part", ".json"} {
		if n := uploadsDir + "/" + uploadKey(p) + ext; exists(dir, n) {
			names = append(names, ext)
		}
	}
	return names
}

// inProgress checks that the upload to p has both its partial and its state file.
func inProgress(t *testing.T, dir, p string) {
	t.Helper()
	if got := uploadFiles(dir, p); !slices.Equal(got, []string{".part", ".json"}) {
		t.Fatalf("upload of %s has %v, want its partial and state files", p, got)
	}
}

// gone checks that nothing is left of the upload to p.
func gone(t *testing.T, dir, p string) {
	t.Helper()
	if got := uploadFiles(dir, p); len(got) != 0 {
		t.Fatalf("upload of %s left %v", p, got)
	}
}

func mustChunk(t *testing.T, s *Store, p string, n int, data string) {
	t.Helper()
	if _, err := chunk(t, s, p, n, data); err != nil {
		t.Fatalf("chunk %d of %s: %v", n, p, err)
	}
}

func TestUploadAllowance_OverItIsTooLargeAndOnlyThatUploadIsDropped(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	ann := s.ForUploader("ann", 10)
	mustChunk(t, ann, "a.bin", 1, "aaaa")
	mustChunk(t, ann, "big.bin", 1, "bbbb")
	_, err := chunk(t, ann, "big.bin", 2, "bbb")
	wantError(t, err, domainerr.ErrTooLarge,
		"Upload of big.bin refused: your uploads in progress would hold 11 bytes, over your upload allowance of 10 bytes")
	gone(t, dir, "big.bin")
	if exists(dir, "big.bin") {
		t.Error("a refused upload reached its target")
	}

	inProgress(t, dir, "a.bin")
	var st uploadState
	if err := json.Unmarshal([]byte(readFile(t, dir, uploadsDir+"/"+uploadKey("a.bin")+".json")), &st); err != nil || st.User != "ann" {
		t.Errorf("state of a.bin %+v (%v), want ann's", st, err)
	}
	mustChunk(t, ann, "a.bin", -1, "aaaaaa")
	if got := readFile(t, dir, "a.bin"); got != "aaaaaaaaaa" {
		t.Errorf("a.bin = %q", got)
	}
}

func TestUploadAllowance_EachUserHasTheirOwn(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	ann, ben := s.ForUploader("ann", 5), s.ForUploader("ben", 5)
	mustChunk(t, ann, "a", 1, "aaaa")
	mustChunk(t, ben, "b", 1, "bbbbb")
	_, err := chunk(t, ann, "a", 2, "aa")
	wantError(t, err, domainerr.ErrTooLarge,
		"Upload of a refused: your uploads in progress would hold 6 bytes, over your upload allowance of 5 bytes")
	gone(t, dir, "a")
	inProgress(t, dir, "b")
}

func TestUploadAllowance_AbandonedUploadsDoNotCount(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testTime)
	s, dir := newTestStore(t, Options{Clock: clk, UploadTTL: time.Minute})
	ann := s.ForUploader("ann", 6)
	mustChunk(t, ann, "old", 1, "ooooo")
	clk.SetTime(testTime.Add(40 * time.Second))
	mustChunk(t, ann, "new", 1, "n")
	clk.SetTime(testTime.Add(90 * time.Second))
	// old is abandoned but not swept (only a new upload or SweepUploads sweeps): it holds 5
	// bytes that must not count.
	mustChunk(t, ann, "new", 2, "nnnn")
	inProgress(t, dir, "old")
}

func TestUploadAllowance_ACompletedUploadFreesItsBytes(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	ann := s.ForUploader("ann", 6)
	mustChunk(t, ann, "a", 1, "aaa")
	mustChunk(t, ann, "a", -1, "aaa")
	mustChunk(t, ann, "b", 1, "bbbbbb")
	_, err := chunk(t, ann, "c", 1, "c")
	wantError(t, err, domainerr.ErrTooLarge,
		"Upload of c refused: your uploads in progress would hold 7 bytes, over your upload allowance of 6 bytes")
	gone(t, dir, "c")
	mustChunk(t, ann, "b", -1, "")
	mustChunk(t, ann, "c", 1, "cccccc")
}

func TestUploadAllowance_ZeroIsUnlimitedButTheSizeLimitHolds(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxUploadSize: 5})
	ann := s.ForUploader("ann", 0)
	for _, p := range []string{"a", "b", "c"} {
		mustChunk(t, ann, p, 1, "xxxx")
	}
	_, err := chunk(t, ann, "a", 2, "xx")
	wantError(t, err, domainerr.ErrTooLarge, "Upload of a exceeds the limit of 5 bytes")
	gone(t, dir, "a")
	inProgress(t, dir, "c")
}

// A view shares its store's root: closing the view leaves the store open.
func TestUploadAllowance_ClosingTheViewLeavesTheStoreOpen(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	if err := s.ForUploader("ann", 1).Close(); err != nil {
		t.Fatal(err)
	}
	mustChunk(t, s, "a", 1, "a")
}

func TestSweepUploads_RemovesIdleUploadsAndKeepsFreshOnes(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testTime)
	s, dir := newTestStore(t, Options{Clock: clk, UploadTTL: time.Minute})
	if err := s.SweepUploads(ctx); err != nil {
		t.Fatalf("sweeping before any upload: %v", err)
	}
	mustChunk(t, s, "old", 1, "o")
	clk.SetTime(testTime.Add(50 * time.Second))
	mustChunk(t, s, "fresh", 1, "f")
	// A partial file whose state a crash lost.
	if err := os.WriteFile(filepath.Join(dir, uploadsDir, "orphan.part"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, uploadsDir, "orphan.part"), testTime, testTime); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(testTime.Add(90 * time.Second))
	if err := s.SweepUploads(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, dir, "old")
	if exists(dir, uploadsDir+"/orphan.part") {
		t.Error("the orphaned partial file was kept")
	}
	inProgress(t, dir, "fresh")
	mustChunk(t, s, "fresh", -1, "f")
	if got := readFile(t, dir, "fresh"); got != "ff" {
		t.Errorf("fresh = %q", got)
	}
}

// TestUploadAllowance_ConcurrentChunksThroughTwoReplicasNeverExceedIt: twelve first chunks
// of 300 KiB at once, through two replicas of the store, against an allowance of 1 MiB:
// at most three are taken, and what the uploads hold on disk stays within it. Each chunk's
// check and reservation are one step, as a kernel's quota reservation is.
func TestUploadAllowance_ConcurrentChunksThroughTwoReplicasNeverExceedIt(t *testing.T) {
	const allowance, size = 1 << 20, 300 << 10
	// One clock for both, at the real time, as replicas' clocks are: each new upload sweeps,
	// and a replica whose clock ran ahead would take the other's uploads for abandoned.
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s, dir := newTestStore(t, Options{Clock: clk})
	replicas := []*Store{s.ForUploader("ann", allowance), newTestStoreAt(t, dir, Options{Clock: clk}).ForUploader("ann", allowance)}
	data := string(make([]byte, size))
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = chunk(t, replicas[i%2], fmt.Sprintf("f%d.bin", i), 1, data)
		})
	}
	wg.Wait()
	taken := 0
	for _, err := range errs {
		switch {
		case err == nil:
			taken++
		case !errors.Is(err, domainerr.ErrTooLarge):
			t.Errorf("a chunk failed otherwise: %v", err)
		}
	}
	var held int64
	entries, _ := os.ReadDir(filepath.Join(dir, uploadsDir))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".part") {
			held += fi.Size()
		}
	}
	if taken > allowance/size || held > allowance {
		t.Errorf("%d chunks taken, %d bytes held, against an allowance of %d bytes", taken, held, allowance)
	}
	if taken == 0 {
		t.Error("no chunk was taken")
	}
}

// A FIFO a kernel planted among the uploads' state files does not stop uploads: the
// allowance's check reads every state file, and a FIFO's open waits for a writer.
func TestUploadAllowance_AFIFOAmongTheStatesIsSkipped(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{uploadsDir + "/": ""})
	fifo := filepath.Join(dir, uploadsDir, "planted.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := chunk(t, s.ForUploader("ann", 10), "a.bin", 1, "aaa")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upload waits on the FIFO")
	}
}
