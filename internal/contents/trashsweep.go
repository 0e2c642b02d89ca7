package contents

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// trashGrace is how old a leftover of an interrupted trash operation must be before the
// sweep removes it: far longer than any operation takes, so that it never races one.
const trashGrace = time.Hour

// sweep deletes for good the entries of every user's trash older than maxAge (none when it
// is zero), and the leftovers of interrupted operations. Replicas may sweep at the same
// time: each entry is removed once.
func (tr *trash) sweep(ctx context.Context) error {
	d, err := tr.openDir(trashDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError("trash", err)
	}
	users, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fsError("trash", err)
	}
	var errs []error
	for _, u := range users {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		dir := trashDir + "/" + u
		if err := tr.sweepUser(ctx, trashPaths{files: dir + "/files", info: dir + "/info"}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (tr *trash) sweepUser(ctx context.Context, t trashPaths) error {
	now := tr.clock.Now()
	infoIDs := map[string]bool{}
	var errs []error
	err := tr.listDir(t.info, func(ifd int, names []string) {
		for _, n := range names {
			if ctx.Err() != nil {
				return
			}
			id, isInfo := strings.CutSuffix(n, trashInfoExt)
			if !isInfo {
				// A taken info file or a temporary file whose operation was interrupted.
				if st, err := fstatat(ifd, n); err == nil && strings.HasPrefix(n, tempPrefix) && leftover(st, now) {
					_ = unix.Unlinkat(ifd, n, 0)
				}
				continue
			}
			infoIDs[id] = true
			if err := tr.sweepEntry(t, id, now); err != nil {
				errs = append(errs, err)
			}
		}
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fsError("trash", err))
	}
	// Entries without an info file: a crash between taking the info file and removing the
	// entry. An entry gets its info file before it arrives, so one that has none when looked
	// at again, just before it is removed, is not on its way in.
	err = tr.listDir(t.files, func(ffd int, names []string) {
		for _, n := range names {
			if ctx.Err() != nil || infoIDs[n] {
				continue
			}
			st, err := fstatat(ffd, n)
			if err != nil || !leftover(st, now) {
				continue
			}
			if _, err := tr.root.Lstat(t.infoFile(n)); errors.Is(err, fs.ErrNotExist) {
				if err := tr.root.RemoveAll(t.files + "/" + n); err != nil {
					errs = append(errs, fsError("trash", err))
				}
			}
		}
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fsError("trash", err))
	}
	return errors.Join(errs...)
}

// sweepEntry removes the entry id if it has expired, or its info file if its entry is
// gone (a crash between the two steps of a trash or a restore).
func (tr *trash) sweepEntry(t trashPaths, id string, now time.Time) error {
	seen, err := tr.readStateFile(t.infoFile(id))
	if err != nil {
		return nil // taken meanwhile, or not one of ours
	}
	ti, err := parseTrashInfo(seen)
	if err != nil {
		return nil // not one of ours: an admin's to look at
	}
	expired := tr.maxAge > 0 && now.Sub(ti.deleted) > tr.maxAge
	if !expired {
		if _, err := tr.root.Lstat(t.files + "/" + id); !errors.Is(err, fs.ErrNotExist) || now.Sub(ti.deleted) <= trashGrace {
			return nil
		}
	}
	taken, err := tr.takeInfo(t, id)
	if err != nil {
		return nil // another replica took it
	}
	if got, err := tr.readStateFile(taken); err != nil || !bytes.Equal(got, seen) {
		// The entry judged was removed and its id reused since: this info file is the new
		// entry's, and goes back.
		tr.putInfoBack(t, id, taken)
		return nil
	}
	return tr.expunge(t, id, taken)
}

// putInfoBack renames a taken info file back. The id may be claimed meanwhile by a new
// entry; that claim fails on the entry still in files/ and is withdrawn at once, so a few
// tries suffice. Should they not, the entry and its info file are removed as leftovers.
func (tr *trash) putInfoBack(t trashPaths, id, taken string) {
	infos, err := tr.openDir(t.info)
	if err != nil {
		return
	}
	defer infos.Close()
	_ = withFD(infos, func(ifd int) error {
		_, from := splitPath(taken)
		for range 50 {
			err := renameNoReplace(ifd, from, ifd, id+trashInfoExt)
			if !errors.Is(err, unix.EEXIST) {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	})
}

// leftover reports whether a temporary file left by an interrupted operation (of the trash,
// or a save) is old enough to go: its last change (a rename changes it) is more than
// trashGrace ago, far longer than any operation takes.
// dropLeftover removes name, a temporary file in the directory open as dfd, when it is a
// leftover of an operation a crash interrupted long ago (kill -9 mid-write): listings sweep
// them as they pass, so that none stays on the volume for good. Best effort.
func (s *Store) dropLeftover(dfd int, name string) {
	if st, err := fstatat(dfd, name); err == nil && st.isRegular() && leftover(st, s.clock.Now()) {
		_ = unix.Unlinkat(dfd, name, 0)
	}
}

func leftover(st statInfo, now time.Time) bool {
	changed := st.ctime
	if st.mtime.After(changed) {
		changed = st.mtime
	}
	return now.Sub(changed) > trashGrace
}
