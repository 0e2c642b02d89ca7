package podns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// devices are the character devices a container's /dev has, bound from the host's.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// buildRoot makes the sandbox's file system in its mount namespace and moves into it.
func buildRoot(s *initSpec) error {
	// Nothing done here may reach the host's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	root := s.Root
	if s.Distinct {
		root = distinctRoot
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("mounting the root: %w", err)
	}
	for _, p := range s.System {
		if err := showSystem(root, p); err != nil {
			return err
		}
	}
	for _, p := range s.Masks {
		if err := mask(root, p); err != nil {
			return err
		}
	}
	if err := makeDev(root); err != nil {
		return err
	}
	if err := mountAt(root, "/proc", "proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	// sysfs is the network namespace's own; a machine that refuses it leaves /sys out.
	_ = mountAt(root, "/sys", "sysfs", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	type volume struct {
		Mount
		// fd is the mount the host made for it, -1 when it is bound from its source.
		fd int
	}
	mounts := make([]volume, len(s.Mounts))
	for i, m := range s.Mounts {
		mounts[i] = volume{m, -1}
		if i < len(s.MountFDs) {
			mounts[i].fd = s.MountFDs[i]
		}
	}
	// Outer mounts first, so that a volume mounted inside another shows over it.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
	})
	covered := func(dir string) bool {
		for _, m := range mounts {
			if filepath.Clean(m.Target) == dir {
				return true
			}
		}
		return false
	}
	if !covered("/tmp") {
		if err := mountAt(root, "/tmp", "tmpfs", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return err
		}
	}
	for _, m := range mounts {
		var err error
		if m.fd >= 0 {
			err = attachMount(root, filepath.Clean(m.Target), m.fd)
		} else {
			err = bind(root, m.Source, filepath.Clean(m.Target), m.ReadOnly)
		}
		if err != nil {
			return fmt.Errorf("mounting %s at %s: %w", m.Source, m.Target, err)
		}
	}
	return pivot(root)
}

// showSystem shows the host path p read-only at p, or makes the link p is again.
func showSystem(root, p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			return err
		}
		return os.Symlink(target, filepath.Join(root, p))
	}
	if err := bind(root, p, p, true); err != nil {
		return fmt.Errorf("showing %s: %w", p, err)
	}
	return nil
}

// mask hides the host path p where the sandbox shows it.
func mask(root, p string) error {
	fi, err := os.Lstat(filepath.Join(root, p))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	target := filepath.Join(root, p)
	switch {
	case fi.IsDir():
		err = unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k")
	case fi.Mode().IsRegular():
		err = unix.Mount("/dev/null", target, "", unix.MS_BIND, "")
		if err == nil {
			err = setAttrs(target, true, true)
		}
	}
	if err != nil {
		return fmt.Errorf("masking %s: %w", p, err)
	}
	return nil
}

// makeDev makes /dev: a tmpfs with the usual devices, the sandbox's own pseudo-terminals and
// shared memory.
func makeDev(root string) error {
	dev := filepath.Join(root, "dev")
	if err := mountAt(root, "/dev", "tmpfs", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, d := range devices {
		if err := bindDevice(root, "/dev/"+d); err != nil {
			return fmt.Errorf("making /dev/%s: %w", d, err)
		}
	}
	for link, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"} {
		if err := os.Symlink(target, filepath.Join(dev, link)); err != nil {
			return err
		}
	}
	if err := mountAt(root, "/dev/pts", "devpts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	return mountAt(root, "/dev/shm", "shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777")
}

// mountAt mounts a new file system at p of the root, making the directory.
func mountAt(root, p, source, fstype string, flags uintptr, data string) error {
	target := filepath.Join(root, p)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", fstype, p, err)
	}
	return nil
}

// bind shows the host path source (with what is mounted under it) at target of the root,
// never with set-user-ID programs or device files of its own.
func bind(root, source, target string, ro bool) error {
	return bindAs(root, source, target, ro, false)
}

// bindDevice shows the host's device file p at p.
func bindDevice(root, p string) error { return bindAs(root, p, p, false, true) }

func bindAs(root, source, target string, ro, device bool) error {
	fi, err := os.Stat(source)
	if err != nil {
		return err
	}
	at, err := mountPoint(root, target, fi.IsDir())
	if err != nil {
		return err
	}
	if err := unix.Mount(source, at, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return setAttrs(at, ro, device)
}

// mountPoint makes target of the root a directory, or an empty file, to mount on, and
// returns its path.
func mountPoint(root, target string, dir bool) (string, error) {
	at := filepath.Join(root, target)
	var err error
	switch _, statErr := os.Stat(at); {
	case dir:
		err = os.MkdirAll(at, 0o755)
	case statErr == nil:
		// A file there already (one of the system's, under a read-only directory): mounted
		// over as it is.
	default:
		err = os.MkdirAll(filepath.Dir(at), 0o755)
		if err == nil {
			var f *os.File
			if f, err = os.OpenFile(at, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("making the mount point: %w", err)
	}
	return at, nil
}

// setAttrs makes the mount at path and those under it nosuid, read-only if ro, and nodev
// unless it is a device file.
func setAttrs(path string, ro, device bool) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID}
	if ro {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if !device {
		attr.Attr_set |= unix.MOUNT_ATTR_NODEV
	}
	return unix.MountSetattr(-1, path, unix.AT_RECURSIVE, attr)
}

// pivot makes root the root of the mount namespace, with the host's file system gone from it,
// and the root itself read-only.
func pivot(root string) error {
	old := filepath.Join(root, ".old-root")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old-root", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's file system: %w", err)
	}
	if err := os.Remove("/.old-root"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	return nil
}
