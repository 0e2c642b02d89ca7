package contents

import (
	"errors"
	"path/filepath"
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
