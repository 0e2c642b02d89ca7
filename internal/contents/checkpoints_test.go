package contents

import (
	"encoding/json"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func saveText(t *testing.T, s *Store, p, text string) {
	t.Helper()
	content, _ := json.Marshal(text)
	if _, err := s.Save(ctx, p, &jupyter.SaveModel{Type: "file", Format: "text", Content: content}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpoints_LifecycleOldestFirstBoundedAndReadable(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testTime)
	s, dir := newTestStore(t, Options{Clock: clk, MaxCheckpoints: 3})
	var ids []string
	for i := range 5 {
		saveText(t, s, "f.txt", string(rune('a'+i)))
		clk.SetTime(testTime.Add(time.Duration(i) * time.Second))
		cp, err := s.CreateCheckpoint(ctx, "f.txt")
		if err != nil {
			t.Fatal(err)
		}
		if !cp.LastModified.Equal(clk.Now()) {
			t.Errorf("checkpoint time %v, want the clock's %v", cp.LastModified, clk.Now())
		}
		ids = append(ids, cp.ID)
	}
	list, err := s.ListCheckpoints(ctx, "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list {
		got = append(got, c.ID)
	}
	if len(got) != 3 || got[0] != ids[2] || got[2] != ids[4] {
		t.Fatalf("checkpoints = %v, want the newest three of %v, oldest first", got, ids)
	}
	m, err := s.GetCheckpoint(ctx, "f.txt", ids[2], GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Content != "c" || m.Path != "f.txt" || m.Writable || readFile(t, dir, "f.txt") != "e" {
		t.Errorf("checkpoint model %+v; file %q", m, readFile(t, dir, "f.txt"))
	}
	if err := s.RestoreCheckpoint(ctx, "f.txt", ids[3]); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "f.txt"); got != "d" {
		t.Errorf("restored content %q, want d", got)
	}
	if err := s.DeleteCheckpoint(ctx, "f.txt", ids[3]); err != nil {
		t.Fatal(err)
	}
	wantError(t, s.DeleteCheckpoint(ctx, "f.txt", ids[3]), domainerr.ErrNotFound, "Checkpoint does not exist: f.txt@"+ids[3])
	wantError(t, s.RestoreCheckpoint(ctx, "f.txt", "../../etc"), domainerr.ErrNotFound, "Checkpoint does not exist: f.txt@../../etc")
	if list, _ := s.ListCheckpoints(ctx, "f.txt"); len(list) != 2 {
		t.Errorf("%d checkpoints after delete, want 2", len(list))
	}
}

func TestCheckpoints_FollowRenameAndGoWithDelete(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/": ""})
	saveText(t, s, "a.txt", "x")
	cp, err := s.CreateCheckpoint(ctx, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rename(ctx, "a.txt", "d/b.txt"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListCheckpoints(ctx, "a.txt"); len(list) != 0 {
		t.Errorf("old path keeps %d checkpoints", len(list))
	}
	list, _ := s.ListCheckpoints(ctx, "d/b.txt")
	if len(list) != 1 || list[0].ID != cp.ID {
		t.Fatalf("renamed file checkpoints = %v, want [%s]", list, cp.ID)
	}
	if err := s.Delete(ctx, "alice", "d/b.txt"); err != nil {
		t.Fatal(err)
	}
	saveText(t, s, "d/b.txt", "new file")
	if list, _ := s.ListCheckpoints(ctx, "d/b.txt"); len(list) != 0 {
		t.Errorf("a new file inherits %d checkpoints of a deleted one", len(list))
	}
}

func TestCheckpoints_JupyterCheckpointIsListed(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"n.ipynb": emptyNotebook, ".ipynb_checkpoints/n-checkpoint.ipynb": emptyNotebook, ".ipynb_checkpoints/n-x-checkpoint.ipynb": emptyNotebook})
	list, err := s.ListCheckpoints(ctx, "n.ipynb")
	if err != nil || len(list) != 1 || list[0].ID != "checkpoint" {
		t.Fatalf("list = %v, %v", list, err)
	}
	m, err := s.GetCheckpoint(ctx, "n.ipynb", "checkpoint", GetOptions{Content: true})
	if err != nil || m.Type != "notebook" || m.Content == nil {
		t.Errorf("checkpoint notebook: %+v, %v", m, err)
	}
}

func TestCheckpoints_OfMissingFileOrDirectoryAreRefused(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/": ""})
	_, err := s.CreateCheckpoint(ctx, "nope.txt")
	wantError(t, err, domainerr.ErrNotFound, "No such file or directory: nope.txt")
	_, err = s.CreateCheckpoint(ctx, "d")
	wantError(t, err, domainerr.ErrInvalid, "")
	if list, err := s.ListCheckpoints(ctx, "nope.txt"); err != nil || list == nil || len(list) != 0 {
		t.Errorf("list of missing file = %#v, %v; want empty, like Jupyter", list, err)
	}
}
