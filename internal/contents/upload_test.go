package contents

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func chunk(t *testing.T, s *Store, p string, n int, data string) (*jupyter.ContentsModel, error) {
	t.Helper()
	content, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(data)))
	return s.Save(ctx, p, &jupyter.SaveModel{Type: "file", Format: "base64", Chunk: &n, Content: content})
}

func TestUpload_ChunksAssembleAtomicallyOnTheLastOne(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"big.bin": "old"})
	if err := os.Chmod(filepath.Join(dir, "big.bin"), 0o640); err != nil {
		t.Fatal(err)
	}
	for i, part := range []string{"aaa", "bbb"} {
		m, err := chunk(t, s, "big.bin", i+1, part)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != "big.bin" || *m.Size != int64(3*(i+1)) {
			t.Errorf("chunk %d model %+v", i+1, m)
		}
		if got := readFile(t, dir, "big.bin"); got != "old" {
			t.Fatalf("target changed before the last chunk: %q", got)
		}
	}
	// A repeated chunk (a retry after a lost reply) is not written twice.
	if _, err := chunk(t, s, "big.bin", 2, "bbb"); err != nil {
		t.Fatal(err)
	}
	m, err := chunk(t, s, "big.bin", -1, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "big.bin"); got != "aaabbbc" || *m.Size != 7 {
		t.Errorf("assembled %q, model size %d", got, *m.Size)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "big.bin")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode())
	}
	entries, _ := os.ReadDir(filepath.Join(dir, uploadsDir))
	if len(entries) != 0 {
		t.Errorf("upload leftovers: %v", entries)
	}
	_, err = chunk(t, s, "big.bin", 2, "x")
	wantError(t, err, domainerr.ErrInvalid, "No upload of big.bin in progress: chunk 1 starts one")
}

func TestUpload_OutOfOrderChunkIsRefused(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	if _, err := chunk(t, s, "f", 1, "a"); err != nil {
		t.Fatal(err)
	}
	_, err := chunk(t, s, "f", 3, "c")
	wantError(t, err, domainerr.ErrInvalid, "Chunk 3 of f is out of order: expected chunk 2")
	_, err = chunk(t, s, "f", 0, "c")
	wantError(t, err, domainerr.ErrInvalid, "Invalid chunk number 0")
	n := 2
	_, err = s.Save(ctx, "f", &jupyter.SaveModel{Type: "notebook", Chunk: &n, Content: json.RawMessage(`{}`)})
	wantError(t, err, domainerr.ErrInvalid, `File type "notebook" is not supported for large file transfer`)
}

func TestUpload_OverTheSizeLimitIsTooLargeAndDropped(t *testing.T) {
	s, dir := newTestStore(t, Options{MaxUploadSize: 5})
	if _, err := chunk(t, s, "f", 1, "abc"); err != nil {
		t.Fatal(err)
	}
	_, err := chunk(t, s, "f", 2, "def")
	wantError(t, err, domainerr.ErrTooLarge, "Upload of f exceeds the limit of 5 bytes")
	if entries, _ := os.ReadDir(filepath.Join(dir, uploadsDir)); len(entries) != 0 || exists(dir, "f") {
		t.Errorf("leftovers after a refused upload: %v", entries)
	}
}

func TestUpload_AbandonedUploadsExpireAndAreSwept(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testTime)
	s, dir := newTestStore(t, Options{Clock: clk, UploadTTL: time.Minute})
	if _, err := chunk(t, s, "old", 1, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := chunk(t, s, "stale", 1, "a"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(testTime.Add(2 * time.Minute))
	_, err := chunk(t, s, "old", 2, "b")
	wantError(t, err, domainerr.ErrInvalid, "The upload of old was abandoned: start again with chunk 1")
	if _, err := chunk(t, s, "new", 1, "a"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, uploadsDir))
	if len(entries) != 2 { // the new upload's part and state
		t.Errorf("after the sweep: %v", entries)
	}
}
