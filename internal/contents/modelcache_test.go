package contents

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/jupyter"
)

const cachedNotebookJSON = `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# One\n", "two"]}]}`

// An unchanged notebook is served from what its last read made; any new version of it, saved
// or written in place, is read anew.
func TestGet_UnchangedNotebooksAreServedFromTheCache(t *testing.T) {
	s, dir := newTestStore(t, Options{})
	path := filepath.Join(dir, "n.ipynb")
	writeTree(t, dir, map[string]string{"n.ipynb": cachedNotebookJSON})
	first, err := s.Get(ctx, "n.ipynb", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(first.Content.(json.RawMessage)), `"source":"# One\ntwo"`) {
		t.Fatalf("content %s", first.Content)
	}
	// The same size and modification time, in place: only a cache keyed by the version
	// serves the old content now, which is how this test sees that the file was not read.
	fi, _ := os.Stat(path)
	same := strings.Replace(cachedNotebookJSON, "# One", "# Uno", 1)
	if err := os.WriteFile(path, []byte(same), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	second, err := s.Get(ctx, "n.ipynb", GetOptions{Content: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(second.Content.(json.RawMessage)) != string(first.Content.(json.RawMessage)) || second.ETag != first.ETag {
		t.Fatalf("the second read was not served from the cache: %s", second.Content)
	}
	// A hash not kept yet is read from the file, and kept.
	sum := sha256.Sum256([]byte(same))
	for range 2 {
		m, err := s.Get(ctx, "n.ipynb", GetOptions{Content: true, Hash: true})
		if err != nil || m.Hash == nil || *m.Hash != hex.EncodeToString(sum[:]) || *m.HashAlgorithm != "sha256" {
			t.Fatalf("hash %v, want the file's: %v", m.Hash, err)
		}
	}
	// Written in place at another time: read anew.
	if err := os.Chtimes(path, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Get(ctx, "n.ipynb", GetOptions{Content: true}); !strings.Contains(string(m.Content.(json.RawMessage)), "# Uno") {
		t.Errorf("after a write in place: %s", m.Content)
	}
	// Saved: a new inode.
	if _, err := s.Save(ctx, "n.ipynb", &jupyter.SaveModel{Type: "notebook", Content: json.RawMessage(strings.Replace(cachedNotebookJSON, "# One", "# Eins", 1))}); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Get(ctx, "n.ipynb", GetOptions{Content: true}); !strings.Contains(string(m.Content.(json.RawMessage)), "# Eins") {
		t.Errorf("after a save: %s", m.Content)
	}
}

func TestNotebookCache_BoundedByBytes(t *testing.T) {
	c := newNotebookCache(8 << 10)
	for i := range 20 {
		c.put(cachedNotebook{key: versionKey{ino: uint64(i)}, content: make([]byte, 700)})
	}
	if c.bytes > c.max {
		t.Errorf("%d bytes kept, bound %d", c.bytes, c.max)
	}
	if _, ok := c.get(versionKey{ino: 19}); !ok {
		t.Error("the newest entry was evicted")
	}
	if _, ok := c.get(versionKey{ino: 0}); ok {
		t.Error("the oldest entry was kept past the bound")
	}
	c.put(cachedNotebook{key: versionKey{ino: 100}, content: make([]byte, 2<<10)})
	if _, ok := c.get(versionKey{ino: 100}); ok {
		t.Error("an entry over an eighth of the bound was kept")
	}
	off := newNotebookCache(-1)
	off.put(cachedNotebook{key: versionKey{ino: 1}})
	if _, ok := off.get(versionKey{ino: 1}); ok {
		t.Error("a cache turned off kept an entry")
	}
}
