package contents

import (
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A checkpoint is made without copying the file where the file system allows, since copying
// and syncing a notebook of plots (5 MB) is most of a checkpoint's time and Jupyter's
// unsynced copy is faster than a durable one:
//
//   - a reflink (FICLONE: XFS, Btrfs, bcachefs, ZFS 2.2) is an independent file sharing the
//     blocks until either is written, so it is a copy in all but cost;
//   - otherwise a hard link to the file's inode. The store never changes a file in place
//     (saves write a new file and rename it over the old), so the checkpoint keeps the
//     version it linked when the next save replaces the file. Until then a program that
//     writes the file in place (nbformat.write, nbconvert --inplace, jupytext, an editor
//     keeping links) would change the checkpoint too; so the store then copies the
//     checkpoint in the background (unshare below): the checkpoint is durable when the
//     request is answered, and its own file half a second after the file's last checkpoint,
//     at most five seconds after the first (unshareQuiet, unshareMost).
//
// Where neither works (a link refused by fs.protected_hardlinks, a file system without
// links), the checkpoint is copied and synced, as before.

// fdatasync is unix.Fdatasync; tests count its calls.
var fdatasync = unix.Fdatasync

// shareFile makes name in the directory cdfd the content of the open regular file in,
// whose stat is st, durably, without copying its bytes. It reports false, and leaves nothing
// behind, where the file system can do neither a reflink nor a link; the caller copies then.
func (c *checkpoints) shareFile(in *os.File, st statInfo, cdfd int, name string) (linked bool, err error) {
	err = withFD(in, func(infd int) error {
		if !c.share.noReflink.Load() {
			cloned, err := reflinkInto(infd, cdfd, name)
			if err != nil || cloned {
				linked = cloned
				return err
			}
			// One refusal says it of the file system: no clone is tried again.
			c.share.noReflink.Store(true)
		}
		// The version linked must be on disk before its new name is: a file written by a
		// kernel may not have been synced; one the store wrote and synced, or synced for an
		// earlier checkpoint, need not be again. (st was taken before this sync: a write
		// after it leaves a newer version than the one noted.)
		if !c.synced.holds(st) {
			if err := fdatasync(infd); err != nil {
				return err
			}
			c.synced.note(st)
		}
		// Through /proc so that exactly the inode opened (and checked regular) is linked,
		// not whatever the name holds by now; linkat's AT_EMPTY_PATH would need a capability.
		err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(infd), cdfd, name, unix.AT_SYMLINK_FOLLOW)
		if err != nil {
			if linkUnsupported(err) {
				return nil
			}
			return err
		}
		linked = true
		return unix.Fsync(cdfd)
	})
	return linked, err
}

// reflinkInto clones infd into a new file name in cdfd, synced and in place by rename. It
// reports false where the file system has no reflinks.
func reflinkInto(infd, cdfd int, name string) (bool, error) {
	tmp := tempPrefix + randomHex(8) + ".tmp"
	fd, err := unix.Openat(cdfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return false, err
	}
	defer func() { _ = unix.Close(fd) }() // closed after the rename; its errors came from fsync
	if err := unix.IoctlFileClone(fd, infd); err != nil {
		_ = unix.Unlinkat(cdfd, tmp, 0)
		if linkUnsupported(err) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
			return false, nil
		}
		return false, err
	}
	var st unix.Stat_t
	err = unix.Fstat(infd, &st)
	if err == nil {
		err = unix.Fchmod(fd, st.Mode&0o7777)
	}
	if err == nil {
		err = unix.Fsync(fd)
	}
	if err == nil {
		err = unix.Renameat(cdfd, tmp, cdfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(cdfd, tmp, 0)
		return false, err
	}
	return true, unix.Fsync(cdfd)
}

// linkUnsupported says a link or clone was refused for what the file system is or allows,
// not for a fault: the caller falls back to copying.
func linkUnsupported(err error) bool {
	for _, e := range []error{unix.EOPNOTSUPP, unix.EXDEV, unix.EPERM, unix.EMLINK, unix.ENOSYS, unix.ENOENT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sharing is the state of a tree's checkpoint sharing.
type sharing struct {
	noReflink atomic.Bool

	mu sync.Mutex
	// pending are the API paths of files whose checkpoints may share the file's inode, with
	// when the first and the last of those checkpoints were made.
	pending map[string]pendingUnshare
	running bool
	closed  bool
	idle    *sync.Cond
	// stop is closed by close, to end a wait before unsharing.
	stop chan struct{}
	// quiet and most bound when a file's checkpoints are copied (unshareQuiet and
	// unshareMost; tests shorten them).
	quiet, most time.Duration
}

type pendingUnshare struct{ first, last time.Time }

// A file's linked checkpoints are copied once no checkpoint of it has been made for
// unshareQuiet, and at the latest unshareMost after the first of them. The checkpoints of a
// moment share one copy, and a checkpoint pruned or whose file is saved meanwhile needs none.
// A client checkpointing one file again and again (a user pressing save every few seconds,
// a script, a benchmark's loop) gets a copy every few seconds instead of one after each: each
// copy is the whole file written and synced, and on ext4 (which commits file data with the
// metadata in its default mode) its commit holds up the links of the checkpoints made
// meanwhile: when copying began half a second after a checkpoint and went on while more
// came, a 5 MB notebook checkpointed in a loop had 3-9 % of its requests wait 5-45 ms behind
// a copy (p99 9-11 ms; 2 ms with no copies).
// A program writing the file in place before the copy changes the checkpoint too;
// unshareMost bounds that time.
const (
	unshareQuiet = 500 * time.Millisecond
	unshareMost  = 5 * time.Second
)

func newSharing() *sharing {
	sh := &sharing{pending: map[string]pendingUnshare{}, stop: make(chan struct{}), quiet: unshareQuiet, most: unshareMost}
	sh.idle = sync.NewCond(&sh.mu)
	return sh
}

// unshareLater asks for p's checkpoints that share its inode to get files of their own.
func (c *checkpoints) unshareLater(p string) {
	sh := c.share
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return
	}
	now := time.Now()
	e, ok := sh.pending[p]
	if !ok {
		e.first = now
	}
	e.last = now
	sh.pending[p] = e
	if !sh.running {
		sh.running = true
		go c.unshareLoop()
	}
}

// due is when p's copy is to be made.
func (sh *sharing) due(e pendingUnshare) time.Time {
	return minTime(e.last.Add(sh.quiet), e.first.Add(sh.most))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// unshareLoop copies the checkpoints asked for, one file at a time as each falls due, and
// ends when none are left; a later checkpoint starts another. A file asked for while its copy
// is made is due again later: the copy may have missed its newest checkpoint.
func (c *checkpoints) unshareLoop() {
	sh := c.share
	for {
		sh.mu.Lock()
		if len(sh.pending) == 0 || sh.closed {
			sh.running = false
			sh.idle.Broadcast()
			sh.mu.Unlock()
			return
		}
		now := time.Now()
		var p string
		next := time.Time{}
		for q, e := range sh.pending {
			if d := sh.due(e); !d.After(now) {
				p = q
				break
			} else if next.IsZero() || d.Before(next) {
				next = d
			}
		}
		if p == "" {
			sh.mu.Unlock()
			// A checkpoint made meanwhile only moves a due time later (or, for a file not
			// pending, sets one no earlier than those pending), so nothing falls due
			// before next.
			t := time.NewTimer(next.Sub(now))
			select {
			case <-t.C:
			case <-sh.stop:
				t.Stop()
			}
			continue
		}
		delete(sh.pending, p)
		sh.mu.Unlock()
		// A checkpoint that could not be copied stays a link: still the version it was,
		// unless the file is written in place; the file's next checkpoint asks again.
		_ = c.unshare(p)
	}
}

// waitUnshared waits until no unshare is pending or running.
func (sh *sharing) waitUnshared() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for sh.running {
		sh.idle.Wait()
	}
}

// close stops the unsharing after the file in progress; checkpoints still linked stay
// links until the file's next checkpoint asks again.
func (sh *sharing) close() {
	sh.mu.Lock()
	if !sh.closed {
		sh.closed = true
		close(sh.stop)
	}
	sh.mu.Unlock()
	sh.waitUnshared()
}

// unshare gives each checkpoint of p that is still p's own inode a copy of its own: one copy,
// synced, renamed over each of them (several checkpoints of an unchanged file share it).
func (c *checkpoints) unshare(p string) error {
	in, st, err := c.openRegular(p)
	if err != nil {
		return err
	}
	defer in.Close()
	list, err := c.list(p)
	if err != nil || len(list) == 0 {
		return err
	}
	dir, _ := splitPath(p)
	d, err := c.openDir(joinPath(dir, checkpointDir))
	if err != nil {
		return err
	}
	defer d.Close()
	return withFD(d, func(cdfd int) error {
		var shared []string
		for _, cp := range list {
			_, name := splitPath(cp.path)
			if cst, err := fstatat(cdfd, name); err == nil && cst.dev == st.dev && cst.ino == st.ino {
				shared = append(shared, name)
			}
		}
		if len(shared) == 0 {
			return nil
		}
		tmp := tempPrefix + randomHex(8) + ".tmp"
		f, err := writeTemp(cdfd, tmp, &st, func(w *os.File) error {
			_, err := io.Copy(w, in)
			return err
		})
		defer func() { _ = unix.Unlinkat(cdfd, tmp, 0) }() // the copy lives on under the checkpoints' names
		if err != nil {
			return err
		}
		f.Close()
		for _, name := range shared {
			// A checkpoint pruned or replaced meanwhile is left alone.
			if cur, err := fstatat(cdfd, name); err != nil || cur.ino != st.ino {
				continue
			}
			next := tempPrefix + randomHex(8) + ".tmp"
			if err := unix.Linkat(cdfd, tmp, cdfd, next, 0); err != nil {
				return err
			}
			if err := unix.Renameat(cdfd, next, cdfd, name); err != nil {
				_ = unix.Unlinkat(cdfd, next, 0)
				return err
			}
		}
		return unix.Fsync(cdfd)
	})
}
