package contents

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"syscall"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// Notebook ids serve the IPython 1.x interface, which names notebooks by UUID. They live in
// the tree, so that every replica and every restart sees the same ones, as two indexes under
// .nbkube/ids/:
//
//   - by-path/<notebook path> mirrors the tree: the file at a notebook's path holds its id;
//   - by-id/<id> holds the notebook's path.
//
// An id is valid only while both agree, so a crash between two writes can at worst lose an
// id (a new one is assigned), never give one notebook another's. Mirroring paths makes a
// rename through the store one rename of the mirror entry, which for a directory carries
// the ids of everything in it, followed by rewriting the by-id entries of the notebooks it
// carried; deletion removes the mirror entry. Files moved or deleted behind the store's back
// lose their ids. Every file is written atomically; the by-path entry is created exclusively,
// so that two replicas assigning an id to the same notebook at once agree on one.
const (
	idsByPath = metaDir + "/ids/by-path"
	idsByID   = metaDir + "/ids/by-id"
)

// notebookIDPattern is a version 4 UUID, which the 1.x interface's URLs expect.
var notebookIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// IsNotebookID reports whether id has the form of a notebook id.
func IsNotebookID(id string) bool { return notebookIDPattern.MatchString(id) }

func newNotebookID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NotebookID returns the id of the notebook at path, assigning one if it has none.
func (s *Store) NotebookID(_ context.Context, path string) (string, error) {
	p, err := s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return "", err
	}
	fi, err := s.root.Stat(osName(p))
	if err != nil {
		return "", fsError(p, err)
	}
	if fi.IsDir() {
		return "", &domainerr.Error{Kind: domainerr.ErrInvalid, Message: p + " is a directory, not a notebook", Reason: "bad type"}
	}
	if id, ok := s.lookupID(p); ok {
		return id, nil
	}
	id := newNotebookID()
	if err := s.root.MkdirAll(idsByID, 0o700); err != nil {
		return "", fsError(p, err)
	}
	if err := s.writeFile(idsByID+"/"+id, true, writeBytes([]byte(p))); err != nil {
		return "", err
	}
	entry := idsByPath + "/" + p
	if err := s.mirrorDir(entry); err != nil {
		return "", err
	}
	err = s.writeFile(entry, true, writeBytes([]byte(id)))
	if errors.Is(err, domainerr.ErrConflict) {
		if theirs, ok := s.lookupID(p); ok {
			_ = s.root.Remove(idsByID + "/" + id) // ours lost the race and is not referenced
			return theirs, nil
		}
		// A stale entry, left by a crash or a file replaced behind our back.
		err = s.writeFile(entry, false, writeBytes([]byte(id)))
	}
	if err != nil {
		return "", err
	}
	return id, nil
}

// NotebookPath returns the path of the notebook with the given id.
func (s *Store) NotebookPath(_ context.Context, id string) (string, error) {
	if !notebookIDPattern.MatchString(id) {
		return "", domainerr.NotFound("No notebook with id %s", id)
	}
	data, err := s.root.ReadFile(idsByID + "/" + id)
	if err != nil {
		return "", &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "No notebook with id " + id, Err: err}
	}
	p := string(data)
	if got, ok := s.lookupID(p); !ok || got != id {
		return "", domainerr.NotFound("No notebook with id %s", id)
	}
	if _, err := s.check(p, "Refusing to serve hidden file or directory '%s'"); err != nil {
		return "", err
	}
	if fi, err := s.root.Stat(osName(p)); err != nil || fi.IsDir() {
		return "", domainerr.NotFound("No notebook with id %s", id)
	}
	return p, nil
}

// lookupID returns the id of p when both indexes agree on it.
func (s *Store) lookupID(p string) (string, bool) {
	data, err := s.root.ReadFile(idsByPath + "/" + p)
	if err != nil {
		return "", false
	}
	id := string(data)
	if !notebookIDPattern.MatchString(id) {
		return "", false
	}
	back, err := s.root.ReadFile(idsByID + "/" + id)
	return id, err == nil && string(back) == p
}

// mirrorDir creates the directories of the mirror entry, removing stale entries that stand
// where a directory must be (a notebook "a" once had an id, and "a" is now a directory).
func (s *Store) mirrorDir(entry string) error {
	dir, _ := splitPath(entry)
	err := s.root.MkdirAll(dir, 0o700)
	if err == nil || !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, fs.ErrExist) {
		return fsError(entry, err)
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		if fi, err := s.root.Lstat(prefix); err == nil && !fi.IsDir() {
			if err := s.root.Remove(prefix); err != nil {
				return fsError(entry, err)
			}
		}
	}
	return fsError(entry, s.root.MkdirAll(dir, 0o700))
}

// moveIDs carries the ids of old (a notebook, or everything in a directory) to p.
func (s *Store) moveIDs(old, p string) error {
	from, to := idsByPath+"/"+old, idsByPath+"/"+p
	if _, err := s.root.Lstat(from); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err := s.root.RemoveAll(to); err != nil {
		return fsError(p, err)
	}
	if err := s.mirrorDir(to); err != nil {
		return err
	}
	if err := s.root.Rename(from, to); err != nil {
		return fsError(p, err)
	}
	return s.walkIDs(p, func(id, indexed, now string) error {
		if indexed != old+strings.TrimPrefix(now, p) {
			return nil // stale: the notebook had lost this id already
		}
		return s.writeFile(idsByID+"/"+id, false, writeBytes([]byte(now)))
	})
}

// forgetIDs drops the ids of p (a notebook, or everything in a directory).
func (s *Store) forgetIDs(p string) error {
	entry := idsByPath + "/" + p
	if _, err := s.root.Lstat(entry); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	err := s.walkIDs(p, func(id, indexed, now string) error {
		if indexed != now {
			return nil
		}
		if err := s.root.Remove(idsByID + "/" + id); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return fsError(p, s.root.RemoveAll(entry))
}

// walkIDs calls fn for each id in the mirror at p, with the path its by-id entry holds
// (indexed) and the notebook path its mirror entry stands for (now).
func (s *Store) walkIDs(p string, fn func(id, indexed, now string) error) error {
	top := idsByPath + "/" + p
	return fs.WalkDir(s.root.FS(), top, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fsError(p, err)
		}
		if d.IsDir() {
			return nil
		}
		data, err := s.root.ReadFile(name)
		if err != nil || !notebookIDPattern.MatchString(string(data)) {
			return nil
		}
		indexed, err := s.root.ReadFile(idsByID + "/" + string(data))
		if err != nil {
			return nil
		}
		return fn(string(data), string(indexed), p+strings.TrimPrefix(name, top))
	})
}
