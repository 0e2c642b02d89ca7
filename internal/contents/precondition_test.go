package contents

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func textModel(s string) *jupyter.SaveModel {
	return &jupyter.SaveModel{Type: jupyter.TypeFile, Format: jupyter.FormatText, Content: json.RawMessage(strconv.Quote(s))}
}

// loaded is what a client that loads a file keeps of it: the ETag and Last-Modified it was
// served.
func loaded(t *testing.T, s *Store, p string) *jupyter.ContentsModel {
	t.Helper()
	m, err := s.Get(ctx, p, GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.ETag == "" {
		t.Fatalf("model of %s has no ETag", p)
	}
	return m
}

func TestSaveIf_SecondSaveFromTheSameVersionIsConflict(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "v0"})
	v0 := loaded(t, s, "f.txt")
	first, err := s.SaveIf(ctx, "f.txt", textModel("first"), Precondition{IfMatch: []string{v0.ETag}})
	if err != nil {
		t.Fatal(err)
	}
	if first.ETag == "" || first.ETag == v0.ETag {
		t.Errorf("ETag after the save = %q, want a new one (was %q)", first.ETag, v0.ETag)
	}
	_, err = s.SaveIf(ctx, "f.txt", textModel("second"), Precondition{IfMatch: []string{v0.ETag}})
	wantError(t, err, domainerr.ErrConflict, "f.txt has changed on disk since it was loaded")
	if got := readFile(t, dir, "f.txt"); got != "first" {
		t.Errorf("f.txt = %q, want the first save's content", got)
	}
	if now := loaded(t, s, "f.txt"); now.ETag != first.ETag {
		t.Errorf("ETag served after the save = %q, want the one the save returned, %q", now.ETag, first.ETag)
	}
	if _, err := s.SaveIf(ctx, "f.txt", textModel("third"), Precondition{IfMatch: []string{`"other"`, first.ETag}}); err != nil {
		t.Fatalf("save with the current ETag: %v", err)
	}
	if got := readFile(t, dir, "f.txt"); got != "third" {
		t.Errorf("f.txt = %q, want the third save's content", got)
	}
}

func TestSaveIf_NotebooksToo(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	if _, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: jupyter.TypeNotebook}); err != nil {
		t.Fatal(err)
	}
	v0 := loaded(t, s, "n.ipynb")
	nb := &jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON, Content: json.RawMessage(`{"cells":[],"metadata":{"x":1},"nbformat":4,"nbformat_minor":5}`)}
	if _, err := s.SaveIf(ctx, "n.ipynb", nb, Precondition{IfMatch: []string{v0.ETag}}); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, dir, "n.ipynb")
	_, err := s.SaveIf(ctx, "n.ipynb", nb, Precondition{IfMatch: []string{v0.ETag}})
	wantError(t, err, domainerr.ErrConflict, "")
	if readFile(t, dir, "n.ipynb") != before {
		t.Error("a refused save changed the notebook")
	}
}

func TestSaveIf_DeletedFileFailsThePrecondition(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "v0"})
	v0 := loaded(t, s, "f.txt")
	if err := os.Remove(filepath.Join(dir, "f.txt")); err != nil {
		t.Fatal(err)
	}
	for _, pre := range []Precondition{{IfMatch: []string{v0.ETag}}, {IfMatch: []string{"*"}}, {IfUnmodifiedSince: v0.LastModified.Time}} {
		_, err := s.SaveIf(ctx, "f.txt", textModel("x"), pre)
		wantError(t, err, domainerr.ErrConflict, "f.txt was deleted since it was loaded")
		if exists(dir, "f.txt") {
			t.Fatalf("a save with %+v recreated the deleted file", pre)
		}
	}
	// Nor does a conditional save without content create an empty one.
	_, err := s.SaveIf(ctx, "f.txt", &jupyter.SaveModel{Type: jupyter.TypeFile}, Precondition{IfMatch: []string{"*"}})
	wantError(t, err, domainerr.ErrConflict, "f.txt was deleted since it was loaded")
	if exists(dir, "f.txt") {
		t.Fatal("a conditional save without content created the deleted file")
	}
}

func TestSaveIf_IfUnmodifiedSinceComparesSeconds(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "v0"})
	mtime := time.Date(2025, 3, 4, 5, 6, 7, 800_000_000, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "f.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	// What Last-Modified said: the modification time without its fraction of a second.
	_, err := s.SaveIf(ctx, "f.txt", textModel("x"), Precondition{IfUnmodifiedSince: mtime.Add(-time.Second).Truncate(time.Second)})
	wantError(t, err, domainerr.ErrConflict, "f.txt has changed on disk since it was loaded")
	if got := readFile(t, dir, "f.txt"); got != "v0" {
		t.Fatalf("f.txt = %q after a refused save", got)
	}
	if _, err := s.SaveIf(ctx, "f.txt", textModel("x"), Precondition{IfUnmodifiedSince: mtime.Truncate(time.Second)}); err != nil {
		t.Fatalf("save unmodified since its Last-Modified: %v", err)
	}
	if got := readFile(t, dir, "f.txt"); got != "x" {
		t.Errorf("f.txt = %q, want the save's content", got)
	}
}

func TestSaveIf_IfMatchTakesPrecedenceAndWeakTagsNeverMatch(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	if _, err := s.Save(ctx, "f.txt", textModel("v0")); err != nil {
		t.Fatal(err)
	}
	v0 := loaded(t, s, "f.txt")
	_, err := s.SaveIf(ctx, "f.txt", textModel("x"), Precondition{IfMatch: []string{"W/" + v0.ETag}})
	wantError(t, err, domainerr.ErrConflict, "")
	// As HTTP says, If-Unmodified-Since is ignored when If-Match is given.
	if _, err := s.SaveIf(ctx, "f.txt", textModel("x"), Precondition{IfMatch: []string{v0.ETag}, IfUnmodifiedSince: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
}

func TestSaveIf_ConditionalDirectoriesAreInvalid(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	_, err := s.SaveIf(ctx, "d", &jupyter.SaveModel{Type: jupyter.TypeDirectory}, Precondition{IfMatch: []string{"*"}})
	wantError(t, err, domainerr.ErrInvalid, "")
}

// Two replicas are two stores over the same tree: of N saves racing from the same loaded
// version, through both, exactly one wins and the file holds its content.
func TestSaveIf_RacingSavesThroughTwoStoresExactlyOneWins(t *testing.T) {
	a, dir := newTestStore(t, Options{})
	b, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	writeTree(t, dir, map[string]string{"f.txt": "v0"})
	for round := range 5 {
		v := loaded(t, a, "f.txt")
		const n = 16
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
		)
		for i := range n {
			store := a
			if i%2 == 1 {
				store = b
			}
			content := "round " + strconv.Itoa(round) + " save " + strconv.Itoa(i)
			wg.Go(func() {
				_, err := store.SaveIf(ctx, "f.txt", textModel(content), Precondition{IfMatch: []string{v.ETag}})
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, content)
					mu.Unlock()
				case !isConflict(err):
					t.Errorf("save %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d saves won: %q", round, len(winners), winners)
		}
		if got := readFile(t, dir, "f.txt"); got != winners[0] {
			t.Fatalf("round %d: f.txt = %q, want the winner's %q", round, got, winners[0])
		}
	}
}

func isConflict(err error) bool { return errors.Is(err, domainerr.ErrConflict) }

// Once a conditional save has made the lock file, unconditional saves take the lock too: a
// save of JupyterLab's cannot land between a conditional save's check and its rename.
func TestSave_TakesTheSaveLockOnceConditionalSavesUseIt(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	if _, err := s.Save(ctx, "f.txt", textModel("v0")); err != nil {
		t.Fatal(err)
	}
	if exists(dir, saveLock) {
		t.Fatal("an unconditional save made the lock file")
	}
	if _, err := s.SaveIf(ctx, "f.txt", textModel("v1"), Precondition{IfMatch: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, saveLock), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the conditional save made no lock file: %v", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Save(ctx, "f.txt", textModel("v2"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a save finished while another held the lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if got := readFile(t, dir, "f.txt"); got != "v1" {
		t.Fatalf("f.txt = %q while the lock was held", got)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "f.txt"); got != "v2" {
		t.Errorf("f.txt = %q, want the save's content", got)
	}
}
