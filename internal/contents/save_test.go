package contents

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func TestSave_FilesInTextAndBase64(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	tests := []struct {
		path, format, content, want string
	}{
		{path: "t.txt", format: "text", content: `"line\nünï"`, want: "line\nünï"},
		{path: "b.bin", format: "base64", content: "\"AAEC\\n/w==\\n\"", want: "\x00\x01\x02\xff"},
		{path: "dir/../x.txt", format: "text", content: `"x"`, want: ""},
	}
	for _, tc := range tests {
		m, err := s.Save(ctx, tc.path, &jupyter.SaveModel{Type: "file", Format: tc.format, Content: json.RawMessage(tc.content)})
		if tc.want == "" {
			wantError(t, err, domainerr.ErrForbidden, "")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Content != nil || m.Type != "file" || *m.Size != int64(len(tc.want)) {
			t.Errorf("model = %+v", m)
		}
		if got := readFile(t, dir, tc.path); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestSave_RefusesModelsJupyterRefuses(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "x", "d/": ""})
	tests := []struct {
		path string
		m    jupyter.SaveModel
		kind error
		msg  string
	}{
		{path: "f.txt", m: jupyter.SaveModel{Type: "file"}, kind: domainerr.ErrInvalid, msg: "No file content provided"},
		{path: "g.txt", m: jupyter.SaveModel{Content: json.RawMessage(`"x"`)}, kind: domainerr.ErrInvalid, msg: "No file type provided"},
		{path: "g.txt", m: jupyter.SaveModel{Type: "file", Content: json.RawMessage(`"x"`)}, kind: domainerr.ErrInvalid, msg: "Must specify format of file contents as 'text' or 'base64'"},
		{path: "g.txt", m: jupyter.SaveModel{Type: "file", Format: "base64", Content: json.RawMessage(`"!!"`)}, kind: domainerr.ErrInvalid, msg: ""},
		{path: "g.txt", m: jupyter.SaveModel{Type: "blob", Content: json.RawMessage(`"x"`)}, kind: domainerr.ErrInvalid, msg: "Unhandled contents type: blob"},
		{path: "f.txt", m: jupyter.SaveModel{Type: "directory"}, kind: domainerr.ErrInvalid, msg: "Not a directory: f.txt"},
		{path: "d", m: jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)}, kind: domainerr.ErrInvalid, msg: "d is a directory"},
		{path: "nodir/g.txt", m: jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)}, kind: domainerr.ErrNotFound, msg: "No such directory: nodir"},
		{path: "n.ipynb", m: jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(`{"cells": [`)}, kind: domainerr.ErrInvalid, msg: ""},
		{path: "n.ipynb", m: jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(`{"nbformat": 3, "nbformat_minor": 0}`)}, kind: domainerr.ErrInvalid, msg: ""},
		{path: "n.ipynb", m: jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(`{"nbformat": 2}`)}, kind: domainerr.ErrInvalid, msg: "Cannot save nbformat 2 notebook: no worksheets"},
		{path: ".hidden", m: jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)}, kind: domainerr.ErrForbidden, msg: "Cannot create file or directory '.hidden'"},
	}
	for _, tc := range tests {
		_, err := s.Save(ctx, tc.path, &tc.m)
		wantError(t, err, tc.kind, tc.msg)
	}
	if got := readFile(t, dir, "f.txt"); got != "x" {
		t.Errorf("f.txt changed to %q", got)
	}
	if exists(dir, "n.ipynb") {
		t.Error("a notebook refused was written")
	}
}

func TestSave_WithoutContentCreatesEmptyByType(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	for path, typ := range map[string]string{"n.ipynb": "", "f.txt": "", "d": "directory", "x": "notebook"} {
		m, err := s.Save(ctx, path, &jupyter.SaveModel{Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"n.ipynb": "notebook", "f.txt": "file", "d": "directory", "x": "file"}[path]
		if m.Type != want {
			t.Errorf("%s: type %s, want %s", path, m.Type, want)
		}
	}
	if got := readFile(t, dir, "n.ipynb"); got != emptyNotebook {
		t.Errorf("new notebook = %q", got)
	}
	if got := readFile(t, dir, "x"); got != emptyNotebook {
		t.Errorf("x (notebook type) = %q", got)
	}
}

func TestSave_NotebookIsWrittenLikeNbformat(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	content := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {"z": 1.5e10, "a": [], "signature": "x"},
	 "cells": [{"id": "a", "cell_type": "markdown", "metadata": {"trusted": true}, "source": "x\u2028y <a> & \u0001 é"}]}`
	m, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(content)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Message != nil || m.Content != nil || m.Type != "notebook" {
		t.Errorf("model = %+v", m)
	}
	// What nbformat 5.5 writes for the same notebook, but for the number, which Python
	// normalises to 15000000000.0 and the store keeps as the client wrote it.
	want := "{\n \"cells\": [\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"a\",\n   \"metadata\": {},\n   \"source\": [\n    \"x\u2028\",\n    \"y <a> & \\u0001 é\"\n   ]\n  }\n ],\n \"metadata\": {\n  \"a\": [],\n  \"z\": 1.5e10\n },\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n"
	if got := readFile(t, dir, "n.ipynb"); got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	cps, _ := s.ListCheckpoints(ctx, "n.ipynb")
	if len(cps) != 1 {
		t.Errorf("first save made %d checkpoints, want 1", len(cps))
	}
}

func TestSave_InvalidNotebookIsSavedWithMessage(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	content := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": ""}]}`
	m, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(content)})
	if err != nil {
		t.Fatal(err)
	}
	const want = "Notebook validation failed: missing properties 'outputs', 'execution_count' at /cells/0:\n{\n \"cell_type\": \"code\",\n \"id\": \"a\",\n \"metadata\": {},\n \"source\": \"\"\n}"
	if m.Message == nil || *m.Message != want {
		t.Errorf("message = %v, want %q", m.Message, want)
	}
	if !exists(dir, "n.ipynb") {
		t.Fatal("invalid notebook not saved")
	}
	got, err := s.Get(ctx, "n.ipynb", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Message == nil || *got.Message != want {
		t.Errorf("read message = %v, want %q", got.Message, want)
	}
}

func TestSave_OverwriteKeepsMode(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"run.sh": "old"})
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o751); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, "run.sh", &jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"new"`)}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o751 || readFile(t, dir, "run.sh") != "new" {
		t.Errorf("mode %v, content %q", fi.Mode(), readFile(t, dir, "run.sh"))
	}
}

func TestSave_ThroughSymlinkChangesTheTarget(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"real.txt": "old"})
	if err := os.Symlink("real.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, "link.txt", &jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"new"`)}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "link.txt")); fi.Mode()&os.ModeSymlink == 0 || readFile(t, dir, "real.txt") != "new" {
		t.Errorf("link replaced or target unchanged")
	}
}

func TestNewUntitled_NamesLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/": ""})
	tests := []struct{ typ, ext, want string }{
		{typ: "", ext: ".ipynb", want: "d/Untitled.ipynb"},
		{typ: "notebook", ext: "", want: "d/Untitled1.ipynb"},
		{typ: "", ext: ".txt", want: "d/untitled.txt"},
		{typ: "file", ext: ".txt", want: "d/untitled1.txt"},
		{typ: "file", ext: "", want: "d/untitled"},
		{typ: "directory", ext: "", want: "d/Untitled Folder"},
		{typ: "directory", ext: "", want: "d/Untitled Folder 1"},
	}
	for _, tc := range tests {
		m, err := s.NewUntitled(ctx, "d", tc.typ, tc.ext)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != tc.want || m.Content != nil {
			t.Errorf("NewUntitled(%q, %q) = %s, want %s", tc.typ, tc.ext, m.Path, tc.want)
		}
	}
	_, err := s.NewUntitled(ctx, "nodir", "", "")
	wantError(t, err, domainerr.ErrNotFound, "No such directory: nodir")
	_, err = s.NewUntitled(ctx, "d", "blob", "")
	wantError(t, err, domainerr.ErrInvalid, "Unexpected model type: 'blob'")
}

func TestCopy_NamesLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.ipynb": emptyNotebook, "data.tar.gz": "gz", "other/": "", "d/": ""})
	tests := []struct{ from, to, want string }{
		{from: "a.ipynb", to: "", want: "a-Copy1.ipynb"},
		{from: "a.ipynb", to: "", want: "a-Copy2.ipynb"},
		{from: "a-Copy1.ipynb", to: "/", want: "a-Copy3.ipynb"},
		{from: "data.tar.gz", to: "", want: "data-Copy1.tar.gz"},
		{from: "a.ipynb", to: "other", want: "other/a.ipynb"},
		{from: "a.ipynb", to: "other/b.ipynb", want: "other/b.ipynb"},
	}
	for _, tc := range tests {
		m, err := s.Copy(ctx, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != tc.want || readFile(t, dir, tc.want) != readFile(t, dir, tc.from) {
			t.Errorf("Copy(%q, %q) = %s, want %s with the same bytes", tc.from, tc.to, m.Path, tc.want)
		}
	}
	if cps, _ := s.ListCheckpoints(ctx, "a-Copy1.ipynb"); len(cps) != 1 {
		t.Errorf("copied notebook has %d checkpoints, want 1", len(cps))
	}
	_, err := s.Copy(ctx, "d", "")
	wantError(t, err, domainerr.ErrInvalid, "Can't copy directories")
	_, err = s.Copy(ctx, "a.ipynb", "nodir/x.ipynb")
	wantError(t, err, domainerr.ErrNotFound, "No such parent directory: nodir to copy file in")
	_, err = s.Copy(ctx, "missing.txt", "")
	wantError(t, err, domainerr.ErrNotFound, "No such file or directory: missing.txt")
	_, err = s.Copy(ctx, "a.ipynb", "data.tar.gz")
	wantError(t, err, domainerr.ErrConflict, "File already exists: data.tar.gz")
}

func TestRename_OntoExistingFileIsConflict(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "b.txt": "b"})
	_, err := s.Rename(ctx, "a.txt", "b.txt")
	wantError(t, err, domainerr.ErrConflict, "File already exists: b.txt")
	if readFile(t, dir, "a.txt") != "a" || readFile(t, dir, "b.txt") != "b" {
		t.Error("files changed")
	}
}

func TestRename_MovesFilesAndDirectories(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "d/x.txt": "x", "e/": ""})
	m, err := s.Rename(ctx, "a.txt", "e/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != "e/b.txt" || m.Name != "b.txt" || exists(dir, "a.txt") || readFile(t, dir, "e/b.txt") != "a" {
		t.Errorf("rename: model %+v", m)
	}
	if _, err := s.Rename(ctx, "d", "e/d2"); err != nil || readFile(t, dir, "e/d2/x.txt") != "x" {
		t.Errorf("directory rename: %v", err)
	}
	_, err = s.Rename(ctx, "missing", "z")
	wantError(t, err, domainerr.ErrNotFound, "No such file or directory: missing")
	_, err = s.Rename(ctx, "e", "e/inside")
	wantError(t, err, domainerr.ErrInvalid, "")
	_, err = s.Rename(ctx, "e/b.txt", ".b.txt")
	wantError(t, err, domainerr.ErrForbidden, "Cannot rename file or directory '.b.txt'")
}

func TestDelete_PermanentlyRefusesNonEmptyDirectoriesUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		s, dir := newTestStore(t, Options{DeletePermanently: true, DeleteNonEmptyDirs: allow})
		writeTree(t, dir, map[string]string{"d/x.txt": "x", "cp/.ipynb_checkpoints/n-checkpoint.ipynb": "{}"})
		err := s.Delete(ctx, "alice", "d")
		if allow {
			if err != nil || exists(dir, "d") {
				t.Errorf("DeleteNonEmptyDirs: %v", err)
			}
		} else {
			wantError(t, err, domainerr.ErrInvalid, "Directory d not empty")
			if !exists(dir, "d/x.txt") {
				t.Error("content of refused directory deleted")
			}
		}
		// Only checkpoints inside: empty for Jupyter.
		if err := s.Delete(ctx, "alice", "cp"); err != nil || exists(dir, "cp") {
			t.Errorf("delete of checkpoint-only directory: %v", err)
		}
		if exists(dir, trashDir) {
			t.Error("deleting for good made a trash")
		}
	}
}

func TestDelete_RefusesRootMissingAndHidden(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	wantError(t, s.Delete(ctx, "alice", "/"), domainerr.ErrInvalid, "Can't delete root")
	wantError(t, s.Delete(ctx, "alice", "nope"), domainerr.ErrNotFound, "File or directory does not exist: nope")
	wantError(t, s.Delete(ctx, "alice", ".x"), domainerr.ErrForbidden, "Cannot delete file or directory '.x'")
}

func TestDelete_SymlinkRemovesTheLinkOnly(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/x": "x"})
	if err := os.Symlink("d", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "alice", "l"); err != nil || exists(dir, "l") || !exists(dir, "d/x") {
		t.Errorf("delete link: %v", err)
	}
	if err := os.Symlink("nowhere", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "alice", "dangling"); err != nil || exists(dir, "dangling") {
		t.Errorf("delete dangling link: %v", err)
	}
}

// A directory that holds only temporary files an interrupted save left long ago (a process
// killed mid-write) is empty to a permanent delete, which removes them with it; a recent one
// may be a save under way, and keeps the directory "not empty".
func TestDelete_LeftoverTemporaryFilesDoNotMakeADirectoryNonEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		age   time.Duration
		empty bool
	}{
		{"stale", 2 * time.Hour, true},
		{"recent", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newTestStore(t, Options{DeletePermanently: true, Clock: clocktesting.NewFakePassiveClock(time.Now().Add(tc.age))})
			writeTree(t, root, map[string]string{"d/": "", "d/" + tempPrefix + "0123abcd.tmp": "half a notebook"})
			err := s.Delete(t.Context(), "alice", "d")
			if tc.empty {
				if err != nil {
					t.Fatalf("delete: %v", err)
				}
				if _, err := os.Stat(filepath.Join(root, "d")); !os.IsNotExist(err) {
					t.Errorf("the directory is still there: %v", err)
				}
				return
			}
			if !errors.Is(err, domainerr.ErrInvalid) {
				t.Errorf("delete with a recent temporary file: %v, want not empty", err)
			}
		})
	}
}
