package contents

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// Deleting moves a file or directory to its user's trash, as Jupyter's delete_to_trash does
// with the desktop's trash. Each user has one under the store's own directory, laid out as
// the XDG trash specification lays out a trash directory, so that an admin can inspect it:
//
//	.nbkube/trash/<user>/files/<id>             the file or directory as it was
//	.nbkube/trash/<user>/info/<id>.trashinfo    "[Trash Info]", Path= the API path it had
//	                                            (percent-encoded, relative to the contents
//	                                            root), DeletionDate= when, in UTC
//
// <user> is the user's name made a safe file name (trashUserDir). <id> is the deleted file's
// own name, or, when the trash holds one of that name, the name with -1, -2, ... before its
// extension. The trash is under .nbkube/, which no path reaches and no listing shows.
//
// Like the rest of the store, the trash takes no locks: replicas sharing the volume agree
// through renames and creations that cannot replace.
//
//   - Trashing claims an id by creating its info file exclusively, then renames the file into
//     files/ without replacing (as the specification orders: info first). A name taken in
//     either directory moves on to the next candidate.
//   - Restoring renames files/<id> to its path without replacing, then removes the info file.
//   - Removing an entry for good (DELETE, emptying, expiry) first takes its info file away by
//     renaming it to a name of its own; whoever loses that rename leaves the entry alone, so
//     that two replicas sweeping at once remove each entry once. While files/<id> remains,
//     no new entry can take the id, since its rename into files/ would fail.
//   - An expiry that took an info file re-reads it and puts it back if it is not the one it
//     judged expired (the entry was removed and the id reused in between).
//
// A crash between two steps leaves an info file without its entry or an entry without its
// info file; neither is listed, and the sweep removes them once they are older than
// trashGrace, which no operation in progress lasts.
const trashDir = metaDir + "/trash"

// trashExpungedExt ends the name of an info file taken by an operation removing its entry.
const trashExpungedExt = ".expunged"

// errOtherDevice says that a file cannot be renamed into the trash: it is on another file
// system than the trash (a mount inside the root).
var errOtherDevice = errors.New("on another file system than the trash")

// trash is every user's trash in a tree, beside the store as its checkpoints are: the store
// hands it the API's trash requests, and the files and directories Delete moves there.
type trash struct {
	*tree
	clock clock.PassiveClock
	// maxAge is how long an entry stays before the sweep deletes it for good: TrashMaxAge.
	maxAge time.Duration
}

func noTrashEntry(id string, err error) error {
	return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "No such entry in the trash: " + id, Err: err}
}

// damagedTrashEntry refuses an entry whose info file does not parse: not one the listing
// shows, so not one to restore. A kernel mounting the tree can write anything there.
func damagedTrashEntry(id string, err error) error {
	return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: fmt.Sprintf("No such entry in the trash: %s (its info file is damaged: %v)", id, err), Err: err}
}

// put renames p, whose entry is fi, into user's trash under a fresh id. It returns
// errOtherDevice when p cannot be renamed there.
func (tr *trash) put(user, p string, fi fs.FileInfo) error {
	// As Jupyter, which refuses to trash what the server cannot write, though it could delete
	// it for good. A symbolic link is moved, not what it points at, which may not exist.
	if fi.Mode()&fs.ModeSymlink == 0 && !tr.writable(p) {
		return domainerr.Forbidden("Permission denied: %s", p)
	}
	t := trashOf(user)
	for _, d := range []string{t.files, t.info} {
		if err := tr.root.MkdirAll(d, 0o700); err != nil {
			return fsError(p, err)
		}
	}
	info := trashInfo{path: p, deleted: tr.clock.Now()}.marshal()
	srcDir, srcName := splitPath(p)
	src, err := tr.openDir(srcDir)
	if err != nil {
		return fsError(p, err)
	}
	defer src.Close()
	files, err := tr.openDir(t.files)
	if err != nil {
		return fsError(p, err)
	}
	defer files.Close()
	infos, err := tr.openDir(t.info)
	if err != nil {
		return fsError(p, err)
	}
	defer infos.Close()
	return withFD(src, func(sfd int) error {
		return withFD(files, func(ffd int) error {
			return withFD(infos, func(ifd int) error {
				return tr.claim(t, p, info, sfd, srcName, ffd, ifd)
			})
		})
	})
}

// claim tries the ids of srcName in turn: a free one gets info, exclusively, and then
// the entry.
func (tr *trash) claim(t trashPaths, p string, info []byte, sfd int, srcName string, ffd, ifd int) error {
	tries := 0
	for id := range candidateNames(trashName(srcName), "-") {
		if tries++; tries > maxUntitled {
			break
		}
		if _, err := fstatat(ifd, id+trashInfoExt); err == nil {
			continue
		}
		if _, err := fstatat(ffd, id); err == nil {
			continue
		}
		err := tr.writeFile(t.infoFile(id), true, writeBytes(info))
		if errors.Is(err, domainerr.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		err = renameNoReplace(sfd, srcName, ffd, id)
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			_ = unix.Unlinkat(ifd, id+trashInfoExt, 0)
			continue
		}
		if err != nil {
			_ = unix.Unlinkat(ifd, id+trashInfoExt, 0)
			if errors.Is(err, unix.EXDEV) {
				return errOtherDevice
			}
			if errors.Is(err, unix.ENOENT) {
				return domainerr.NotFound("File or directory does not exist: %s", p)
			}
			return fsError(p, err)
		}
		if err := unix.Fsync(ffd); err != nil {
			return fsError(p, err)
		}
		if err := unix.Fsync(sfd); err != nil {
			return fsError(p, err)
		}
		// Emptying the trash meanwhile may have removed the info file just made: an entry
		// without one would be neither listed nor kept.
		if _, err := fstatat(ifd, id+trashInfoExt); errors.Is(err, unix.ENOENT) {
			return tr.writeFile(t.infoFile(id), false, writeBytes(info))
		}
		return nil
	}
	return domainerr.New(domainerr.ErrConflict, "No free name for %s in the trash", p)
}

// list is the entries of user's trash, newest first.
func (tr *trash) list(user string) ([]jupyter.TrashEntry, error) {
	t := trashOf(user)
	var out []jupyter.TrashEntry
	err := tr.listDir(t.info, func(_ int, names []string) {
		files, err := tr.openDir(t.files)
		if err != nil {
			return
		}
		defer files.Close()
		_ = withFD(files, func(ffd int) error {
			for _, n := range names {
				id, ok := strings.CutSuffix(n, trashInfoExt)
				if !ok || !validTrashID(id) {
					continue
				}
				if e, ok := tr.entry(t, ffd, id); ok {
					out = append(out, e)
				}
			}
			return nil
		})
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fsError("trash", err)
	}
	slices.SortFunc(out, func(a, b jupyter.TrashEntry) int {
		if c := b.Deleted.Compare(a.Deleted.Time); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if out == nil {
		out = []jupyter.TrashEntry{}
	}
	return out, nil
}

// entry is the entry id of the trash t, or false when it has no readable info file or
// no file (an operation in progress, or a crash's leftover).
func (tr *trash) entry(t trashPaths, ffd int, id string) (jupyter.TrashEntry, bool) {
	data, err := tr.readStateFile(t.infoFile(id))
	if err != nil {
		return jupyter.TrashEntry{}, false
	}
	ti, err := parseTrashInfo(data)
	if err != nil {
		return jupyter.TrashEntry{}, false
	}
	st, err := fstatat(ffd, id)
	if err != nil {
		return jupyter.TrashEntry{}, false
	}
	typ, _ := modelType(ti.path, st, "")
	_, name := splitPath(ti.path)
	e := jupyter.TrashEntry{ID: id, Name: name, OriginalPath: ti.path, Type: typ, Deleted: jupyter.Time{Time: ti.deleted}}
	if typ != jupyter.TypeDirectory {
		size := st.size
		e.Size = &size
	}
	return e, true
}

// info is what the info file of the entry id of user's trash says.
func (tr *trash) info(user, id string) (trashInfo, error) {
	if !validTrashID(id) {
		return trashInfo{}, noTrashEntry(id, nil)
	}
	data, err := tr.readStateFile(trashOf(user).infoFile(id))
	if err != nil {
		return trashInfo{}, noTrashEntry(id, err)
	}
	ti, err := parseTrashInfo(data)
	if err != nil {
		return trashInfo{}, damagedTrashEntry(id, err)
	}
	return ti, nil
}

// restore moves the entry id of user's trash to the API path p, whose directory exists,
// without replacing anything.
func (tr *trash) restore(user, id, p string) error {
	t := trashOf(user)
	dir, name := splitPath(p)
	if err := tr.moveOut(t, id, p, dir, name); err != nil {
		return err
	}
	// The entry is back: what follows must not report the restore as failed. An info file
	// left behind (a kernel made it a directory) is a leftover the sweep removes.
	_ = tr.root.Remove(t.infoFile(id))
	return nil
}

// moveOut renames files/<id> of t to name in dir (the API path p) without replacing.
func (tr *trash) moveOut(t trashPaths, id, p, dir, name string) error {
	return tr.withDirs(t.files, func(err error) error { return noTrashEntry(id, err) }, dir, func(ffd, dfd int) error {
		err := renameNoReplace(ffd, id, dfd, name)
		switch {
		case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
			return &domainerr.Error{Kind: domainerr.ErrConflict, Message: "File already exists: " + p, Err: err}
		case errors.Is(err, unix.ENOENT):
			return noTrashEntry(id, err)
		case errors.Is(err, unix.EXDEV):
			return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "Cannot restore to " + p + ": another file system than the trash", Err: err}
		case err != nil:
			return fsError(p, err)
		}
		if err := unix.Fsync(dfd); err != nil {
			return fsError(p, err)
		}
		return fsError(p, unix.Fsync(ffd))
	})
}

// remove deletes the entry id of user's trash for good.
func (tr *trash) remove(user, id string) error {
	if !validTrashID(id) {
		return noTrashEntry(id, nil)
	}
	t := trashOf(user)
	taken, err := tr.takeInfo(t, id)
	if errors.Is(err, fs.ErrNotExist) {
		return noTrashEntry(id, err)
	}
	if err != nil {
		return fsError("trash", err)
	}
	return tr.expunge(t, id, taken)
}

// empty deletes every entry of user's trash for good.
func (tr *trash) empty(ctx context.Context, user string) error {
	t := trashOf(user)
	var errs []error
	err := tr.listDir(t.info, func(_ int, names []string) {
		for _, n := range names {
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
				return
			}
			id, ok := strings.CutSuffix(n, trashInfoExt)
			if !ok || !validTrashID(id) {
				continue
			}
			if err := tr.remove(user, id); err != nil && !errors.Is(err, domainerr.ErrNotFound) {
				errs = append(errs, err)
			}
		}
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fsError("trash", err))
	}
	return errors.Join(errs...)
}

// takeInfo renames the info file of id to a name of its own and returns that name; an
// error satisfying fs.ErrNotExist means another operation took it first.
func (tr *trash) takeInfo(t trashPaths, id string) (string, error) {
	taken := t.info + "/" + tempPrefix + randomHex(8) + trashExpungedExt
	if err := tr.root.Rename(t.infoFile(id), taken); err != nil {
		return "", err
	}
	return taken, nil
}

// expunge removes the entry id of t, whose info file was taken to taken.
func (tr *trash) expunge(t trashPaths, id, taken string) error {
	if err := tr.root.RemoveAll(t.files + "/" + id); err != nil {
		return fsError("trash", err)
	}
	if err := tr.root.Remove(taken); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError("trash", err)
	}
	return nil
}

// The store's trash: the API's requests, and what Delete moves there.

// trashOrDelete moves p, whose entry is fi, to user's trash unless the store deletes for
// good. It reports whether it did; false means that p is to be deleted for good: the store's
// setting, or p on another file system than the trash, where Jupyter deletes for good too.
func (s *Store) trashOrDelete(user, p string, fi fs.FileInfo) (trashed bool, err error) {
	if s.opts.DeletePermanently {
		return false, nil
	}
	err = s.trash.put(user, p, fi)
	if errors.Is(err, errOtherDevice) {
		return false, nil
	}
	return err == nil, err
}

// ListTrash is GET /api/trash: the entries of user's trash, newest first.
func (s *Store) ListTrash(_ context.Context, user string) ([]jupyter.TrashEntry, error) {
	return s.trash.list(user)
}

// RestoreTrash is POST /api/trash/<id>/restore: the entry goes back to the path it was
// deleted from, whose missing directories are made again, or to the path to, whose
// directory must exist. Either must not exist (domainerr.ErrConflict). It returns the model
// of the restored file or directory.
func (s *Store) RestoreTrash(_ context.Context, user, id, to string) (*jupyter.ContentsModel, error) {
	ti, err := s.trash.info(user, id)
	if err != nil {
		return nil, err
	}
	dest := ti.path
	if to != "" {
		dest = to
	}
	p, err := s.check(dest, "Cannot restore file or directory '%s'")
	if err != nil {
		return nil, err
	}
	if p == "" {
		return nil, domainerr.Invalid("Can't restore to root")
	}
	if to == "" {
		dir, _ := splitPath(p)
		if err := s.root.MkdirAll(osName(dir), 0o777); err != nil {
			return nil, parentError(dir, err)
		}
	}
	if err := s.trash.restore(user, id, p); err != nil {
		return nil, err
	}
	return s.modelOfMoved(p)
}

// DeleteTrash is DELETE /api/trash/<id>: the entry is deleted for good.
func (s *Store) DeleteTrash(_ context.Context, user, id string) error {
	return s.trash.remove(user, id)
}

// EmptyTrash is DELETE /api/trash: every entry of user's trash is deleted for good.
func (s *Store) EmptyTrash(ctx context.Context, user string) error {
	return s.trash.empty(ctx, user)
}

// SweepTrash deletes for good the entries of every user's trash deleted more than
// TrashMaxAge ago (none when it is zero), and the leftovers of interrupted operations.
// Replicas may sweep at the same time: each entry is removed once.
func (s *Store) SweepTrash(ctx context.Context) error {
	return s.trash.sweep(ctx)
}
