package contents

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

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
		wantError(t, err, domainerr.ErrForbidden, "")
		_, err = s.Save(ctx, p, &jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"x"`)})
		wantError(t, err, domainerr.ErrForbidden, "")
	}
	_, err := s.Get(ctx, "a\x00b", GetOptions{})
	wantError(t, err, domainerr.ErrInvalid, "")
	if got := readFile(t, outside, "secret.txt"); got != "secret" {
		t.Errorf("outside file changed: %q", got)
	}
}

// FuzzResolve drives paths through reads and writes of a store whose tree has links out of
// it, and checks that nothing outside the root is ever read or written.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		"", "a", "/a/b/", "..", "../outside/secret", "a/../../outside/secret", "./a", "a//b", "abs", "abs/secret",
		"rel/secret", "d/up/secret", "loop", "loop/x", "d/../../x", "\x00", "a\x00b", "\xff", "a\\..\\..\\x",
		"ü/ñ.ipynb", ".nbkube/ids", ".hidden", "d/inlink/x", "dangling", strings.Repeat("a/", 300) + "x",
		"%2e%2e/secret", "d/./../abs/secret", "/..", "~/x",
	} {
		f.Add(seed)
	}
	base := f.TempDir()
	outside := filepath.Join(base, "outside")
	root := filepath.Join(base, "root")
	writeTree(f, outside, map[string]string{"secret": "SECRET", "sub/secret": "SECRET"})
	writeTree(f, root, map[string]string{"d/x": "x", "a": "a", "ü/": ""})
	for name, target := range map[string]string{
		"abs": outside, "rel": "../outside", "d/up": "../../outside", "loop": "loop", "d/inlink": "..", "dangling": "../outside/new",
	} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			f.Fatal(err)
		}
	}
	s, err := New(root, Options{AllowHidden: true, DeleteNonEmptyDirs: false})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	before := snapshot(f, outside)
	f.Fuzz(func(t *testing.T, p string) {
		if m, err := s.Get(ctx, p, GetOptions{Content: true}); err == nil {
			if c, ok := m.Content.(string); ok && strings.Contains(c, "SECRET") {
				t.Fatalf("Get(%q) read a file outside the root", p)
			}
		}
		_, _ = s.Save(ctx, p, &jupyter.SaveModel{Type: "file", Format: "text", Content: json.RawMessage(`"fuzz"`)})
		_, _ = s.Save(ctx, p, &jupyter.SaveModel{Type: "directory"})
		_, _, _ = s.Exists(ctx, p)
		if after := snapshot(t, outside); !slices.Equal(before, after) {
			t.Fatalf("path %q changed the tree outside the root: %v", p, after)
		}
		if _, err := os.Stat(filepath.Join(base, "fuzz")); err == nil {
			t.Fatalf("path %q wrote next to the root", p)
		}
	})
}

// snapshot lists a tree's entries with their contents.
func snapshot(t testing.TB, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		entry := p
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			entry += "=" + string(data)
		}
		out = append(out, entry)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
