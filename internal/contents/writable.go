package contents

import (
	"os"

	"golang.org/x/sys/unix"
)

// writability answers "writable" for the entries of one directory listing with as few system
// calls as it can: a listing of 200 notebooks would otherwise spend one access(2) per entry on
// top of its stat. Where the answer follows from what is known (the file system is read-only;
// the server runs as root; the server owns the file, whose owner bits then decide even with
// ACLs), it is computed; otherwise access(2) decides, as Jupyter's os.access does.
type writability struct {
	euid     int
	readOnly bool
}

func newWritability(dfd int) writability {
	w := writability{euid: os.Geteuid()}
	var sfs unix.Statfs_t
	if unix.Fstatfs(dfd, &sfs) == nil && sfs.Flags&unix.ST_RDONLY != 0 {
		w.readOnly = true
	}
	return w
}

func (w writability) writable(dfd int, name string, st statInfo) bool {
	switch {
	case w.readOnly:
		return false
	case w.euid == 0:
		return true
	case int(st.uid) == w.euid:
		return st.mode&0o200 != 0
	default:
		return accessible(dfd, name, unix.W_OK)
	}
}
