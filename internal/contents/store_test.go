package contents

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nbkube/nbkube/internal/domainerr"
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
		{path: "a.txt", opts: GetOptions{}, want: jupyter.ContentsModel{Name: "a.txt", Path: "a.txt", Type: "file", Writable: true, Mimetype: str("text/plain"), Size: size(7)}, content: nil},
		{path: "a.txt", opts: GetOptions{Content: true}, want: jupyter.ContentsModel{Name: "a.txt", Path: "a.txt", Type: "file", Writable: true, Mimetype: str("text/plain"), Format: str("text"), Size: size(7)}, content: "héllo\n"},
		{path: "bin.dat", opts: GetOptions{}, want: jupyter.ContentsModel{Name: "bin.dat", Path: "bin.dat", Type: "file", Writable: true, Size: size(2)}, content: nil},
		{path: "bin.dat", opts: GetOptions{Content: true}, want: jupyter.ContentsModel{Name: "bin.dat", Path: "bin.dat", Type: "file", Writable: true, Mimetype: str("application/octet-stream"), Format: str("base64"), Size: size(2)}, content: "//4=\n"},
		{path: "a.txt", opts: GetOptions{Content: true, Format: "base64"}, want: jupyter.ContentsModel{Name: "a.txt", Path: "a.txt", Type: "file", Writable: true, Mimetype: str("text/plain"), Format: str("base64"), Size: size(7)}, content: "aMOpbGxvCg==\n"},
		{path: "nb.ipynb", opts: GetOptions{}, want: jupyter.ContentsModel{Name: "nb.ipynb", Path: "nb.ipynb", Type: "notebook", Writable: true, Size: size(int64(len(emptyNotebook)))}, content: nil},
		{path: "nb.ipynb", opts: GetOptions{Type: "file", Content: true}, want: jupyter.ContentsModel{Name: "nb.ipynb", Path: "nb.ipynb", Type: "file", Writable: true, Mimetype: str(nbMime), Format: str("text"), Size: size(int64(len(emptyNotebook)))}, content: emptyNotebook},
		{path: "/sub/", opts: GetOptions{}, want: jupyter.ContentsModel{Name: "sub", Path: "sub", Type: "directory", Writable: true}, content: nil},
		{path: "sub", opts: GetOptions{Content: true}, want: jupyter.ContentsModel{Name: "sub", Path: "sub", Type: "directory", Writable: true, Format: str("json")}, content: []jupyter.ContentsModel{}},
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
			if (m.ETag == "") != (m.Type == jupyter.TypeDirectory) {
				t.Errorf("ETag = %q for a %s, want one for files and notebooks only", m.ETag, m.Type)
			}
			got := *m
			got.Created, got.LastModified, got.Content, got.ETag = jupyter.Time{}, jupyter.Time{}, nil, ""
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("model (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.content, m.Content); d != "" {
				t.Errorf("content (-want +got):\n%s", d)
			}
		})
	}
}

func TestGet_BadTypeAndFormatAreRefusedLikeJupyter(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"bin.dat": "\xff", "d/": ""})
	tests := []struct {
		path   string
		opts   GetOptions
		msg    string
		reason string
	}{
		{path: "d", opts: GetOptions{Type: "file"}, msg: "d is a directory, not a file", reason: "bad type"},
		{path: "bin.dat", opts: GetOptions{Type: "directory"}, msg: "bin.dat is not a directory", reason: "bad type"},
		{path: "bin.dat", opts: GetOptions{Content: true, Format: "text"}, msg: "bin.dat is not UTF-8 encoded", reason: "bad format"},
		{path: "bin.dat", opts: GetOptions{Type: "notebook", Content: true}, msg: "", reason: ""},
		{path: "d", opts: GetOptions{Type: "text"}, msg: "Type 'text' is invalid", reason: ""},
		{path: "d", opts: GetOptions{Format: "json"}, msg: "Format 'json' is invalid", reason: ""},
	}
	for _, tc := range tests {
		_, err := s.Get(ctx, tc.path, tc.opts)
		wantError(t, err, domainerr.ErrInvalid, tc.msg)
		var e *domainerr.Error
		if errors.As(err, &e) && e.Reason != tc.reason {
			t.Errorf("%s %+v: reason %q, want %q", tc.path, tc.opts, e.Reason, tc.reason)
		}
	}
}

func TestGet_MissingFileIsNotFound(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	_, err := s.Get(ctx, "x/y.txt", GetOptions{})
	wantError(t, err, domainerr.ErrNotFound, "No such file or directory: x/y.txt")
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
