package contents

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nbkube/nbkube/internal/jupyter"
)

func TestGet_ModelsCarryJupyterFields(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "héllo\n", "bin.dat": "\xff\xfe", "nb.ipynb": emptyNotebook, "sub/": ""})
	str := func(s string) *string { return &s }
	// Python reads the system's mime.types too, which may know notebooks.
	nbMime := guessMimetype("nb.ipynb")
	if nbMime == "" {
		nbMime = "text/plain"
	}
	size := func(n int64) *int64 { return &n }
	tests := []struct {
		path    string
		opts    GetOptions
		want    jupyter.ContentsModel
		content any
	}{
		{"a.txt", GetOptions{}, jupyter.ContentsModel{Name: "a.txt", Path: "a.txt", Type: "file", Writable: true, Mimetype: str("text/plain"), Size: size(7)}, nil},
		{"a.txt", GetOptions{Content: true}, jupyter.ContentsModel{Name: "a.txt", Path: "a.txt", Type: "file", Writable: true, Mimetype: str("text/plain"), Format: str("text"), Size: size(7)}, "héllo\n"},
		{"bin.dat", GetOptions{}, jupyter.ContentsModel{Name: "bin.dat", Path: "bin.dat", Type: "file", Writable: true, Size: size(2)}, nil},
		{"bin.dat", GetOptions{Content: true}, jupyter.ContentsModel{Name: "bin.dat", Path: "bin.dat", Type: "file", Writable: true, Mimetype: str("application/octet-stream"), Format: str("base64"), Size: size(2)}, "//4=\n"},
		{"a.txt", GetOptions{Content: true, Format: "base64"}, jupyter.ContentsModel{Name: "a.txt", Path: "a.txt", Type: "file", Writable: true, Mimetype: str("text/plain"), Format: str("base64"), Size: size(7)}, "aMOpbGxvCg==\n"},
		{"nb.ipynb", GetOptions{}, jupyter.ContentsModel{Name: "nb.ipynb", Path: "nb.ipynb", Type: "notebook", Writable: true, Size: size(int64(len(emptyNotebook)))}, nil},
		{"nb.ipynb", GetOptions{Type: "file", Content: true}, jupyter.ContentsModel{Name: "nb.ipynb", Path: "nb.ipynb", Type: "file", Writable: true, Mimetype: str(nbMime), Format: str("text"), Size: size(int64(len(emptyNotebook)))}, emptyNotebook},
		{"/sub/", GetOptions{}, jupyter.ContentsModel{Name: "sub", Path: "sub", Type: "directory", Writable: true}, nil},
		{"sub", GetOptions{Content: true}, jupyter.ContentsModel{Name: "sub", Path: "sub", Type: "directory", Writable: true, Format: str("json")}, []jupyter.ContentsModel{}},
	}
	for _, tc := range tests {
		t.Run(tc.path+"/"+tc.opts.Format, func(t *testing.T) {
			m, err := s.Get(ctx, tc.path, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if m.LastModified.IsZero() || m.Created.IsZero() {
				t.Errorf("times not set: %+v", m)
			}
			got := *m
			got.Created, got.LastModified, got.Content = jupyter.Time{}, jupyter.Time{}, nil
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("model (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.content, m.Content); d != "" {
				t.Errorf("content (-want +got):\n%s", d)
			}
		})
	}
}

const emptyNotebook = "{\n \"cells\": [],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n"

func TestGet_BadTypeAndFormatAreRefusedLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"bin.dat": "\xff", "d/": ""})
	tests := []struct {
		path   string
		opts   GetOptions
		msg    string
		reason string
	}{
		{"d", GetOptions{Type: "file"}, "d is a directory, not a file", "bad type"},
		{"bin.dat", GetOptions{Type: "directory"}, "bin.dat is not a directory", "bad type"},
		{"bin.dat", GetOptions{Content: true, Format: "text"}, "bin.dat is not UTF-8 encoded", "bad format"},
		{"bin.dat", GetOptions{Type: "notebook", Content: true}, "", ""},
		{"d", GetOptions{Type: "text"}, "Type 'text' is invalid", ""},
		{"d", GetOptions{Format: "json"}, "Format 'json' is invalid", ""},
	}
	for _, tc := range tests {
		_, err := s.Get(ctx, tc.path, tc.opts)
		wantError(t, err, ErrInvalid, tc.msg)
		var e *Error
		if errors.As(err, &e) && e.Reason != tc.reason {
			t.Errorf("%s %+v: reason %q, want %q", tc.path, tc.opts, e.Reason, tc.reason)
		}
	}
}

func TestGet_MissingFileIsNotFound(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	_, err := s.Get(ctx, "x/y.txt", GetOptions{})
	wantError(t, err, ErrNotFound, "No such file or directory: x/y.txt")
}

func TestGet_ListingSkipsWhatJupyterHides(t *testing.T) {
	outside := t.TempDir()
	for _, allow := range []bool{false, true} {
		s, dir := newTestStore(t, Options{AllowHidden: allow})
		writeTree(t, dir, map[string]string{
			"b.txt": "", "a.ipynb": emptyNotebook, "sub/x": "", ".hidden": "", "__pycache__/": "", "m.pyc": "",
			"backup~": "", ".nbkube/uploads/": "", "ünïcode.txt": "",
		})
		if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"in-link": "b.txt", "out-link": outside, "dangling": "nowhere"} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := s.Get(ctx, "", GetOptions{Content: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range m.Content.([]jupyter.ContentsModel) {
			got = append(got, e.Name+":"+e.Type)
			if e.Content != nil || e.Format != nil {
				t.Errorf("entry %s has content", e.Name)
			}
		}
		want := []string{"a.ipynb:notebook", "b.txt:file", "in-link:file", "sub:directory", "ünïcode.txt:file"}
		if allow {
			want = append([]string{".hidden:file"}, want...)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("AllowHidden=%v listing (-want +got):\n%s", allow, d)
		}
	}
}

func TestGet_HashIsSHA256OfTheBytes(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"nb.ipynb": emptyNotebook, "d/": ""})
	sum := sha256.Sum256([]byte(emptyNotebook))
	m, err := s.Get(ctx, "nb.ipynb", GetOptions{Hash: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Hash == nil || *m.Hash != hex.EncodeToString(sum[:]) || *m.HashAlgorithm != "sha256" || m.Content != nil {
		t.Errorf("hash model = %+v", m)
	}
	if m, _ := s.Get(ctx, "d", GetOptions{Hash: true}); m.Hash != nil {
		t.Errorf("directory has a hash")
	}
}

func TestGuessMimetype_FollowsPython(t *testing.T) {
	for name, want := range map[string]string{
		"a.png": "image/png", "A.PNG": "image/png", "a.csv.gz": "text/csv", "a.tgz": "application/x-tar",
		"a.py": "text/x-python", "a.json": "application/json", ".bashrc": "", "noext": "",
	} {
		if got := guessMimetype(name); got != want {
			t.Errorf("guessMimetype(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestIsHidden_DotComponentsAnywhere(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	for p, want := range map[string]bool{
		"a.txt": false, ".a": true, "d/.a": true, ".d/a": true, "d/e/.f/g": true, "/a/./b": false, "": false, "a..b": false,
	} {
		if got := s.IsHidden(p); got != want {
			t.Errorf("IsHidden(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestPaths_EscapesAreRefused(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "secret"})
	writeTree(t, dir, map[string]string{"d/": ""})
	for name, target := range map[string]string{
		"abs": filepath.Join(outside, "secret.txt"), "rel": "../" + filepath.Base(outside) + "/secret.txt",
		"dirlink": outside, "d/up": "../../" + filepath.Base(outside),
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	forbidden := []string{"../x", "a/../../x", "..", "abs", "rel", "dirlink/secret.txt", "d/up/secret.txt", ".nbkube/ids"}
	for _, p := range forbidden {
		_, err := s.Get(ctx, p, GetOptions{Content: true})
		wantError(t, err, ErrForbidden, "")
		_, err = s.Save(ctx, p, &jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)})
		wantError(t, err, ErrForbidden, "")
	}
	_, err := s.Get(ctx, "a\x00b", GetOptions{})
	wantError(t, err, ErrInvalid, "")
	if got := readFile(t, outside, "secret.txt"); got != "secret" {
		t.Errorf("outside file changed: %q", got)
	}
}

func TestSave_FilesInTextAndBase64(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	tests := []struct {
		path, format, content, want string
	}{
		{"t.txt", "text", `"line\nünï"`, "line\nünï"},
		{"b.bin", "base64", "\"AAEC\\n/w==\\n\"", "\x00\x01\x02\xff"},
		{"dir/../x.txt", "text", `"x"`, ""},
	}
	for _, tc := range tests {
		m, err := s.Save(ctx, tc.path, &jupyter.SaveModel{Type: "file", Format: tc.format, Content: json.RawMessage(tc.content)})
		if tc.want == "" {
			wantError(t, err, ErrForbidden, "")
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
		{"f.txt", jupyter.SaveModel{Type: "file"}, ErrInvalid, "No file content provided"},
		{"g.txt", jupyter.SaveModel{Content: json.RawMessage(`"x"`)}, ErrInvalid, "No file type provided"},
		{"g.txt", jupyter.SaveModel{Type: "file", Content: json.RawMessage(`"x"`)}, ErrInvalid, "Must specify format of file contents as 'text' or 'base64'"},
		{"g.txt", jupyter.SaveModel{Type: "file", Format: "base64", Content: json.RawMessage(`"!!"`)}, ErrInvalid, ""},
		{"g.txt", jupyter.SaveModel{Type: "blob", Content: json.RawMessage(`"x"`)}, ErrInvalid, "Unhandled contents type: blob"},
		{"f.txt", jupyter.SaveModel{Type: "directory"}, ErrInvalid, "Not a directory: f.txt"},
		{"d", jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)}, ErrInvalid, "d is a directory"},
		{"nodir/g.txt", jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)}, ErrNotFound, "No such directory: nodir"},
		{"n.ipynb", jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(`{"cells": [`)}, ErrInvalid, ""},
		{"n.ipynb", jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(`{"nbformat": 3, "nbformat_minor": 0}`)}, ErrInvalid, ""},
		{".hidden", jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)}, ErrForbidden, "Cannot create file or directory '.hidden'"},
	}
	for _, tc := range tests {
		_, err := s.Save(ctx, tc.path, &tc.m)
		wantError(t, err, tc.kind, tc.msg)
	}
	if got := readFile(t, dir, "f.txt"); got != "x" {
		t.Errorf("f.txt changed to %q", got)
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

func TestWriteFile_FailedWriteLeavesOldFileIntact(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f.txt": "old content"})
	err := s.writeFile("f.txt", false, func(w *os.File) error {
		if _, err := w.WriteString("half"); err != nil {
			return err
		}
		return syscall.EIO // the process dies or the disk fails mid-write
	})
	if err == nil {
		t.Fatal("failing write succeeded")
	}
	if got := readFile(t, dir, "f.txt"); got != "old content" {
		t.Errorf("f.txt = %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestNewUntitled_NamesLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/": ""})
	tests := []struct{ typ, ext, want string }{
		{"", ".ipynb", "d/Untitled.ipynb"},
		{"notebook", "", "d/Untitled1.ipynb"},
		{"", ".txt", "d/untitled.txt"},
		{"file", ".txt", "d/untitled1.txt"},
		{"file", "", "d/untitled"},
		{"directory", "", "d/Untitled Folder"},
		{"directory", "", "d/Untitled Folder 1"},
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
	wantError(t, err, ErrNotFound, "No such directory: nodir")
	_, err = s.NewUntitled(ctx, "d", "blob", "")
	wantError(t, err, ErrInvalid, "Unexpected model type: 'blob'")
}

func TestCopy_NamesLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.ipynb": emptyNotebook, "data.tar.gz": "gz", "other/": "", "d/": ""})
	tests := []struct{ from, to, want string }{
		{"a.ipynb", "", "a-Copy1.ipynb"},
		{"a.ipynb", "", "a-Copy2.ipynb"},
		{"a-Copy1.ipynb", "/", "a-Copy3.ipynb"},
		{"data.tar.gz", "", "data-Copy1.tar.gz"},
		{"a.ipynb", "other", "other/a.ipynb"},
		{"a.ipynb", "other/b.ipynb", "other/b.ipynb"},
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
	wantError(t, err, ErrInvalid, "Can't copy directories")
	_, err = s.Copy(ctx, "a.ipynb", "nodir/x.ipynb")
	wantError(t, err, ErrNotFound, "No such parent directory: nodir to copy file in")
	_, err = s.Copy(ctx, "missing.txt", "")
	wantError(t, err, ErrNotFound, "No such file or directory: missing.txt")
	_, err = s.Copy(ctx, "a.ipynb", "data.tar.gz")
	wantError(t, err, ErrExists, "File already exists: data.tar.gz")
}

func TestRename_OntoExistingFileIsConflict(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "b.txt": "b"})
	_, err := s.Rename(ctx, "a.txt", "b.txt")
	wantError(t, err, ErrExists, "File already exists: b.txt")
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
	wantError(t, err, ErrNotFound, "No such file or directory: missing")
	_, err = s.Rename(ctx, "e", "e/inside")
	wantError(t, err, ErrInvalid, "")
	_, err = s.Rename(ctx, "e/b.txt", ".b.txt")
	wantError(t, err, ErrForbidden, "Cannot rename file or directory '.b.txt'")
}

func TestDelete_NonEmptyDirectoryIsRefusedUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		s, dir := newTestStore(t, Options{DeleteNonEmptyDirs: allow})
		writeTree(t, dir, map[string]string{"d/x.txt": "x", "cp/.ipynb_checkpoints/n-checkpoint.ipynb": "{}"})
		err := s.Delete(ctx, "d")
		if allow {
			if err != nil || exists(dir, "d") {
				t.Errorf("DeleteNonEmptyDirs: %v", err)
			}
		} else {
			wantError(t, err, ErrInvalid, "Directory d not empty")
			if !exists(dir, "d/x.txt") {
				t.Error("content of refused directory deleted")
			}
		}
		// Only checkpoints inside: empty for Jupyter.
		if err := s.Delete(ctx, "cp"); err != nil || exists(dir, "cp") {
			t.Errorf("delete of checkpoint-only directory: %v", err)
		}
	}
}

func TestDelete_RefusesRootMissingAndHidden(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	wantError(t, s.Delete(ctx, "/"), ErrInvalid, "Can't delete root")
	wantError(t, s.Delete(ctx, "nope"), ErrNotFound, "File or directory does not exist: nope")
	wantError(t, s.Delete(ctx, ".x"), ErrForbidden, "Cannot delete file or directory '.x'")
}

func TestDelete_SymlinkRemovesTheLinkOnly(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"d/x": "x"})
	if err := os.Symlink("d", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "l"); err != nil || exists(dir, "l") || !exists(dir, "d/x") {
		t.Errorf("delete link: %v", err)
	}
}

func TestExists_FollowsLinksInsideRoot(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"f": "", "d/": ""})
	if err := os.Symlink("d", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string][2]bool{"f": {true, false}, "d": {false, true}, "l": {false, true}, "no": {false, false}, "f/x": {false, false}} {
		isFile, isDir, err := s.Exists(ctx, p)
		if err != nil || [2]bool{isFile, isDir} != want {
			t.Errorf("Exists(%q) = %v, %v, %v; want %v", p, isFile, isDir, err, want)
		}
	}
}
