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

// File ids name files and directories by UUID, whatever their path becomes: the IPython 1.x
// interface's notebook ids and jupyter_server_fileid's ids (GET /api/fileid/...), one id per
// file for both, since both follow a file through renames and forget it on delete. They live
// in the tree, so that every replica and every restart sees the same ones, as two indexes
// under .nbkube/ids/:
//
//   - by-path/<path> mirrors the tree: the file at a file's path holds its id, and a
//     directory's own id is held by the entry dirIDEntry in the directory's mirror;
//   - by-id/<id> holds the file's path.
//
// An id is valid only while both agree, so a crash between two writes can at worst lose an
// id (a new one is assigned), never give one file another's. Mirroring paths makes a
// rename through the store one rename of the mirror entry, which for a directory carries
// the ids of everything in it, followed by rewriting the by-id entries of the files it
// carried; deletion removes the mirror entry. A copy is a new file with an id of its own.
// Files moved or deleted behind the store's back lose their ids. Every file is written
// atomically; the by-path entry is created exclusively, so that two replicas assigning an id
// to the same file at once agree on one.
const (
	idsByPath = metaDir + "/ids/by-path"
	idsByID   = metaDir + "/ids/by-id"
	// dirIDEntry is the name, in a directory's mirror, of the entry that holds the
	// directory's own id: hidden, and hidden files get no ids, so no file's entry takes it.
	dirIDEntry = ".dir-id"
)

// notebookIDPattern is a version 4 UUID, which the 1.x interface's URLs expect, and the form
// of every file id.
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
	p, dir, err := s.idSubject(path)
	if err != nil {
		return "", err
	}
	if dir {
		return "", &domainerr.Error{Kind: domainerr.ErrInvalid, Message: p + " is a directory, not a notebook", Reason: "bad type"}
	}
	return s.assignID(p, false)
}

// FileID returns the id of the file or directory at path, assigning one if it has none, and
// the path cleaned.
func (s *Store) FileID(_ context.Context, path string) (id, p string, err error) {
	p, dir, err := s.idSubject(path)
	if err != nil {
		return "", "", err
	}
	id, err = s.assignID(p, dir)
	return id, p, err
}

// idSubject checks path as the contents API does and tells whether it is a directory.
func (s *Store) idSubject(path string) (p string, dir bool, err error) {
	p, err = s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return "", false, err
	}
	fi, err := s.root.Stat(osName(p))
	if err != nil {
		return "", false, fsError(p, err)
	}
	return p, fi.IsDir(), nil
}

// assignID returns the id of p (a directory when dir), assigning one if it has none.
func (s *Store) assignID(p string, dir bool) (string, error) {
	if id, ok := s.lookupID(p, dir); ok {
		return id, nil
	}
	id := newNotebookID()
	if err := s.root.MkdirAll(idsByID, 0o700); err != nil {
		return "", fsError(p, err)
	}
	if err := s.writeFile(idsByID+"/"+id, true, writeBytes([]byte(p))); err != nil {
		return "", err
	}
	entry := idEntry(p, dir)
	if err := s.mirrorDir(entry); err != nil {
		return "", err
	}
	err := s.writeFile(entry, true, writeBytes([]byte(id)))
	if errors.Is(err, domainerr.ErrConflict) {
		if theirs, ok := s.lookupID(p, dir); ok {
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
	p, dir, err := s.idPath(id)
	if err == nil && dir {
		err = domainerr.NotFound("No notebook with id %s", id)
	}
	if err != nil {
		if errors.Is(err, domainerr.ErrNotFound) {
			return "", &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "No notebook with id " + id, Err: err}
		}
		return "", err
	}
	return p, nil
}

// FilePath returns the path of the file or directory with the given id.
func (s *Store) FilePath(_ context.Context, id string) (string, error) {
	p, _, err := s.idPath(id)
	return p, err
}

// idPath is the path of the file with the given id, and whether it is a directory.
func (s *Store) idPath(id string) (string, bool, error) {
	if !notebookIDPattern.MatchString(id) {
		return "", false, domainerr.NotFound("No file with id %s", id)
	}
	data, err := s.root.ReadFile(idsByID + "/" + id)
	if err != nil {
		return "", false, &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "No file with id " + id, Err: err}
	}
	p := string(data)
	if _, err := s.check(p, "Refusing to serve hidden file or directory '%s'"); err != nil {
		return "", false, err
	}
	fi, err := s.root.Stat(osName(p))
	if err != nil {
		return "", false, domainerr.NotFound("No file with id %s", id)
	}
	if got, ok := s.lookupID(p, fi.IsDir()); !ok || got != id {
		return "", false, domainerr.NotFound("No file with id %s", id)
	}
	return p, fi.IsDir(), nil
}

// idEntry is the mirror entry that holds the id of p, a directory when dir.
func idEntry(p string, dir bool) string {
	if !dir {
		return idsByPath + "/" + p
	}
	if p == "" {
		return idsByPath + "/" + dirIDEntry
	}
	return idsByPath + "/" + p + "/" + dirIDEntry
}

// lookupID returns the id of p (a directory when dir) when both indexes agree on it.
func (s *Store) lookupID(p string, dir bool) (string, bool) {
	data, err := s.root.ReadFile(idEntry(p, dir))
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

// moveIDs carries the ids of old (a file, or a directory and everything in it) to p.
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

// forgetIDs drops the ids of p (a file, or a directory and everything in it).
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
// (indexed) and the path its mirror entry stands for (now): a directory's for its
// dirIDEntry.
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
		rel := strings.TrimPrefix(name, top)
		if strings.HasSuffix(name, "/"+dirIDEntry) {
			rel = strings.TrimSuffix(rel, "/"+dirIDEntry)
		}
		return fn(string(data), string(indexed), p+rel)
	})
}
