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

	"k8s.io/utils/clock"

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

// checkpoints keep the checkpoints of a tree's files beside the store, as Jupyter Server's
// Checkpoints stand beside its ContentsManager: the store hands them the checkpoint requests
// of the API once it has checked the path (see the Store methods at the end of this file),
// and calls them where a file gets its first checkpoint, moves or goes. They hold what only
// checkpoints use: how many to keep, and the copies that give shared ones files of their own.
type checkpoints struct {
	*tree
	max   int
	clock clock.PassiveClock
	// share is how checkpoints are made without copies (see checkpointshare.go).
	share *sharing
}

func newCheckpoints(t *tree, maxPerFile int, c clock.PassiveClock) *checkpoints {
	return &checkpoints{tree: t, max: maxPerFile, clock: c, share: newSharing()}
}

func newCheckpointID(t time.Time) string {
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

// list lists the checkpoints of p, oldest first.
func (c *checkpoints) list(p string) ([]checkpointFile, error) {
	dir, name := splitPath(p)
	base, ext := splitExt(name)
	cdir := joinPath(dir, checkpointDir)
	var list []checkpointFile
	err := c.listDir(cdir, func(dfd int, names []string) {
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
		if byAge := a.made.Compare(b.made); byAge != 0 {
			return byAge
		}
		return strings.Compare(a.id, b.id)
	})
	return list, nil
}

// models are the checkpoints of p as the API lists them, oldest first.
func (c *checkpoints) models(p string) ([]jupyter.Checkpoint, error) {
	list, err := c.list(p)
	if err != nil {
		return nil, err
	}
	out := make([]jupyter.Checkpoint, 0, len(list))
	for _, cp := range list {
		out = append(out, jupyter.Checkpoint{ID: cp.id, LastModified: jupyter.Time{Time: cp.made}})
	}
	return out, nil
}

// create keeps the version of the file p (a reflink, a link or a copy: see
// checkpointshare.go), dated by the clock, and drops the oldest checkpoints beyond max.
func (c *checkpoints) create(p string) (*jupyter.Checkpoint, error) {
	in, err := c.root.OpenFile(osName(p), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fsError(p, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, domainerr.Invalid("Cannot create a checkpoint of %s: not a file", p)
	}
	dir, _ := splitPath(p)
	if err := c.root.Mkdir(joinPath(dir, checkpointDir), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fsError(p, err)
	}
	now := c.clock.Now().UTC().Truncate(time.Microsecond)
	id := newCheckpointID(now)
	cp := checkpointPath(p, id)
	linked, err := c.link(in, infoOf(fi), cp)
	if err != nil {
		return nil, fsError(p, err)
	}
	if linked {
		c.unshareLater(p)
	} else {
		err = c.writeFile(cp, true, func(w *os.File) error {
			_, err := io.Copy(w, in)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if err := c.prune(p); err != nil {
		return nil, err
	}
	return &jupyter.Checkpoint{ID: id, LastModified: jupyter.Time{Time: now}}, nil
}

// prune drops the oldest checkpoints of p beyond max. Replicas pruning at once may remove
// the same file twice; that is harmless.
func (c *checkpoints) prune(p string) error {
	list, err := c.list(p)
	if err != nil {
		return err
	}
	for _, cp := range list[:max(0, len(list)-c.max)] {
		if err := c.root.Remove(cp.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(p, err)
		}
	}
	return nil
}

// ensure gives p a checkpoint if it has none, as Jupyter does on saving notebooks.
func (c *checkpoints) ensure(p string) error {
	list, err := c.list(p)
	if err != nil || len(list) > 0 {
		return err
	}
	_, err = c.create(p)
	return err
}

// link makes cp (a new checkpoint's path) the open file in without copying it, where the
// file system allows.
func (c *checkpoints) link(in *os.File, st statInfo, cp string) (bool, error) {
	cdir, name := splitPath(cp)
	d, err := c.openDir(cdir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	var linked bool
	err = withFD(d, func(cdfd int) error {
		var err error
		linked, err = c.shareFile(in, st, cdfd, name)
		return err
	})
	return linked, err
}

// file validates a checkpoint id of p (it becomes part of a file name) and returns the
// checkpoint's path.
func (c *checkpoints) file(p, id string) (string, error) {
	if !checkpointIDPattern.MatchString(id) {
		return "", domainerr.NotFound("Checkpoint does not exist: %s@%s", p, id)
	}
	return checkpointPath(p, id), nil
}

func noCheckpoint(p, id string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: fmt.Sprintf("Checkpoint does not exist: %s@%s", p, id), Err: err}
	}
	return fsError(p, err)
}

// restore gives the file p the content of its checkpoint id, atomically, keeping its
// permissions.
func (c *checkpoints) restore(p, id string) error {
	cp, err := c.file(p, id)
	if err != nil {
		return err
	}
	in, err := c.root.Open(cp)
	if err != nil {
		return noCheckpoint(p, id, err)
	}
	defer in.Close()
	return c.writeFile(p, false, func(w *os.File) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// remove deletes checkpoint id of p.
func (c *checkpoints) remove(p, id string) error {
	cp, err := c.file(p, id)
	if err != nil {
		return err
	}
	return noCheckpoint(p, id, c.root.Remove(cp))
}

// rename moves the checkpoints of old to p, replacing any left behind by a file that was at
// p before.
func (c *checkpoints) rename(old, p string) error {
	list, err := c.list(old)
	if err != nil || len(list) == 0 {
		return err
	}
	if err := c.removeAll(p); err != nil {
		return err
	}
	dir, _ := splitPath(p)
	if err := c.root.Mkdir(joinPath(dir, checkpointDir), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return fsError(p, err)
	}
	for _, cp := range list {
		if err := c.root.Rename(cp.path, checkpointPath(p, cp.id)); err != nil {
			return fsError(p, err)
		}
	}
	// The file keeps its inode through a rename: checkpoints still linked to it follow it.
	c.unshareLater(p)
	return nil
}

// removeAll removes all checkpoints of p.
func (c *checkpoints) removeAll(p string) error {
	list, err := c.list(p)
	if err != nil {
		return err
	}
	for _, cp := range list {
		if err := c.root.Remove(cp.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(p, err)
		}
	}
	return nil
}

// The store's checkpoint requests: the path checked, then the checkpoints.

// ListCheckpoints is GET /api/contents/<path>/checkpoints, oldest first.
func (s *Store) ListCheckpoints(_ context.Context, path string) ([]jupyter.Checkpoint, error) {
	p, err := s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return nil, err
	}
	return s.checkpoints.models(p)
}

// CreateCheckpoint is POST /api/contents/<path>/checkpoints: it keeps the file's version,
// dated by the clock, and drops the oldest checkpoints beyond MaxCheckpoints.
func (s *Store) CreateCheckpoint(_ context.Context, path string) (*jupyter.Checkpoint, error) {
	p, err := s.check(path, "Cannot create a checkpoint of hidden file '%s'")
	if err != nil {
		return nil, err
	}
	return s.checkpoints.create(p)
}

// RestoreCheckpoint is POST /api/contents/<path>/checkpoints/<id>: the file gets the
// checkpoint's content, atomically, keeping its permissions.
func (s *Store) RestoreCheckpoint(_ context.Context, path, id string) error {
	p, err := s.check(path, "Cannot restore hidden file '%s'")
	if err != nil {
		return err
	}
	return s.checkpoints.restore(p, id)
}

// DeleteCheckpoint is DELETE /api/contents/<path>/checkpoints/<id>.
func (s *Store) DeleteCheckpoint(_ context.Context, path, id string) error {
	p, err := s.check(path, "Cannot delete a checkpoint of hidden file '%s'")
	if err != nil {
		return err
	}
	return s.checkpoints.remove(p, id)
}

// GetCheckpoint reads a checkpoint without restoring it: the model is that of the file p as
// it was (name and path are p's, times the checkpoint's), read-only.
func (s *Store) GetCheckpoint(_ context.Context, path, id string, o GetOptions) (*jupyter.ContentsModel, error) {
	p, err := s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return nil, err
	}
	cp, err := s.checkpoints.file(p, id)
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
