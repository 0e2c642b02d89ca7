package contents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// Checkpoints keep Jupyter's layout: copies of a file in .ipynb_checkpoints/ next to it,
// named <base>-<id><ext>. Jupyter keeps one, with id "checkpoint"; the store keeps up to
// MaxCheckpoints, with ids that start with their UTC creation time to the microsecond, so
// that they sort by age, and end with random digits, so that two replicas never make the
// same one. Jupyter's own "checkpoint" is listed and usable too. Lists are oldest first,
// newest last: that is what clients take as the latest (the classic notebook's
// last_checkpoint and JupyterLab's restore without an id take the last element).
var checkpointIDPattern = regexp.MustCompile(`^(checkpoint|[0-9]{8}T[0-9]{12}Z-[0-9a-f]{8})$`)

func (s *Store) newCheckpointID(t time.Time) string {
	return fmt.Sprintf("%s%06dZ-%s", t.UTC().Format(checkpointTimeLayout), t.Nanosecond()/1000, randomHex(4))
}

const checkpointTimeLayout = "20060102T150405"

// checkpointTime is when a checkpoint was made: the clock's time in its id, or, for Jupyter's
// "checkpoint", the file's modification time (Jupyter's copy keeps the file's own).
func checkpointTime(id string, mtime time.Time) time.Time {
	if len(id) < len(checkpointTimeLayout)+6 {
		return mtime
	}
	t, err := time.Parse(checkpointTimeLayout, id[:len(checkpointTimeLayout)])
	if err != nil {
		return mtime
	}
	var micros int
	for _, c := range id[len(checkpointTimeLayout) : len(checkpointTimeLayout)+6] {
		micros = micros*10 + int(c-'0')
	}
	return t.Add(time.Duration(micros) * time.Microsecond)
}

// checkpointPath is where checkpoint id of the file p lives.
func checkpointPath(p, id string) string {
	dir, name := splitPath(p)
	base, ext := splitExt(name)
	return joinPath(joinPath(dir, checkpointDir), base+"-"+id+ext)
}

type checkpointFile struct {
	id, path string
	made     time.Time
}

// checkpoints lists the checkpoints of p, oldest first.
func (s *Store) checkpoints(p string) ([]checkpointFile, error) {
	dir, name := splitPath(p)
	base, ext := splitExt(name)
	cdir := joinPath(dir, checkpointDir)
	var list []checkpointFile
	err := s.listDir(cdir, func(dfd int, names []string) {
		for _, n := range names {
			if len(n) < len(base)+1+len(ext) || !strings.HasPrefix(n, base+"-") || !strings.HasSuffix(n, ext) {
				continue
			}
			id := n[len(base)+1 : len(n)-len(ext)]
			if !checkpointIDPattern.MatchString(id) {
				continue
			}
			if st, err := fstatat(dfd, n); err == nil && st.isRegular() {
				list = append(list, checkpointFile{id: id, path: joinPath(cdir, n), made: checkpointTime(id, st.mtime)})
			}
		}
	})
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fsError(p, err)
	}
	slices.SortFunc(list, func(a, b checkpointFile) int {
		if c := a.made.Compare(b.made); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return list, nil
}

// ListCheckpoints is GET /api/contents/<path>/checkpoints, oldest first.
func (s *Store) ListCheckpoints(_ context.Context, path string) ([]jupyter.Checkpoint, error) {
	p, err := s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return nil, err
	}
	list, err := s.checkpoints(p)
	if err != nil {
		return nil, err
	}
	out := make([]jupyter.Checkpoint, 0, len(list))
	for _, c := range list {
		out = append(out, jupyter.Checkpoint{ID: c.id, LastModified: jupyter.Time{Time: c.made}})
	}
	return out, nil
}

// CreateCheckpoint is POST /api/contents/<path>/checkpoints: it keeps the file's version
// (a reflink, a link or a copy: see checkpointshare.go), dated by the clock, and drops the oldest checkpoints beyond MaxCheckpoints.
func (s *Store) CreateCheckpoint(_ context.Context, path string) (*jupyter.Checkpoint, error) {
	p, err := s.check(path, "Cannot create a checkpoint of hidden file '%s'")
	if err != nil {
		return nil, err
	}
	return s.createCheckpoint(p)
}

func (s *Store) createCheckpoint(p string) (*jupyter.Checkpoint, error) {
	in, err := s.root.OpenFile(osName(p), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fsError(p, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, invalid("Cannot create a checkpoint of %s: not a file", p)
	}
	dir, _ := splitPath(p)
	if err := s.root.Mkdir(joinPath(dir, checkpointDir), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fsError(p, err)
	}
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	id := s.newCheckpointID(now)
	cp := checkpointPath(p, id)
	linked, err := s.linkCheckpoint(in, infoOf(fi), cp)
	if err != nil {
		return nil, fsError(p, err)
	}
	if linked {
		s.unshareLater(p)
	} else {
		err = s.writeFile(cp, true, func(w *os.File) error {
			_, err := io.Copy(w, in)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if err := s.pruneCheckpoints(p); err != nil {
		return nil, err
	}
	return &jupyter.Checkpoint{ID: id, LastModified: jupyter.Time{Time: now}}, nil
}

// pruneCheckpoints drops the oldest checkpoints of p beyond MaxCheckpoints. Replicas pruning
// at once may remove the same file twice; that is harmless.
func (s *Store) pruneCheckpoints(p string) error {
	list, err := s.checkpoints(p)
	if err != nil {
		return err
	}
	for _, c := range list[:max(0, len(list)-s.opts.MaxCheckpoints)] {
		if err := s.root.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(p, err)
		}
	}
	return nil
}

// ensureCheckpoint gives p a checkpoint if it has none, as Jupyter does on saving notebooks.
func (s *Store) ensureCheckpoint(p string) error {
	list, err := s.checkpoints(p)
	if err != nil || len(list) > 0 {
		return err
	}
	_, err = s.createCheckpoint(p)
	return err
}

// linkCheckpoint makes cp (a new checkpoint's path) the open file in without copying it,
// where the file system allows.
func (s *Store) linkCheckpoint(in *os.File, st statInfo, cp string) (bool, error) {
	cdir, name := splitPath(cp)
	d, err := s.openDir(cdir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	var linked bool
	err = withFD(d, func(cdfd int) error {
		var err error
		linked, err = s.shareCheckpoint(in, st, cdfd, name)
		return err
	})
	return linked, err
}

// checkpointFileOf validates a checkpoint id (it becomes part of a file name) and returns the
// checkpoint's path.
func (s *Store) checkpointFileOf(path, id, refusal string) (string, string, error) {
	p, err := s.check(path, refusal)
	if err != nil {
		return "", "", err
	}
	if !checkpointIDPattern.MatchString(id) {
		return "", "", notFound("Checkpoint does not exist: %s@%s", p, id)
	}
	return p, checkpointPath(p, id), nil
}

func noCheckpoint(p, id string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: fmt.Sprintf("Checkpoint does not exist: %s@%s", p, id), Err: err}
	}
	return fsError(p, err)
}

// RestoreCheckpoint is POST /api/contents/<path>/checkpoints/<id>: the file gets the
// checkpoint's content, atomically, keeping its permissions.
func (s *Store) RestoreCheckpoint(_ context.Context, path, id string) error {
	p, cp, err := s.checkpointFileOf(path, id, "Cannot restore hidden file '%s'")
	if err != nil {
		return err
	}
	in, err := s.root.Open(cp)
	if err != nil {
		return noCheckpoint(p, id, err)
	}
	defer in.Close()
	return s.writeFile(p, false, func(w *os.File) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// DeleteCheckpoint is DELETE /api/contents/<path>/checkpoints/<id>.
func (s *Store) DeleteCheckpoint(_ context.Context, path, id string) error {
	p, cp, err := s.checkpointFileOf(path, id, "Cannot delete a checkpoint of hidden file '%s'")
	if err != nil {
		return err
	}
	return noCheckpoint(p, id, s.root.Remove(cp))
}

// GetCheckpoint reads a checkpoint without restoring it: the model is that of the file p as
// it was (name and path are p's, times the checkpoint's), read-only.
func (s *Store) GetCheckpoint(_ context.Context, path, id string, o GetOptions) (*jupyter.ContentsModel, error) {
	p, cp, err := s.checkpointFileOf(path, id, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return nil, err
	}
	data, st, err := s.read(cp)
	if err != nil {
		return nil, noCheckpoint(p, id, err)
	}
	typ, err := modelType(p, st, o.Type)
	if err != nil {
		return nil, err
	}
	m, err := s.contentModel(p, st, typ, data, o, false)
	if err != nil {
		return nil, err
	}
	m.LastModified = jupyter.Time{Time: checkpointTime(id, st.mtime)}
	return m, nil
}

// renameCheckpoints moves the checkpoints of old to p, replacing any left behind by a file
// that was at p before.
func (s *Store) renameCheckpoints(old, p string) error {
	list, err := s.checkpoints(old)
	if err != nil || len(list) == 0 {
		return err
	}
	if err := s.deleteCheckpoints(p); err != nil {
		return err
	}
	dir, _ := splitPath(p)
	if err := s.root.Mkdir(joinPath(dir, checkpointDir), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return fsError(p, err)
	}
	for _, c := range list {
		if err := s.root.Rename(c.path, checkpointPath(p, c.id)); err != nil {
			return fsError(p, err)
		}
	}
	// The file keeps its inode through a rename: checkpoints still linked to it follow it.
	s.unshareLater(p)
	return nil
}

// deleteCheckpoints removes all checkpoints of p.
func (s *Store) deleteCheckpoints(p string) error {
	list, err := s.checkpoints(p)
	if err != nil {
		return err
	}
	for _, c := range list {
		if err := s.root.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(p, err)
		}
	}
	return nil
}
