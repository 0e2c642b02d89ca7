package contents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
