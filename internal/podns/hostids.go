package podns

// A sandbox whose user is a user of the machine of its own (Spec.Host), not its starter's.
//
// Such a sandbox's init cannot reach what only its starter may: the init program where it
// lies, the volumes under a private directory, the empty directory its root was to be made on.
// So the starter (root) prepares them before the init runs: it opens the init program, whose
// descriptor the init is executed from, and makes each volume a detached mount (open_tree)
// that the init attaches (move_mount) where the volume goes. Those mounts are idmapped: the
// starter's user and group on the file system are the sandbox's host user and group through
// them, which its user namespace shows as UID and GID; nothing else on them has an owner the
// sandbox knows. The init builds the root on a new tmpfs it mounts on its own copy of /tmp.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// usernsHolderArg0 is the argv[0] under which this binary holds a user namespace open for its
// starter until its stdin ends (see idmapUserns).
const usernsHolderArg0 = "nbkube-userns-holder"

// distinctRoot is where the init of a sandbox of a distinct user mounts its root: a directory
// it can reach, in its own mount namespace, so the host's /tmp is not touched.
const distinctRoot = "/tmp"

// holdUserns is the holder's whole work.
func holdUserns() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// hostFiles are what the starter opened for the init of a sandbox of a distinct user.
type hostFiles struct {
	// exe is the init program.
	exe *os.File
	// mounts are the detached, idmapped mounts of the spec's volumes, in its order.
	mounts []*os.File
}

func (h *hostFiles) close() {
	if h == nil {
		return
	}
	if h.exe != nil {
		h.exe.Close()
	}
	for _, f := range h.mounts {
		f.Close()
	}
}

// openHostFiles opens init and makes the mounts of s's volumes, idmapped so that the starter's
// user and group are s.Host's.
func openHostFiles(s *Spec, init string, sp *Spawner) (*hostFiles, error) {
	h := &hostFiles{}
	exe, err := os.OpenFile(init, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the sandbox's init: %w", err)
	}
	h.exe = exe
	if len(s.Mounts) == 0 {
		return h, nil
	}
	userns, err := idmapUsernsCache.get(init, sp, *s.Host)
	if err != nil {
		h.close()
		return nil, err
	}
	for _, m := range s.Mounts {
		f, err := idmappedMount(m, userns)
		if err != nil {
			h.close()
			return nil, fmt.Errorf("mounting %s at %s: %w", m.Source, m.Target, err)
		}
		h.mounts = append(h.mounts, f)
	}
	return h, nil
}

// idmappedMount is a detached copy of the mount of m's source, read-only if m says so, never
// with set-user-ID programs or devices, whose owners are seen through userns.
func idmappedMount(m Mount, userns int) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, err
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if m.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		_ = unix.Close(fd)
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("its file system cannot be idmapped: %w", err)
		}
		return nil, err
	}
	return os.NewFile(uintptr(fd), "mount"), nil
}

// usernsHolder is the program that holds a user namespace open until its stdin ends when
// the machine has it: cat, which starts in a millisecond where a Go program takes several.
const usernsHolder = "/bin/cat"

// usernsCache keeps the volumes' user namespaces of the host IDs sandboxes ran as, so that a
// sandbox of the same IDs (a pod given an address that an earlier pod had) needs no new one:
// making one forks this process whole (the Go runtime cannot vfork into a new user
// namespace), which in a node of some hundred megabytes costs more than the rest of the
// sandbox. A namespace maps one user and group and holds nothing else, so sharing it between
// sandboxes of the same IDs shares nothing.
type usernsCache struct {
	mu  sync.Mutex
	fds map[HostIDs]int
}

// maxCachedUserns bounds the cache; past it, the namespaces of other IDs are made each time.
const maxCachedUserns = 4096

var idmapUsernsCache = &usernsCache{fds: map[HostIDs]int{}}

// get is a descriptor of the user namespace of host's volumes, which the cache keeps open:
// the caller does not close it.
func (c *usernsCache) get(init string, sp *Spawner, host HostIDs) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[host]; ok {
		return fd, nil
	}
	fd, err := idmapUserns(init, sp, host)
	if err != nil {
		return -1, err
	}
	if len(c.fds) >= maxCachedUserns {
		// Full: one is dropped; its namespace goes once no mount uses it.
		for h, old := range c.fds {
			_ = unix.Close(old)
			delete(c.fds, h)
			break
		}
	}
	c.fds[host] = fd
	return fd, nil
}

// idmapUserns is a descriptor of a new user namespace in which the starter's user and group
// are host's: the mapping of the volumes' mounts. A process (usernsHolder, else init) holds
// it while it is opened; sp starts it when not nil.
func idmapUserns(init string, sp *Spawner, host HostIDs) (int, error) {
	path, arg0 := init, usernsHolderArg0
	if _, err := os.Stat(usernsHolder); err == nil {
		path, arg0 = usernsHolder, "cat"
	}
	stdin, held, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	holder := &exec.Cmd{
		Path:  path,
		Args:  []string{arg0},
		Env:   []string{},
		Stdin: stdin,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: int(host.UID), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: int(host.GID), Size: 1}},
		},
	}
	// Its stdin ends when this process does, and the holder with it.
	var proc *os.Process
	if sp != nil {
		proc, err = sp.start(holder)
	} else if err = holder.Start(); err == nil {
		proc = holder.Process
	}
	stdin.Close()
	if err != nil {
		held.Close()
		return -1, fmt.Errorf("making the volumes' user namespace: %w", err)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", proc.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	// The holder ends once its namespace is open (or could not be).
	held.Close()
	ps, werr := proc.Wait()
	if werr == nil && !ps.Success() {
		werr = &exec.ExitError{ProcessState: ps}
	}
	if err == nil && werr != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("the volumes' user namespace: %w", werr)
	}
	if err != nil {
		return -1, fmt.Errorf("opening the volumes' user namespace: %w", err)
	}
	return fd, nil
}

// attachMount shows the detached mount fd at target of the root, making the mount point as
// the mount's root is: a directory or a file.
func attachMount(root, target string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	at, err := mountPoint(root, target, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if err != nil {
		return err
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// CheckIdmap tells why the file system of dir cannot be shown to a sandbox of host's through
// an idmapped mount, if it cannot; it mounts nothing and writes nothing. init is as
// NewCommand's.
func CheckIdmap(dir, init string, host HostIDs) error {
	userns, err := idmapUserns(init, nil, host)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(userns) }()
	f, err := idmappedMount(Mount{Source: dir, Target: "/", ReadOnly: true}, userns)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return f.Close()
}
