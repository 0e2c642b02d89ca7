package contents

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// A FIFO that a kernel made on the volume is no file to serve: Open refuses it at once
// instead of waiting, with the request's thread, for something to write to it.
func TestOpen_AFIFOIsRefusedWithoutBlocking(t *testing.T) {
	s, root := newTestStore(t, Options{})
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, _, err := s.Open(t.Context(), "pipe")
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, domainerr.ErrNotFound) {
			t.Errorf("Open of a FIFO: %v, want not found", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open of a FIFO has not returned: it waits for a writer")
	}
}

// IsText is Jupyter's check for a file's format: UTF-8 is text (across the chunks it is read
// in, a character cut by a chunk's end included), anything else is not, nor is a file too
// large for a model.
func TestIsText_UTF8IsTextAndOtherBytesAreNot(t *testing.T) {
	s, root := newTestStore(t, Options{MaxReadSize: 4 * streamChunk})
	// "é" is two bytes: at an odd offset, one of them straddles the first chunk's end.
	long := append(bytes.Repeat([]byte("a"), streamChunk-1), []byte(strings.Repeat("é", streamChunk))...)
	files := map[string][]byte{
		"plain.txt": []byte("print('hi')\n"),
		"empty":     nil,
		"long.txt":  long,
		"image.png": {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0xff, 0xfe},
		"late.bin":  append(bytes.Repeat([]byte("a"), 2*streamChunk), 0xff),
		"huge.txt":  bytes.Repeat([]byte("a"), 4*streamChunk+1),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{"plain.txt": true, "empty": true, "long.txt": true, "image.png": false, "late.bin": false, "huge.txt": false} {
		got, err := s.IsText(t.Context(), name)
		if err != nil || got != want {
			t.Errorf("IsText(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := s.IsText(t.Context(), "missing"); !errors.Is(err, domainerr.ErrNotFound) {
		t.Errorf("IsText of a missing file: %v", err)
	}
}
