package contents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// Sub returns a view of the store rooted at dir, a clean relative path of the tree, which it
// creates if it is missing (with the mode of any directory made through the API). The view
// is a store of its own for paths: its root is opened through the store's, so nothing in it,
// no symbolic link a kernel makes either, reaches outside dir; and its own .nbkube directory
// (ids, uploads, trash) lives in dir. It shares the store's options, validation cache and
// CPU queue, so views cost one open. Close the view, not the store, when done with it.
func (s *Store) Sub(dir string) (*Store, error) {
	p, err := cleanPath(dir)
	if err != nil {
		return nil, err
	}
	if p == "" || isHiddenPath(p) {
		return nil, domainerr.Invalid("Invalid home: %q", dir)
	}
	if err := s.root.MkdirAll(p, 0o777); err != nil {
		return nil, fsError(p, err)
	}
	r, err := s.root.OpenRoot(p)
	if err != nil {
		return nil, fsError(p, err)
	}
	t, err := openTree(r)
	if err != nil {
		_ = r.Close()
		return nil, fsError(p, err)
	}
	// Its own checkpoints too: their unsharing resolves paths in its root, and ends with it.
	return s.on(t), nil
}

// realPathOf is where the system resolved r's directory to, from /proc, which names an open
// descriptor's current place in the process's mount namespace: the same namespace, and so
// the same prefix, as every fdPath the store compares with it.
func realPathOf(r *os.Root) (string, error) {
	f, err := r.OpenFile(".", unix.O_PATH|syscall.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return fdPath(f)
}

// fdPath is the resolved path of an open file.
func fdPath(f *os.File) (string, error) {
	var p string
	err := withFD(f, func(fd int) error {
		var err error
		p, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("resolve open file: %w", err)
	}
	return p, nil
}

// refuseMetaTarget refuses p when what it resolves to is, or is inside, a .nbkube directory:
// the name check of isMetaPath cannot see a symbolic link (made by a kernel that mounts the
// tree) such as "notes -> .nbkube". It resolves p, or its nearest existing ancestor when p
// does not exist yet or cannot be opened, through the root and reads where the system put
// it. Operations through directory descriptors check again what they use (openDir), so this
// check, made before them, guards what is done by name. A link that leaves the root is not
// its business: the operation itself refuses it.
func (t *tree) refuseMetaTarget(p, refusal string) error {
	for q := p; ; {
		// Not O_PATH: os.Root opens the last component with O_NOFOLLOW, which with O_PATH
		// opens a link itself instead of refusing it, so the link would not be followed.
		f, err := t.root.OpenFile(osName(q), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err == nil {
			real, err := fdPath(f)
			f.Close()
			if err != nil {
				return fsError(p, err)
			}
			if !t.isMetaTarget(real) {
				return nil
			}
			return domainerr.Forbidden(refusal, p)
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) || q == "" {
			return nil
		}
		q, _ = splitPath(q)
	}
}

// isMetaTarget reports whether the resolved path real is a .nbkube directory of the tree, or
// inside one, or not inside the tree at all (which the root should have refused).
func (t *tree) isMetaTarget(real string) bool {
	if real == t.real {
		return false
	}
	rel, ok := strings.CutPrefix(real, strings.TrimSuffix(t.real, "/")+"/")
	return !ok || isMetaPath(rel)
}

// refuseMetaFile refuses the open file f, opened for the API path p, when it resolves into a
// .nbkube directory. Checking the descriptor about to be used leaves no time for a link to
// be swapped in after the check.
func (t *tree) refuseMetaFile(p string, f *os.File) error {
	real, err := fdPath(f)
	if err != nil {
		return fsError(p, err)
	}
	if t.isMetaTarget(real) {
		return domainerr.Forbidden("Refusing to serve nbkube's own directory: %s", p)
	}
	return nil
}

// Glob returns the directories of the tree that pattern (path.Match syntax, relative to the
// root) matches, skipping hidden ones: the homes of a home template.
func (s *Store) Glob(pattern string) ([]string, error) {
	matches, err := fs.Glob(s.root.FS(), pattern)
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", pattern, err)
	}
	dirs := matches[:0]
	for _, m := range matches {
		if isHiddenPath(m) {
			continue
		}
		if fi, err := s.root.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	return dirs, nil
}
