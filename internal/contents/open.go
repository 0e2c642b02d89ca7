package contents

import (
	"context"
	"io/fs"
	"os"
	"syscall"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// Open opens a file for streaming its bytes (/files/): no model, no size limit, no copy in
// memory. Directories, hidden paths (unless allowed) and paths outside the root are refused
// as Get refuses them.
func (s *Store) Open(_ context.Context, path string) (*os.File, fs.FileInfo, error) {
	p, err := s.check(path, "Refusing to serve hidden file '%s'")
	if err != nil {
		return nil, nil, err
	}
	// Never blocking: a FIFO or a device that a kernel made on the volume would otherwise hold
	// the request, and its thread, until something writes to it. Only regular files are served.
	f, err := s.root.OpenFile(osName(p), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fsError(p, err)
	}
	if err := s.refuseMetaFile(p, f); err != nil {
		f.Close()
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsError(p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, domainerr.NotFound("No such file: %s", p)
	}
	return f, fi, nil
}

// RefusesHidden reports whether path is hidden and hidden files are not served: Jupyter's
// handlers answer those with 404 (reads) or 400 (changes) before asking the store.
func (s *Store) RefusesHidden(path string) bool {
	return !s.opts.AllowHidden && s.IsHidden(path)
}
