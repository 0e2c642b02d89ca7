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

	"github.com/nbkube/nbkube/internal/jupyter"
)

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

// FuzzNotebookDecode checks that reading a notebook never panics, accepts only valid JSON,
// agrees with nbformat's reader done the slow way, and that validating and re-encoding
// what it reads terminates with a result or an error.
func FuzzNotebookDecode(f *testing.F) {
	for _, seed := range notebookSeeds() {
		f.Add([]byte(seed))
	}
	f.Add([]byte(strings.Repeat("[", 2000)))
	f.Add([]byte(`{"nbformat": 4, "nbformat_minor": 7, "metadata": {}, "cells": [{"cell_type": "future", "metadata": {}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		checkRead(t, data)
		if _, minor, err := transformNotebook(data); err == nil {
			if _, err := validateStored(data, minor); err != nil {
				t.Fatalf("validating a readable notebook failed: %v", err)
			}
		}
		_, _, _ = encodeNotebook(data)
	})
}
