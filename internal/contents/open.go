package contents

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
	"unicode/utf8"

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

// IsText reports whether the file at path is text as Jupyter's contents API decides it when
// no format is asked: its bytes decode as UTF-8 (else the model carries base64). A file past
// MaxReadSize is not text here, as no model may carry its content. What Open refuses, IsText
// refuses with the same error.
func (s *Store) IsText(ctx context.Context, path string) (bool, error) {
	f, fi, err := s.Open(ctx, path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	limit := s.opts.MaxReadSize
	if fi.Size() > limit {
		return false, nil
	}
	n, err := eachRunes(io.LimitReader(f, limit+1), make([]byte, streamChunk), func(chunk []byte) error {
		if !utf8.Valid(chunk) {
			return errNotUTF8
		}
		return nil
	})
	switch {
	case errors.Is(err, errNotUTF8):
		return false, nil
	case err != nil:
		return false, fsError(path, err)
	}
	return n <= limit, nil
}
