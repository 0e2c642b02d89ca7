package contents

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// statInfo is what the store needs of a stat(2) result.
type statInfo struct {
	mode         uint32 // S_IFMT bits and permissions
	size         int64
	mtime, ctime time.Time
	dev, ino     uint64
	uid, gid     uint32
}

func (st statInfo) isDir() bool     { return st.mode&unix.S_IFMT == unix.S_IFDIR }
func (st statInfo) isRegular() bool { return st.mode&unix.S_IFMT == unix.S_IFREG }
func (st statInfo) isLink() bool    { return st.mode&unix.S_IFMT == unix.S_IFLNK }
func (st statInfo) perm() uint32    { return st.mode & 0o7777 }

// statOf makes a statInfo of the fields of a stat(2) result that syscall.Stat_t (behind an
// fs.FileInfo) and unix.Stat_t (from fstatat) both carry under the same names; Go cannot
// convert one type into the other, since their Timespec types differ. It takes times rather
// than Timespecs because a helper generic over those moves every stat result to the heap.
func statOf(mode uint32, size int64, mtime, ctime time.Time, dev, ino uint64, uid, gid uint32) statInfo {
	return statInfo{mode: mode, size: size, mtime: mtime.UTC(), ctime: ctime.UTC(), dev: dev, ino: ino, uid: uid, gid: gid}
}

func infoOfUnix(st *unix.Stat_t) statInfo {
	return statOf(st.Mode, st.Size, time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix()), st.Dev, st.Ino, st.Uid, st.Gid)
}

func infoOf(fi fs.FileInfo) statInfo {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		// Every os.Root result on Linux carries a Stat_t; this keeps a zero value harmless.
		return statInfo{mode: uint32(fi.Mode().Perm()), size: fi.Size(), mtime: fi.ModTime().UTC(), ctime: fi.ModTime().UTC()}
	}
	return statOf(st.Mode, st.Size, time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix()), st.Dev, st.Ino, st.Uid, st.Gid)
}

// withFD runs fn with the descriptor of f, without the side effects of f.Fd.
func withFD(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// fstatat stats name in the directory dfd without following a final symbolic link; name is a
// single component, so nothing outside the opened directory can be reached.
func fstatat(dfd int, name string) (statInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return statInfo{}, err
	}
	return infoOfUnix(&st), nil
}

// accessible is access(2) on name in dfd, which is what Jupyter's os.access does: it knows
// about read-only mounts, ACLs and the root user, which permission bits alone do not.
func accessible(dfd int, name string, mode uint32) bool {
	return unix.Faccessat(dfd, name, mode, 0) == nil
}

// openDir opens the directory at the clean API path p inside the root. Unless p names the
// store's own directory, it refuses a directory that resolves into a .nbkube directory, so
// that what is done through the descriptor cannot touch one whatever links were swapped in.
func (t *tree) openDir(p string) (*os.File, error) {
	d, err := t.root.OpenFile(osName(p), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil || isMetaPath(p) {
		return d, err
	}
	if err := t.refuseMetaFile(p, d); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// openRegular opens the regular file at p for reading, following links inside the root. It
// opens without blocking so that a FIFO cannot stall the request, and refuses anything but a
// regular file.
func (t *tree) openRegular(p string) (*os.File, statInfo, error) {
	f, err := t.root.OpenFile(osName(p), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, statInfo{}, fsError(p, err)
	}
	if err := t.refuseMetaFile(p, f); err != nil {
		f.Close()
		return nil, statInfo{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, statInfo{}, fsError(p, err)
	}
	st := infoOf(fi)
	if !st.isRegular() {
		f.Close()
		return nil, st, domainerr.Invalid("Cannot read non-file %s", p)
	}
	return f, st, nil
}

// listDir opens the directory at the clean API path dir and calls fn with its descriptor and
// the names in it, so that fn stats entries by single names through the open directory: that
// resolves no path again and cannot leave the directory.
func (t *tree) listDir(dir string, fn func(dfd int, names []string)) error {
	d, err := t.openDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	return withFD(d, func(dfd int) error {
		fn(dfd, names)
		return nil
	})
}

// withDirs opens the directories from and to (clean API paths) and runs fn with their
// descriptors, for what moves an entry from one to the other passing the system single
// names only. fromErr words an error opening from; one opening to is parentError's.
func (t *tree) withDirs(from string, fromErr func(error) error, to string, fn func(fromFD, toFD int) error) error {
	f, err := t.openDir(from)
	if err != nil {
		return fromErr(err)
	}
	defer f.Close()
	d, err := t.openDir(to)
	if err != nil {
		return parentError(to, err)
	}
	defer d.Close()
	return withFD(f, func(ffd int) error {
		return withFD(d, func(dfd int) error { return fn(ffd, dfd) })
	})
}

// writable reports whether the process may write the file at the clean API path p.
func (t *tree) writable(p string) bool {
	dir, name := splitPath(p)
	if p == "" {
		name = "."
	}
	d, err := t.openDir(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	ok := false
	_ = withFD(d, func(dfd int) error {
		ok = accessible(dfd, name, unix.W_OK)
		return nil
	})
	return ok
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b)
}

// realPath follows symbolic links in the last component of p, as Jupyter's atomic_writing
// does, so that saving through a link changes the file it points at instead of replacing the
// link. A link that leaves the root, or is absolute, is refused like os.Root refuses it.
func (t *tree) realPath(p string) (string, error) {
	for range 8 {
		fi, err := t.root.Lstat(osName(p))
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", fsError(p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := t.root.Readlink(p)
		if err != nil {
			return "", fsError(p, err)
		}
		dir, _ := splitPath(p)
		next := path.Join(dir, target)
		if path.IsAbs(target) || next == ".." || strings.HasPrefix(next, "../") || strings.IndexByte(target, 0) >= 0 {
			return "", domainerr.Forbidden("%s is outside root contents directory", p)
		}
		if isMetaPath(next) {
			return "", domainerr.Forbidden("Refusing to serve nbkube's own directory: %s", p)
		}
		if next == "." {
			next = ""
		}
		p = next
	}
	return "", domainerr.Invalid("Too many levels of symbolic links: %s", p)
}

// writeFile writes the file at the clean API path p atomically: fill writes a temporary file
// in the same directory, which is synced, renamed over p, and the directory synced, so that a
// crash leaves either the old or the new content, never a mix. An existing file keeps its
// permissions (and owner, where the process may set it). With exclusive, p must not exist
// (domainerr.ErrConflict) and the rename cannot replace a file created meanwhile by another replica.
func (t *tree) writeFile(p string, exclusive bool, fill func(w *os.File) error) error {
	_, err := t.write(p, writeOptions{exclusive: exclusive}, fill)
	return err
}

// writeOptions are how write writes: exclusive as writeFile says, or replacing p only if pre
// holds of it at the moment it is replaced.
type writeOptions struct {
	exclusive bool
	pre       Precondition
}

// write is writeFile with a precondition, returning the stat of the file written, taken from
// the file itself after the rename, so that it describes this save's version (its ETag)
// even when another save has replaced it since.
func (t *tree) write(p string, o writeOptions, fill func(w *os.File) error) (statInfo, error) {
	if !o.exclusive {
		var err error
		if p, err = t.realPath(p); err != nil {
			return statInfo{}, err
		}
	}
	dir, name := splitPath(p)
	if name == "" {
		return statInfo{}, domainerr.Invalid("%s is a directory", p)
	}
	d, err := t.openDir(dir)
	if err != nil {
		return statInfo{}, parentError(dir, err)
	}
	defer d.Close()
	var written statInfo
	err = withFD(d, func(dfd int) error {
		var old *statInfo
		if st, err := fstatat(dfd, name); err == nil {
			if o.exclusive {
				return domainerr.New(domainerr.ErrConflict, "File already exists: %s", p)
			}
			if st.isDir() {
				return domainerr.Invalid("%s is a directory", p)
			}
			old = &st
		} else if !errors.Is(err, unix.ENOENT) {
			return fsError(p, err)
		}
		tmp := tempPrefix + randomHex(8) + ".tmp"
		f, err := writeTemp(dfd, tmp, old, fill)
		if err != nil {
			_ = unix.Unlinkat(dfd, tmp, 0)
			return fsError(p, err)
		}
		defer f.Close()
		// The version synced, stated while the file has no name anyone else knows.
		synced, serr := f.Stat()
		if o.exclusive {
			err = renameNoReplace(dfd, tmp, dfd, name)
		} else {
			err = t.replace(dfd, tmp, name, p, o.pre)
		}
		if err != nil {
			_ = unix.Unlinkat(dfd, tmp, 0)
			if errors.Is(err, unix.EEXIST) {
				return &domainerr.Error{Kind: domainerr.ErrConflict, Message: "File already exists: " + p, Err: err}
			}
			return fsError(p, err)
		}
		if serr == nil {
			t.synced.note(infoOf(synced))
		}
		fi, err := f.Stat()
		if err != nil {
			return fsError(p, err)
		}
		written = infoOf(fi)
		return fsError(p, unix.Fsync(dfd))
	})
	return written, err
}

// replace renames tmp over name in the directory dfd, the API path p, if pre holds of what
// name is at that moment (domainerr.ErrConflict otherwise). The check and the rename of a
// file the API serves are made holding the save lock (see withSaveLock), so that no other
// write through a store of this tree replaces the file in between: of conditional saves
// from one version, through any number of replicas, exactly one succeeds.
func (t *tree) replace(dfd int, tmp, name, p string, pre Precondition) error {
	rename := func() error {
		if !pre.IsZero() {
			st, err := currentStat(dfd, name)
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
			if err := pre.check(p, st, err == nil); err != nil {
				return err
			}
		}
		return unix.Renameat(dfd, tmp, dfd, name)
	}
	if isMetaPath(p) {
		// The store's own files are no one's loaded version; their writers need no lock.
		return rename()
	}
	return t.withSaveLock(!pre.IsZero(), rename)
}

// currentStat stats name in dfd as it is now, for a precondition: through a descriptor it
// opens, because opening is what an NFS client revalidates its caches of a name and its
// attributes for (close-to-open consistency), where a stat may be answered from them and
// miss another machine's save. Only a regular file is opened (opening a device can do
// things); one it may not open is stat'ed by name.
func currentStat(dfd int, name string) (statInfo, error) {
	byName, err := fstatat(dfd, name)
	if err != nil || !byName.isRegular() {
		return byName, err
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return statInfo{}, err
	}
	if err != nil {
		return byName, nil
	}
	defer func() { _ = unix.Close(fd) }() // opened to read its stat only
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return statInfo{}, err
	}
	return infoOfUnix(&st), nil
}

// saveLock is the file whose lock (flock(2)) the writes that replace served files hold while
// they check and rename.
const saveLock = metaDir + "/save.lock"

// withSaveLock runs fn holding the tree's save lock, an exclusive flock on saveLock, which
// excludes other goroutines (each opens the file anew: flock locks belong to an open file)
// and other processes, on other machines too where the file system shares flock locks (NFS
// does, as byte-range locks, hence the file opened for writing).
//
// Only a conditional save (create) makes the lock file: a tree whose clients never save
// conditionally gets no file and no locking, and an unconditional write runs unlocked until
// the first conditional save in the tree, which leaves that one save the window of a check
// and a rename a few system calls apart. So does a root where the file cannot be made
// (read-only, or not writable by the server), where fn runs without the lock, as writes did
// before there was one.
func (t *tree) withSaveLock(create bool, fn func() error) error {
	return t.withLock(saveLock, create, fn)
}

// withLock runs fn holding an exclusive flock on the file name in metaDir, made when create,
// as withSaveLock says; without the file (not create, or a root the server cannot write), fn
// runs unlocked.
func (t *tree) withLock(name string, create bool, fn func() error) error {
	flags := os.O_RDWR | syscall.O_NOFOLLOW
	if create {
		flags |= os.O_CREATE
	}
	f, err := t.root.OpenFile(name, flags, 0o600)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err := t.root.MkdirAll(metaDir, 0o700); err != nil && !unwritable(err) {
			return fmt.Errorf("create %s: %w", metaDir, err)
		}
		f, err = t.root.OpenFile(name, flags, 0o600)
	}
	if errors.Is(err, fs.ErrNotExist) || unwritable(err) {
		return fn()
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	// Closing releases the lock.
	defer f.Close()
	err = withFD(f, func(fd int) error {
		for {
			// A blocked flock returns EINTR when a signal arrives, such as the runtime's
			// preemption signal.
			if err := unix.Flock(fd, unix.LOCK_EX); !errors.Is(err, unix.EINTR) {
				return err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	return fn()
}

// unwritable reports an error of a file system or directory the server may not write.
func unwritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// writeTemp creates name in dfd (never following a link), lets fill write it and syncs it,
// and returns it open: its stat after the rename is the version written. It takes old's
// permissions and, best effort, its owner.
func writeTemp(dfd int, name string, old *statInfo, fill func(w *os.File) error) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if err := fillTemp(fd, f, old, fill); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func fillTemp(fd int, f *os.File, old *statInfo, fill func(w *os.File) error) error {
	if old != nil {
		if err := unix.Fchmod(fd, old.perm()); err != nil {
			return err
		}
		// Only a privileged server can give the file back to its owner; an unprivileged one
		// owns what it writes, as Jupyter's would, so a refusal is not an error.
		_ = unix.Fchown(fd, int(old.uid), int(old.gid))
	}
	if err := fill(f); err != nil {
		return err
	}
	return f.Sync()
}

// renameNoReplace renames without replacing an existing target (EEXIST). File systems
// without RENAME_NOREPLACE (NFS) get a hard link, which cannot replace either; where that is
// refused too (directories), the target is checked first, which leaves a small race.
func renameNoReplace(odfd int, oname string, ndfd int, nname string) error {
	err := unix.Renameat2(odfd, oname, ndfd, nname, unix.RENAME_NOREPLACE)
	unsupported := errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
	if err == nil || !unsupported {
		return err
	}
	if err := unix.Linkat(odfd, oname, ndfd, nname, 0); err == nil {
		return unix.Unlinkat(odfd, oname, 0)
	} else if errors.Is(err, unix.EEXIST) {
		return err
	}
	if _, err := fstatat(ndfd, nname); err == nil {
		return unix.EEXIST
	}
	return unix.Renameat(odfd, oname, ndfd, nname)
}

// parentError reports a directory that cannot be opened to create something in it, or made
// (EEXIST: MkdirAll met a file where a directory was to be).
func parentError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) {
		return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "No such directory: " + dir, Err: err}
	}
	return fsError(dir, err)
}

// readAll reads f, of the size st says, refusing more than limit bytes.
func readAll(f io.Reader, p string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, tooLarge(p, limit)
	}
	buf := make([]byte, 0, size+1)
	for {
		if int64(len(buf)) > limit {
			return nil, tooLarge(p, limit)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, fsError(p, err)
		}
	}
}

func tooLarge(p string, limit int64) *domainerr.Error {
	return domainerr.New(domainerr.ErrTooLarge, "%s is larger than the %d bytes the server returns in a model; download it from /files/ instead", p, limit)
}

// errNotStateFile is readStateFile's refusal of what is not a small regular file.
var errNotStateFile = errors.New("not a regular file of the store's state")

// stateFileMax bounds the files of the store's own state that readStateFile reads (a trash
// entry's info file, an upload's state): a few hundred bytes each, a path at most 12 KiB
// percent-encoded.
const stateFileMax = 64 << 10

// readStateFile reads name, a file of the store's own state under .nbkube (links followed
// inside the root), refusing with an error satisfying errNotStateFile anything but a regular
// file of at most stateFileMax bytes. A user's kernel mounts the tree and can put anything
// there: a FIFO, whose plain open would block until a writer comes (forever), a device, or a
// file of gigabytes read whole into memory at each listing.
func (t *tree) readStateFile(name string) ([]byte, error) {
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: %v", name, errNotStateFile, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, stateFileMax+1))
	if err != nil {
		return nil, err
	}
	if len(data) > stateFileMax {
		return nil, fmt.Errorf("%s: %w: over %d bytes", name, errNotStateFile, stateFileMax)
	}
	return data, nil
}
