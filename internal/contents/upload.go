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
// upload removes the abandoned ones.
const uploadsDir = metaDir + "/uploads"

// uploadState is the state file of an upload in progress.
type uploadState struct {
	Path    string    `json:"path"`
	Chunk   int       `json:"chunk"`
	Size    int64     `json:"size"`
	Updated time.Time `json:"updated"`
}

func uploadKey(p string) string {
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:16])
}

func (s *Store) saveChunk(ctx context.Context, p string, m *jupyter.SaveModel) (*jupyter.ContentsModel, error) {
	chunk := *m.Chunk
	switch {
	case m.Type != jupyter.TypeFile:
		return nil, invalid(`File type "%s" is not supported for large file transfer`, m.Type)
	case len(m.Content) == 0 || string(m.Content) == "null":
		return nil, invalid("No file content provided")
	case chunk == 0 || chunk < -1:
		return nil, invalid("Invalid chunk number %d", chunk)
	case p == "":
		return nil, invalid("%s is a directory", p)
	}
	data, err := fileBytes(p, m)
	if err != nil {
		return nil, err
	}
	key := uploadKey(p)
	now := s.clock.Now()
	var st uploadState
	if chunk == 1 {
		s.sweepUploads(now)
		if err := s.root.MkdirAll(uploadsDir, 0o700); err != nil {
			return nil, fsError(p, err)
		}
		if _, isDir, err := s.Exists(ctx, p); err != nil {
			return nil, err
		} else if isDir {
			return nil, invalid("%s is a directory", p)
		}
		dir, _ := splitPath(p)
		if fi, err := s.root.Stat(osName(dir)); err != nil || !fi.IsDir() {
			return nil, notFound("No such directory: %s", dir)
		}
		st = uploadState{Path: p}
	} else {
		if st, err = s.uploadState(key, p, now); err != nil {
			return nil, err
		}
		if chunk == st.Chunk {
			return s.partModel(p, key)
		}
		if chunk > 0 && chunk != st.Chunk+1 {
			return nil, invalid("Chunk %d of %s is out of order: expected chunk %d", chunk, p, st.Chunk+1)
		}
	}
	if st.Size+int64(len(data)) > s.opts.MaxUploadSize {
		s.dropUpload(key)
		return nil, domainerr.New(domainerr.ErrTooLarge, "Upload of %s exceeds the limit of %d bytes", p, s.opts.MaxUploadSize)
	}
	if err := s.appendPart(key, st.Size, chunk == 1, data); err != nil {
		return nil, fsError(p, err)
	}
	st.Chunk, st.Size, st.Updated = chunk, st.Size+int64(len(data)), now
	if chunk == -1 {
		if err := s.publishUpload(p, key); err != nil {
			return nil, err
		}
		s.dropUpload(key)
		return s.modelOf(p)
	}
	state, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	if err := s.writeFile(uploadsDir+"/"+key+".json", false, writeBytes(state)); err != nil {
		return nil, err
	}
	return s.partModel(p, key)
}

// uploadState reads the state of the upload to p, which must be in progress and not stale.
func (s *Store) uploadState(key, p string, now time.Time) (uploadState, error) {
	var st uploadState
	data, err := s.root.ReadFile(uploadsDir + "/" + key + ".json")
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil || st.Path != p {
		return st, &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "No upload of " + p + " in progress: chunk 1 starts one", Err: err}
	}
	if now.Sub(st.Updated) > s.opts.UploadTTL {
		s.dropUpload(key)
		return st, invalid("The upload of %s was abandoned: start again with chunk 1", p)
	}
	return st, nil
}

// appendPart writes data at offset size of the partial file, cutting off whatever a failed
// write left after size, and syncs it.
func (s *Store) appendPart(key string, size int64, first bool, data []byte) error {
	flags := os.O_WRONLY
	if first {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := s.root.OpenFile(uploadsDir+"/"+key+".part", flags, 0o666)
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

// publishUpload moves the complete partial file over the target, keeping the target's
// permissions, and syncs the target's directory. A target on another file system than the
// root gets a copy, written atomically.
func (s *Store) publishUpload(p, key string) error {
	target, err := s.realPath(p)
	if err != nil {
		return err
	}
	dir, name := splitPath(target)
	part := key + ".part"
	ud, err := s.openDir(uploadsDir)
	if err != nil {
		return fsError(p, err)
	}
	defer ud.Close()
	td, err := s.openDir(dir)
	if err != nil {
		return parentError(dir, err)
	}
	defer td.Close()
	err = withFD(ud, func(ufd int) error {
		return withFD(td, func(tfd int) error {
			if old, err := fstatat(tfd, name); err == nil {
				if old.isDir() {
					return invalid("%s is a directory", p)
				}
				if err := unix.Fchmodat(ufd, part, old.perm(), 0); err != nil {
					return fsError(p, err)
				}
				// As in writeTemp: only a privileged server can keep the owner.
				_ = unix.Fchownat(ufd, part, int(old.uid), int(old.gid), unix.AT_SYMLINK_NOFOLLOW)
			}
			if err := unix.Renameat(ufd, part, tfd, name); err != nil {
				return err
			}
			return fsError(p, unix.Fsync(tfd))
		})
	})
	if !errors.Is(err, unix.EXDEV) {
		return fsError(p, err)
	}
	in, err := s.root.Open(uploadsDir + "/" + part)
	if err != nil {
		return fsError(p, err)
	}
	defer in.Close()
	return s.writeFile(target, false, func(w *os.File) error {
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

func (s *Store) dropUpload(key string) {
	// Best effort: the sweep removes whatever remains.
	_ = s.root.Remove(uploadsDir + "/" + key + ".part")
	_ = s.root.Remove(uploadsDir + "/" + key + ".json")
}

// sweepUploads removes uploads idle for longer than UploadTTL, and leftovers of crashes.
func (s *Store) sweepUploads(now time.Time) {
	d, err := s.openDir(uploadsDir)
	if err != nil {
		return
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return
	}
	for _, n := range names {
		var stale bool
		if key, ok := strings.CutSuffix(n, ".json"); ok {
			var st uploadState
			data, err := s.root.ReadFile(uploadsDir + "/" + n)
			stale = err != nil || json.Unmarshal(data, &st) != nil || now.Sub(st.Updated) > s.opts.UploadTTL
			if stale {
				s.dropUpload(key)
			}
			continue
		}
		// A partial file without state, or a temporary file, is a crash's leftover once old.
		fi, err := s.root.Lstat(uploadsDir + "/" + n)
		if err == nil && now.Sub(fi.ModTime()) > s.opts.UploadTTL {
			if _, err := s.root.Stat(uploadsDir + "/" + strings.TrimSuffix(n, ".part") + ".json"); errors.Is(err, fs.ErrNotExist) {
				_ = s.root.Remove(uploadsDir + "/" + n)
			}
		}
	}
}
