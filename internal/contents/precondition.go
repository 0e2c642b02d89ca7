package contents

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// Precondition is what a conditional save (SaveIf) requires of the file it replaces: that it
// is still the version the client loaded, named by HTTP's If-Match or If-Unmodified-Since.
// The zero Precondition requires nothing. A file that no longer exists fails any
// precondition. Jupyter saves unconditionally, so that of two clients saving from the same
// version the later silently wins; a conditional save is refused instead.
type Precondition struct {
	// IfMatch lists entity tags, quotes included, of which the file's (ContentsModel.ETag)
	// must be one; "*" matches any existing file. Comparison is strong, as If-Match's is, so a
	// weak tag (W/"...") never matches. When not nil, IfUnmodifiedSince is ignored, as HTTP
	// says.
	IfMatch []string
	// IfUnmodifiedSince, unless zero, is a time the file must not have been modified after,
	// compared at the second precision of HTTP dates: the file's modification time without
	// its fraction of a second must not be after it. Two saves in the same second look alike
	// to it; IfMatch tells them apart.
	IfUnmodifiedSince time.Time
}

// IsZero reports whether p requires nothing.
func (p Precondition) IsZero() bool { return p.IfMatch == nil && p.IfUnmodifiedSince.IsZero() }

// check is p judged against the file at the API path path, whose stat is st if it exists.
func (p Precondition) check(path string, st statInfo, exists bool) error {
	if !exists {
		return &domainerr.Error{Kind: domainerr.ErrConflict, Message: path + " was deleted since it was loaded", Reason: reasonChanged}
	}
	var ok bool
	if p.IfMatch != nil {
		ok = slices.Contains(p.IfMatch, "*") || slices.Contains(p.IfMatch, etagOf(st))
	} else {
		ok = !st.mtime.Truncate(time.Second).After(p.IfUnmodifiedSince.Truncate(time.Second))
	}
	if !ok {
		return &domainerr.Error{Kind: domainerr.ErrConflict, Message: path + " has changed on disk since it was loaded", Reason: reasonChanged}
	}
	return nil
}

// reasonChanged is the reason of a failed precondition, which clients can tell from other
// conflicts by.
const reasonChanged = "changed on disk"

// etagOf is the strong entity tag of the version of a file that st describes. Every save
// writes a new file and renames it over the old one, so the inode tells versions apart;
// the size and the modification time (to the nanosecond) tell apart versions written in
// place (by a kernel). The change time is left out: a checkpoint links the file's inode,
// which changes it without changing the version (checkpointshare.go), and a client holding
// the tag must still be able to save; what it no longer tells apart is a write in place that
// keeps the size and sets the modification time back to the nanosecond, which takes doing on
// purpose. The device is left out: a volume that replicas share has a different device
// number on each machine. The fields are hashed so as not to publish inode numbers.
func etagOf(st statInfo) string {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], st.ino)
	binary.LittleEndian.PutUint64(b[8:], uint64(st.size))
	binary.LittleEndian.PutUint64(b[16:], uint64(st.mtime.UnixNano()))
	sum := sha256.Sum256(b[:])
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}
