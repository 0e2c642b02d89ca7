package contents

import "sync"

// syncedFiles remembers the versions of files this store synced itself, as it wrote them or
// for a checkpoint, so that a checkpoint linking such a file need not sync its data again.
// An fdatasync of a file whose data is on disk still costs a journal commit on ext4 when its
// inode changed otherwise (a rename, the link count of earlier checkpoints): about a third of
// a checkpoint's time.
//
// A version is a versionKey (inode, size, modification time): for a file the store wrote, as
// they were when its sync returned and before the file got its name, so nothing else could
// have written it yet; for a file synced for a checkpoint, as they were before that sync.
// Any later write changes the modification time, with one limit: the kernel stamps files
// with a clock that may advance only every few milliseconds, so a same-size write in place
// within that tick of the store's own write goes unseen, and a checkpoint made before the
// kernel writes that data back (within 30 s) could lose it, with the file itself, to a crash.
// Only this store's writes are known: another replica's, or a kernel's, are synced at the
// checkpoint as before.
type syncedFiles struct {
	mu sync.Mutex
	m  map[versionKey]struct{}
}

// maxSyncedFiles bounds the record; past it, it starts again empty (a version forgotten is
// only synced once more).
const maxSyncedFiles = 4096

// note records st as a version of a file on disk.
func (sf *syncedFiles) note(st statInfo) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.m == nil || len(sf.m) >= maxSyncedFiles {
		sf.m = make(map[versionKey]struct{})
	}
	sf.m[keyOf(st)] = struct{}{}
}

// holds says st is a version noted as on disk.
func (sf *syncedFiles) holds(st statInfo) bool {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	_, ok := sf.m[keyOf(st)]
	return ok
}
