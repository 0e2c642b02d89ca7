package contents

import (
	"container/list"
	"encoding/json"
	"sync"
)

// DefaultNotebookCacheBytes bounds the notebook contents a store keeps ready to serve.
const DefaultNotebookCacheBytes = 64 << 20

// notebookCache keeps the content of notebooks as Jupyter's get serves it (lines joined,
// ids added, upgraded), with its validation message and, once asked, its hash, by the
// version of the file it was made from (versionKey: a save renames a new inode over the
// file, a write in place changes its modification time). An unchanged notebook is then
// served without reading, transforming or validating it again: the work, and the garbage,
// of a read of a notebook of plots is megabytes, and the collections that garbage causes are
// what made a read's p99 at 64 clients a hundred times its median. Entries are immutable once
// made; the least recently used go first when the bytes exceed the bound, and a notebook
// over an eighth of the bound is not kept.
type notebookCache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	lru   *list.List // of *cachedNotebook, the most recently used first
	items map[versionKey]*list.Element
}

type cachedNotebook struct {
	key     versionKey
	content json.RawMessage
	msg     string
	// hash is the SHA-256 of the file's bytes, hex, once a read asked for it.
	hash string
}

func newNotebookCache(maxBytes int64) *notebookCache {
	return &notebookCache{max: maxBytes, lru: list.New(), items: map[versionKey]*list.Element{}}
}

func (c *notebookCache) get(k versionKey) (cachedNotebook, bool) {
	if c.max <= 0 {
		return cachedNotebook{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return cachedNotebook{}, false
	}
	c.lru.MoveToFront(e)
	return *e.Value.(*cachedNotebook), true
}

// addHash adds the hash of the file's bytes to the entry of k, if one is kept.
func (c *notebookCache) addHash(k versionKey, hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		// Readers hold copies of entries: replacing the hash changes none of theirs.
		e.Value.(*cachedNotebook).hash = hash
	}
}

// put keeps n, unless it is kept already.
func (c *notebookCache) put(n cachedNotebook) {
	size := int64(len(n.content) + len(n.msg) + 256)
	if c.max <= 0 || size > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[n.key]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.items[n.key] = c.lru.PushFront(&n)
	c.bytes += size
	for c.bytes > c.max {
		last := c.lru.Back()
		victim := last.Value.(*cachedNotebook)
		c.lru.Remove(last)
		delete(c.items, victim.key)
		c.bytes -= int64(len(victim.content) + len(victim.msg) + 256)
	}
}
