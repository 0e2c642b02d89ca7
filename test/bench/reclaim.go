package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reclaimExecutable asks the kernel to reclaim the pages of pid's executable that pid maps
// (process_madvise(2) with MADV_PAGEOUT): what it does itself when memory runs short. The
// pages the process touches again come back; those only its start touched stay out.
func reclaimExecutable(pid int) error {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return err
	}
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return err
	}
	defer maps.Close()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer func() { _ = unix.Close(pidfd) }()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// address perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("/proc/%d/maps: %q", pid, f[0])
		}
		// One struct iovec {base, len} (64-bit): the address is the other process's, read
		// by the kernel, never by this process.
		iov := [2]uint64{start, end - start}
		if _, _, errno := unix.Syscall6(unix.SYS_PROCESS_MADVISE, uintptr(pidfd), uintptr(unsafe.Pointer(&iov)), 1, unix.MADV_PAGEOUT, 0, 0); errno != 0 {
			return fmt.Errorf("process_madvise %d %s: %w", pid, f[0], errno)
		}
	}
	return sc.Err()
}
