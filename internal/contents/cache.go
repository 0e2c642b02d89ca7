package contents

import "sync"

// validationCacheSize bounds the validation results kept: an entry is a few dozen bytes.
const validationCacheSize = 4096

// versionKey identifies a version of a file: the store replaces files by renaming new
// inodes over them, and any write in place changes the modification time, to the nanosecond.
// A key therefore names one content, the same on every replica, which is what makes caching a
// pure function of the content safe (validation results, served models), and what the record
// of synced versions is kept by (synced.go). The change time (ctime) is left out, as in etagOf: a
// checkpoint's link to the file changes it without changing a byte.
type versionKey struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

func keyOf(st statInfo) versionKey {
	return versionKey{dev: st.dev, ino: st.ino, size: st.size, mtime: st.mtime.UnixNano()}
}

// validationCache remembers the validation message of notebooks already read or written:
// validating against the schema costs several times more than reading, and Jupyter
// validates on every read.
type validationCache struct {
	mu      sync.Mutex
	max     int
	entries map[versionKey]string
}

func newValidationCache(maxEntries int) *validationCache {
	return &validationCache{max: maxEntries, entries: make(map[versionKey]string, maxEntries)}
}

func (c *validationCache) get(k versionKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg, ok := c.entries[k]
	return msg, ok
}

// put adds an entry, evicting an arbitrary one when full: entries of replaced files are
// never asked for again, and any victim is as good as another to bound memory.
func (c *validationCache) put(k versionKey, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		for victim := range c.entries {
			delete(c.entries, victim)
			break
		}
	}
	c.entries[k] = msg
}
