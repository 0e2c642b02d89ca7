package contents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// Chunked uploads (JupyterLab sends files over 1 MB as chunks 1, 2, ..., and -1 for the last)
// are assembled in .nbkube/uploads/, not in the target as Jupyter does, so that the target
// changes only when the last chunk arrives, atomically. An upload is named by a hash of its
// target path, so that each chunk may reach any replica. Its state file records the last
// chunk and the size written after it: a chunk repeated after a lost reply is acknowledged
// without being written twice, a chunk out of order is refused, and a chunk that a crash cut
// short is truncated away by the next one. Uploads idle for UploadTTL are abandoned; each new
// upload removes the abandoned ones, and so does SweepUploads, which the API server runs on a
// timer. A view made by ForUploader records its user in the state and refuses chunks once
// that user's uploads in progress in the root would hold more than their allowance: partial
// files take room on the volume that no quota of the user's files sees until the last chunk.
const uploadsDir = metaDir + "/uploads"

// uploadsLock is the file whose flock makes a check of an allowance and the reservation of
// room in it one step (see reserve). Not in uploadsDir, whose sweep removes what it
// does not know.
const uploadsLock = metaDir + "/uploads.lock"

// uploadState is the state file of an upload in progress.
type uploadState struct {
	Path    string    `json:"path"`
	Chunk   int       `json:"chunk"`
	Size    int64     `json:"size"`
	Updated time.Time `json:"updated"`
	// User sent the last chunk: the upload counts against their allowance (see ForUploader).
	User string `json:"user,omitempty"`
	// Reserved is the size the upload will have once the chunk being written has landed:
	// room taken from User's allowance before the chunk is written (see reserveAllowance).
	Reserved int64 `json:"reserved,omitempty"`
}

// held is the room of its user's allowance the upload holds: its size, or more while a chunk
// is being written.
func (st uploadState) held() int64 { return max(st.Size, st.Reserved) }

// uploads are the chunked uploads in progress in a tree, beside the store as its checkpoints
// and trash are: the store checks a chunk's model and target and answers the models, the
// uploads keep the state and the partial file, and move the file into place.
type uploads struct {
	*tree
	clock clock.PassiveClock
	// maxSize and ttl are MaxUploadSize and UploadTTL.
	maxSize int64
	ttl     time.Duration
	// uploader and allowance are whose chunked uploads this view receives and how many bytes
	// their uploads in progress may hold (see ForUploader).
	uploader  string
	allowance int64
}

func uploadKey(p string) string {
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:16])
}

func (s *Store) saveChunk(ctx context.Context, p string, m *jupyter.SaveModel) (*jupyter.ContentsModel, error) {
	chunk := *m.Chunk
	switch {
	case m.Type != jupyter.TypeFile:
		return nil, domainerr.Invalid(`File type "%s" is not supported for large file transfer`, m.Type)
	case len(m.Content) == 0 || string(m.Content) == "null":
		return nil, domainerr.Invalid("No file content provided")
	case chunk == 0 || chunk < -1:
		return nil, domainerr.Invalid("Invalid chunk number %d", chunk)
	case p == "":
		return nil, domainerr.Invalid("%s is a directory", p)
	}
	data, err := fileBytes(p, m)
	if err != nil {
		return nil, err
	}
	u := s.uploads
	key := uploadKey(p)
	now := u.clock.Now()
	var st uploadState
	if chunk == 1 {
		// Best effort: a failed sweep is for the timer's sweep to report.
		_ = u.sweep(ctx)
		if err := u.root.MkdirAll(uploadsDir, 0o700); err != nil {
			return nil, fsError(p, err)
		}
		if _, isDir, err := s.Exists(ctx, p); err != nil {
			return nil, err
		} else if isDir {
			return nil, domainerr.Invalid("%s is a directory", p)
		}
		dir, _ := splitPath(p)
		if fi, err := s.root.Stat(osName(dir)); err != nil || !fi.IsDir() {
			return nil, domainerr.NotFound("No such directory: %s", dir)
		}
		st = uploadState{Path: p}
	} else {
		if st, err = u.state(key, p, now); err != nil {
			return nil, err
		}
		if chunk == st.Chunk {
			return s.partModel(p, key)
		}
		if chunk > 0 && chunk != st.Chunk+1 {
			return nil, domainerr.Invalid("Chunk %d of %s is out of order: expected chunk %d", chunk, p, st.Chunk+1)
		}
	}
	if st, err = u.add(p, key, st, chunk, data, now); err != nil {
		return nil, err
	}
	if chunk == -1 {
		if err := u.publish(p, key); err != nil {
			return nil, err
		}
		u.drop(key)
		return s.modelOf(p)
	}
	if err := u.writeState(key, st); err != nil {
		return nil, err
	}
	return s.partModel(p, key)
}

// add writes data, chunk number chunk of the upload key to p whose state is st, within the
// size limit and the uploader's allowance (the upload is dropped beyond either), and returns
// the state after it, which the caller writes.
func (u *uploads) add(p, key string, st uploadState, chunk int, data []byte, now time.Time) (uploadState, error) {
	size := st.Size + int64(len(data))
	if size > u.maxSize {
		u.drop(key)
		return st, domainerr.New(domainerr.ErrTooLarge, "Upload of %s exceeds the limit of %d bytes", p, u.maxSize)
	}
	if err := u.reserve(p, key, st, size, now); err != nil {
		u.drop(key)
		return st, err
	}
	if err := u.appendPart(key, st.Size, chunk == 1, data); err != nil {
		if u.allowance > 0 {
			// Best effort: the room reserved goes back; otherwise it is held until the next
			// chunk or the upload is abandoned.
			_ = u.writeState(key, st)
		}
		return st, fsError(p, err)
	}
	st.Chunk, st.Size, st.Updated, st.User = chunk, size, now, u.uploader
	return st, nil
}

func (u *uploads) writeState(key string, st uploadState) error {
	state, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return u.writeFile(uploadsDir+"/"+key+".json", false, writeBytes(state))
}

// state reads the state of the upload to p, which must be in progress and not stale.
func (u *uploads) state(key, p string, now time.Time) (uploadState, error) {
	var st uploadState
	data, err := u.readStateFile(uploadsDir + "/" + key + ".json")
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil || st.Path != p {
		return st, &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "No upload of " + p + " in progress: chunk 1 starts one", Err: err}
	}
	if now.Sub(st.Updated) > u.ttl {
		u.drop(key)
		return st, domainerr.Invalid("The upload of %s was abandoned: start again with chunk 1", p)
	}
	return st, nil
}

// appendPart writes data at offset size of the partial file, cutting off whatever a failed
// write left after size, and syncs it.
func (u *uploads) appendPart(key string, size int64, first bool, data []byte) error {
	flags := os.O_WRONLY
	if first {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := u.root.OpenFile(uploadsDir+"/"+key+".part", flags, 0o666)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, size); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// publish moves the complete partial file over the target, keeping the target's
// permissions, and syncs the target's directory. A target on another file system than the
// root gets a copy, written atomically.
func (u *uploads) publish(p, key string) error {
	target, err := u.realPath(p)
	if err != nil {
		return err
	}
	dir, name := splitPath(target)
	part := key + ".part"
	err = u.withDirs(uploadsDir, func(err error) error { return fsError(p, err) }, dir, func(ufd, tfd int) error {
		if old, err := fstatat(tfd, name); err == nil {
			if old.isDir() {
				return domainerr.Invalid("%s is a directory", p)
			}
			if err := unix.Fchmodat(ufd, part, old.perm(), 0); err != nil {
				return fsError(p, err)
			}
			// As in writeTemp: only a privileged server can keep the owner.
			_ = unix.Fchownat(ufd, part, int(old.uid), int(old.gid), unix.AT_SYMLINK_NOFOLLOW)
		}
		// Under the save lock, as a save's rename: a conditional save must not check the
		// target and then replace this upload instead.
		if err := u.withSaveLock(false, func() error { return unix.Renameat(ufd, part, tfd, name) }); err != nil {
			return err
		}
		return fsError(p, unix.Fsync(tfd))
	})
	if !errors.Is(err, unix.EXDEV) {
		return fsError(p, err)
	}
	in, err := u.root.Open(uploadsDir + "/" + part)
	if err != nil {
		return fsError(p, err)
	}
	defer in.Close()
	return u.writeFile(target, false, func(w *os.File) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// partModel is the model of a file being uploaded: Jupyter's target file holds the chunks
// received so far, ours is the partial file.
func (s *Store) partModel(p, key string) (*jupyter.ContentsModel, error) {
	fi, err := s.root.Stat(uploadsDir + "/" + key + ".part")
	if err != nil {
		return nil, fsError(p, err)
	}
	return s.model(p, infoOf(fi), jupyter.TypeFile, true), nil
}

func (u *uploads) drop(key string) {
	// Best effort: the sweep removes whatever remains.
	_ = u.remove(key)
}

// remove removes the partial and state files of the upload key; either may be gone.
func (u *uploads) remove(key string) error {
	var errs []error
	for _, ext := range []string{".part", ".json"} {
		if err := u.root.Remove(uploadsDir + "/" + key + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fsError("uploads", err))
		}
	}
	return errors.Join(errs...)
}

// ForUploader returns a view of s whose chunked uploads are user's: their state names user,
// and a chunk is refused (domainerr.ErrTooLarge, the upload dropped) when the uploads of user
// in progress in this root, stale ones left out, would hold more than allowance bytes with it.
// An allowance of 0 or less sets no limit beyond MaxUploadSize. Users uploading into the
// same root (homes off) each have their own allowance. A chunk reserves its room before it
// is written, checking and reserving under a lock of the root that replicas share, so that
// concurrent chunks, through one replica or several, never hold more together. The API
// server gives each chunk such a view of its user's root (the volume's, or their home's),
// with the allowance their policy sets.
//
// The view shares everything with s, its root included: close s (or the Sub view it came
// from), not the view, whose Close does nothing.
func (s *Store) ForUploader(user string, allowance int64) *Store {
	v, u := *s, *s.uploads
	u.uploader, u.allowance = user, allowance
	v.uploads, v.borrowed = &u, true
	return &v
}

// reserve reserves size bytes of the uploader's allowance for the upload to p, named
// key, whose state is st, before its chunk is written; it refuses the upload if with them
// the uploader's uploads in progress would hold more than their allowance. The check and the
// reservation (the upload's state recording size) are one step under uploadsLock, as a
// kernel's quota reservation is one write to the ledger: checked apart, chunks arriving at
// once each found the others' room free and together held half as much again.
func (u *uploads) reserve(p, key string, st uploadState, size int64, now time.Time) error {
	if u.allowance <= 0 {
		return nil
	}
	if err := u.root.MkdirAll(uploadsDir, 0o700); err != nil {
		return fsError(p, err)
	}
	return u.withLock(uploadsLock, true, func() error {
		held, err := u.held(key, now)
		if err != nil {
			return err
		}
		if held+size > u.allowance {
			return domainerr.New(domainerr.ErrTooLarge, "Upload of %s refused: your uploads in progress would hold %d bytes, over your upload allowance of %d bytes",
				p, held+size, u.allowance)
		}
		st.Reserved, st.Updated, st.User = size, now, u.uploader
		return u.writeState(key, st)
	})
}

// held is the bytes the uploader's uploads in progress in this root hold, but for the
// upload named except and stale ones.
func (u *uploads) held(except string, now time.Time) (int64, error) {
	d, err := u.openDir(uploadsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fsError("uploads", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, fsError("uploads", err)
	}
	var held int64
	for _, n := range names {
		key, ok := strings.CutSuffix(n, ".json")
		if !ok || key == except {
			continue
		}
		st, ok := u.readState(key)
		if ok && st.User == u.uploader && now.Sub(st.Updated) <= u.ttl {
			held += st.held()
		}
	}
	return held, nil
}

// readState reads the state file of the upload key, or false when it is gone or not
// one of ours.
func (u *uploads) readState(key string) (uploadState, bool) {
	var st uploadState
	data, err := u.readStateFile(uploadsDir + "/" + key + ".json")
	return st, err == nil && json.Unmarshal(data, &st) == nil
}

// SweepUploads removes the chunked uploads of this root (a home's own with Sub) idle for
// longer than UploadTTL, and the leftovers of crashes. Each new upload sweeps too; a timer
// is needed as well so that an abandoned upload does not hold room, and its user's
// allowance, while nobody starts another. Replicas may sweep at the same time.
func (s *Store) SweepUploads(ctx context.Context) error {
	return s.uploads.sweep(ctx)
}

// sweep is SweepUploads.
func (u *uploads) sweep(ctx context.Context) error {
	now := u.clock.Now()
	d, err := u.openDir(uploadsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError("uploads", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fsError("uploads", err)
	}
	var errs []error
	for _, n := range names {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if key, ok := strings.CutSuffix(n, ".json"); ok {
			if st, ok := u.readState(key); !ok || now.Sub(st.Updated) > u.ttl {
				if err := u.remove(key); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		// A partial file without state, or a temporary file, is a crash's leftover once old.
		fi, err := u.root.Lstat(uploadsDir + "/" + n)
		if err == nil && now.Sub(fi.ModTime()) > u.ttl {
			if _, err := u.root.Stat(uploadsDir + "/" + strings.TrimSuffix(n, ".part") + ".json"); errors.Is(err, fs.ErrNotExist) {
				if err := u.root.Remove(uploadsDir + "/" + n); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fsError("uploads", err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
