package contents

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/nbformat"
)

// maxUntitled bounds the search for a free "Untitled<n>" or "-Copy<n>" name.
const maxUntitled = 10000

// Save is PUT /api/contents/<path>: it writes a notebook, file or directory, new or not, and
// returns its model without content. A model with a chunk number is one part of a chunked
// upload. A model without content creates an empty notebook, file or directory (by Type,
// or by the name's extension), as Jupyter's new does, but an existing file needs content.
// A notebook that fails validation is saved all the same, with the failure in Message.
func (s *Store) Save(ctx context.Context, path string, m *jupyter.SaveModel) (*jupyter.ContentsModel, error) {
	return s.SaveIf(ctx, path, m, Precondition{})
}

// SaveIf is Save of a file or notebook with content, replacing it only if pre holds of it
// when it is replaced (see Precondition); otherwise it writes nothing and refuses with
// domainerr.ErrConflict. With the zero Precondition it is Save. A precondition on a
// directory or a chunk of an upload is invalid: neither replaces a version of a file.
func (s *Store) SaveIf(ctx context.Context, path string, m *jupyter.SaveModel, pre Precondition) (*jupyter.ContentsModel, error) {
	if m == nil {
		return nil, domainerr.Invalid("JSON body missing")
	}
	p, err := s.check(path, "Cannot create file or directory '%s'")
	if err != nil {
		return nil, err
	}
	if !pre.IsZero() && (m.Chunk != nil || m.Type == jupyter.TypeDirectory) {
		return nil, domainerr.Invalid("Conditional saves apply to files and notebooks, not to directories or chunked uploads: %s", p)
	}
	if m.Chunk != nil {
		return s.saveChunk(ctx, p, m)
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		if isFile, isDir, err := s.Exists(ctx, p); err != nil {
			return nil, err
		} else if isFile && m.Type != jupyter.TypeDirectory {
			return nil, domainerr.Invalid("No file content provided")
		} else if !pre.IsZero() && !isDir {
			// What would be created is not the version the client loaded: that is gone.
			return nil, pre.check(p, statInfo{}, false)
		}
		return s.create(p, newType(p, m.Type), false)
	}
	switch m.Type {
	case "":
		return nil, domainerr.Invalid("No file type provided")
	case jupyter.TypeNotebook:
		return s.saveNotebook(p, m.Content, pre)
	case jupyter.TypeFile:
		data, err := fileBytes(p, m)
		if err != nil {
			return nil, err
		}
		st, err := s.write(p, writeOptions{pre: pre}, writeBytes(data))
		if err != nil {
			return nil, err
		}
		return s.modelFrom(p, st)
	case jupyter.TypeDirectory:
		return s.create(p, jupyter.TypeDirectory, false)
	}
	return nil, domainerr.Invalid("Unhandled contents type: %s", m.Type)
}

// newType is the type Jupyter's new gives a model without content.
func newType(p, typ string) string {
	switch {
	case typ == jupyter.TypeDirectory || typ == jupyter.TypeNotebook:
		return typ
	case typ == "" && strings.HasSuffix(p, ".ipynb"):
		return jupyter.TypeNotebook
	}
	return jupyter.TypeFile
}

// fileBytes decodes a file model's content by its format.
func fileBytes(p string, m *jupyter.SaveModel) ([]byte, error) {
	if m.Format != jupyter.FormatText && m.Format != jupyter.FormatBase64 {
		return nil, domainerr.Invalid("Must specify format of file contents as 'text' or 'base64'")
	}
	var content string
	if err := json.Unmarshal(m.Content, &content); err != nil {
		return nil, &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "Encoding error saving " + p + ": content is not a string", Err: err}
	}
	if m.Format == jupyter.FormatText {
		return []byte(content), nil
	}
	data, err := decodeBase64(content)
	if err != nil {
		return nil, &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "Encoding error saving " + p + ": " + err.Error(), Err: err}
	}
	return data, nil
}

func writeBytes(data []byte) func(*os.File) error {
	return func(f *os.File) error {
		_, err := f.Write(data)
		return err
	}
}

// saveNotebook writes a notebook in nbformat's layout. As in Jupyter, a notebook always has
// a checkpoint: the first save makes one.
func (s *Store) saveNotebook(p string, content json.RawMessage, pre Precondition) (*jupyter.ContentsModel, error) {
	s.cpu <- struct{}{}
	data, validate, err := nbformat.Write(content)
	if err != nil {
		<-s.cpu
		return nil, err
	}
	// Schema validation costs about as much as the write's fsyncs; run them side by side.
	type verdict struct {
		msg string
		err error
	}
	done := make(chan verdict, 1)
	go func() {
		defer func() { <-s.cpu }()
		msg, err := validate()
		done <- verdict{msg, err}
	}()
	st, werr := s.write(p, writeOptions{pre: pre}, writeBytes(data))
	v := <-done
	if werr != nil {
		return nil, werr
	}
	if v.err != nil {
		return nil, v.err
	}
	return s.afterNotebookWrite(p, st, v.msg)
}

// afterNotebookWrite makes the first checkpoint of a notebook, remembers its validation
// result for the next read, and returns its model with the validation message; st is the
// stat of the version written.
func (s *Store) afterNotebookWrite(p string, st statInfo, msg string) (*jupyter.ContentsModel, error) {
	if err := s.checkpoints.ensure(p); err != nil {
		return nil, err
	}
	m, err := s.modelFrom(p, st)
	if err != nil {
		return nil, err
	}
	s.results.put(keyOf(st), msg)
	if msg != "" {
		m.Message = &msg
	}
	return m, nil
}

// create makes an empty notebook, file or directory at p. With exclusive, p must not exist
// (domainerr.ErrConflict), which is how untitled names are claimed without races between replicas.
func (s *Store) create(p, typ string, exclusive bool) (*jupyter.ContentsModel, error) {
	switch typ {
	case jupyter.TypeDirectory:
		err := s.root.Mkdir(osName(p), 0o777)
		switch {
		case errors.Is(err, fs.ErrExist) && !exclusive:
			if fi, serr := s.root.Stat(osName(p)); serr != nil || !fi.IsDir() {
				return nil, domainerr.Invalid("Not a directory: %s", p)
			}
		case errors.Is(err, fs.ErrExist):
			return nil, &domainerr.Error{Kind: domainerr.ErrConflict, Message: "File already exists: " + p, Err: err}
		case err != nil:
			dir, _ := splitPath(p)
			return nil, parentError(dir, err)
		}
		return s.modelOf(p)
	case jupyter.TypeNotebook:
		data, err := nbformat.New()
		if err != nil {
			return nil, err
		}
		st, err := s.write(p, writeOptions{exclusive: exclusive}, writeBytes(data))
		if err != nil {
			return nil, err
		}
		return s.afterNotebookWrite(p, st, "")
	}
	st, err := s.write(p, writeOptions{exclusive: exclusive}, writeBytes(nil))
	if err != nil {
		return nil, err
	}
	return s.modelFrom(p, st)
}

// modelOf is the model without content of an existing p.
func (s *Store) modelOf(p string) (*jupyter.ContentsModel, error) {
	fi, err := s.root.Stat(osName(p))
	if err != nil {
		return nil, fsError(p, err)
	}
	return s.modelFrom(p, infoOf(fi))
}

// modelOfMoved is the model of p, just moved there by a rename or a restore, which has
// happened whatever it answers. A symbolic link is moved as itself, as a deletion moves it
// into the trash; the model is its target's when the store would serve that (as Jupyter's,
// which follows links), else the link's own (never a target out of the root or in .nbkube,
// nor a missing one), not writable, since nothing is written through it.
func (s *Store) modelOfMoved(p string) (*jupyter.ContentsModel, error) {
	linkModel := func() (*jupyter.ContentsModel, bool) {
		fi, err := s.root.Lstat(osName(p))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return nil, false
		}
		st := infoOf(fi)
		typ, _ := modelType(p, st, "")
		return s.model(p, st, typ, false), true
	}
	if err := s.refuseMetaTarget(p, "%s"); err != nil {
		if m, ok := linkModel(); ok {
			return m, nil
		}
		return nil, err
	}
	m, err := s.modelOf(p)
	if err != nil {
		if m, ok := linkModel(); ok {
			return m, nil
		}
		return nil, err
	}
	return m, nil
}

// modelFrom is the model without content, with its ETag, of the version of p that st
// describes: after a save, the version written, which another save may have replaced since.
func (s *Store) modelFrom(p string, st statInfo) (*jupyter.ContentsModel, error) {
	typ, err := modelType(p, st, "")
	if err != nil {
		return nil, err
	}
	m := s.model(p, st, typ, s.writable(p))
	if typ != jupyter.TypeDirectory {
		m.ETag = etagOf(st)
	}
	return m, nil
}

// NewUntitled is POST /api/contents/<dir>: a new empty notebook ("Untitled.ipynb",
// "Untitled1.ipynb", ...), file ("untitled<ext>", "untitled1<ext>", ...) or directory
// ("Untitled Folder", "Untitled Folder 1", ...) in dir. Without typ, ext ".ipynb" makes a
// notebook and anything else a file. ext must be empty or a suffix (validExt).
func (s *Store) NewUntitled(_ context.Context, dir, typ, ext string) (*jupyter.ContentsModel, error) {
	if !validExt(ext) {
		return nil, domainerr.Invalid("Invalid extension %q: an extension is a dot and a name, such as \".txt\", at most %d bytes", ext, maxExtLen)
	}
	d, err := s.check(dir, "Cannot create file or directory '%s'")
	if err != nil {
		return nil, err
	}
	if fi, err := s.root.Stat(osName(d)); err != nil || !fi.IsDir() {
		return nil, domainerr.NotFound("No such directory: %s", d)
	}
	if typ == "" {
		typ = jupyter.TypeFile
		if ext == ".ipynb" {
			typ = jupyter.TypeNotebook
		}
	}
	var base, insert string
	switch typ {
	case jupyter.TypeDirectory:
		base, insert, ext = "Untitled Folder", " ", ""
	case jupyter.TypeNotebook:
		base, ext = "Untitled", ".ipynb"
	case jupyter.TypeFile:
		base = "untitled"
	default:
		return nil, domainerr.Invalid("Unexpected model type: '%s'", typ)
	}
	return s.claimName(d, base+ext, insert, func(p string) (*jupyter.ContentsModel, error) {
		return s.create(p, typ, true)
	})
}

// maxExtLen bounds an extension for NewUntitled, its dot included: far above any client's
// (".ipynb", ".jupyterlab-workspace"), and far below a name's 255 bytes.
const maxExtLen = 64

// validExt reports whether ext can end an untitled name: Jupyter appends it to "untitled"
// unchecked, so that "/../.nbkube/x" would name a file in another directory (the store's own,
// a hidden one). Only a suffix is taken: empty, or a dot followed by characters that separate
// no path components (no "/", no "\" as on Windows, no NUL) and make no "..".
func validExt(ext string) bool {
	if ext == "" {
		return true
	}
	return len(ext) <= maxExtLen && ext[0] == '.' && utf8.ValidString(ext) &&
		!strings.ContainsAny(ext, "/\\\x00") && !strings.Contains(ext, "..")
}

// claimName creates with create the first of name's increment_filename candidates in dir that
// does not exist yet.
func (s *Store) claimName(dir, name, insert string, create func(p string) (*jupyter.ContentsModel, error)) (*jupyter.ContentsModel, error) {
	tries := 0
	for cand := range candidateNames(name, insert) {
		m, err := create(joinPath(dir, cand))
		if !errors.Is(err, domainerr.ErrConflict) {
			return m, err
		}
		if tries++; tries >= maxUntitled {
			break
		}
	}
	return nil, domainerr.New(domainerr.ErrConflict, "No free name for %s in %s", name, dir)
}

// Copy is POST /api/contents/<to> with copy_from: it copies the file from into the directory
// to, naming it like Jupyter ("name.ext" if free, else "name-Copy1.ext", "name-Copy2.ext",
// ...), or, when to does not exist, to the file to itself. The copy has the same bytes.
func (s *Store) Copy(_ context.Context, from, to string) (*jupyter.ContentsModel, error) {
	src, err := s.check(from, "Cannot copy file or directory '%s'")
	if err != nil {
		return nil, err
	}
	dst, err := s.check(to, "Cannot copy file or directory '%s'")
	if err != nil {
		return nil, err
	}
	fi, err := s.root.Stat(osName(src))
	if err != nil {
		return nil, fsError(src, err)
	}
	if fi.IsDir() {
		return nil, domainerr.Invalid("Can't copy directories")
	}
	copyTo := func(p string) (*jupyter.ContentsModel, error) { return s.copyFile(src, p) }
	dfi, err := s.root.Stat(osName(dst))
	switch {
	case err == nil && dfi.IsDir():
		_, name := splitPath(src)
		return s.claimName(dst, copyPattern.ReplaceAllString(name, "."), "-Copy", copyTo)
	case err == nil:
		return nil, domainerr.New(domainerr.ErrConflict, "File already exists: %s", dst)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fsError(dst, err)
	}
	parent, _ := splitPath(dst)
	if pfi, err := s.root.Stat(osName(parent)); err != nil || !pfi.IsDir() {
		return nil, domainerr.NotFound("No such parent directory: %s to copy file in", parent)
	}
	return copyTo(dst)
}

// copyFile copies src to the new file dst; a notebook copy gets its first checkpoint.
func (s *Store) copyFile(src, dst string) (*jupyter.ContentsModel, error) {
	in, err := s.root.OpenFile(osName(src), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fsError(src, err)
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, domainerr.Invalid("Cannot read non-file %s", src)
	}
	err = s.writeFile(dst, true, func(w *os.File) error {
		_, err := io.Copy(w, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	if typ, _ := modelType(src, statInfo{}, ""); typ == jupyter.TypeNotebook {
		if err := s.checkpoints.ensure(dst); err != nil {
			return nil, err
		}
	}
	return s.modelOf(dst)
}

// Rename is PATCH /api/contents/<old> with a new path. The target must not exist (domainerr.ErrConflict)
// unless it is the same file (a change of case on a case-insensitive file system). A file's
// checkpoints and notebook ids follow it; a directory's follow it as part of its tree.
func (s *Store) Rename(_ context.Context, oldPath, newPath string) (*jupyter.ContentsModel, error) {
	old, err := s.check(oldPath, "Cannot rename file or directory '%s'")
	if err != nil {
		return nil, err
	}
	p, err := s.check(newPath, "Cannot rename file or directory '%s'")
	if err != nil {
		return nil, err
	}
	if old == p {
		return s.modelOf(p)
	}
	if old == "" || p == "" {
		return nil, domainerr.Invalid("Can't rename root")
	}
	if isUnder(p, old) {
		return nil, domainerr.Invalid("Cannot move %s into itself", old)
	}
	ofi, err := s.root.Lstat(old)
	if err != nil {
		return nil, fsError(old, err)
	}
	if err := s.renameEntry(old, p); err != nil {
		return nil, err
	}
	if !ofi.IsDir() {
		if err := s.checkpoints.rename(old, p); err != nil {
			return nil, err
		}
	}
	if err := s.moveIDs(old, p); err != nil {
		return nil, err
	}
	return s.modelOfMoved(p)
}

// renameEntry renames old to p without replacing anything, both parents opened inside the
// root and only single names passed to the system, then syncs both directories.
func (s *Store) renameEntry(old, p string) error {
	odir, oname := splitPath(old)
	ndir, nname := splitPath(p)
	return s.withDirs(odir, func(err error) error { return fsError(old, err) }, ndir, func(ofd, nfd int) error {
		err := renameNoReplace(ofd, oname, nfd, nname)
		if errors.Is(err, unix.EEXIST) && sameFile(ofd, oname, nfd, nname) {
			err = unix.Renameat(ofd, oname, nfd, nname)
		}
		switch {
		case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
			return &domainerr.Error{Kind: domainerr.ErrConflict, Message: "File already exists: " + p, Err: err}
		case errors.Is(err, unix.EINVAL):
			return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "Cannot move " + old + " to " + p, Err: err}
		case err != nil:
			return fsError(old, err)
		}
		if err := unix.Fsync(nfd); err != nil {
			return fsError(p, err)
		}
		return fsError(old, unix.Fsync(ofd))
	})
}

func sameFile(ofd int, oname string, nfd int, nname string) bool {
	a, err1 := fstatat(ofd, oname)
	b, err2 := fstatat(nfd, nname)
	return err1 == nil && err2 == nil && a.dev == b.dev && a.ino == b.ino
}

// Delete is DELETE /api/contents/<path>: it moves the file or directory to user's trash
// (see trash.go), or, with DeletePermanently, deletes it for good, and then a directory must
// be empty but for checkpoints unless DeleteNonEmptyDirs is set. A file's checkpoints are
// deleted for good either way, as Jupyter's delete does; a directory's travel in it. Notebook
// ids are dropped. A symbolic link is deleted, not what it points at.
func (s *Store) Delete(_ context.Context, user, path string) error {
	p, err := s.check(path, "Cannot delete file or directory '%s'")
	if err != nil {
		return err
	}
	if p == "" {
		return domainerr.Invalid("Can't delete root")
	}
	fi, err := s.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return domainerr.NotFound("File or directory does not exist: %s", p)
	}
	if err != nil {
		return fsError(p, err)
	}
	trashed, err := s.trashOrDelete(user, p, fi)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if !trashed {
			if err := s.root.Remove(p); err != nil {
				return fsError(p, err)
			}
		}
		if err := s.checkpoints.removeAll(p); err != nil {
			return err
		}
		return s.forgetIDs(p)
	}
	if trashed {
		return s.forgetIDs(p)
	}
	if s.opts.DeleteNonEmptyDirs {
		if err := s.root.RemoveAll(p); err != nil {
			return fsError(p, err)
		}
		return s.forgetIDs(p)
	}
	// A directory holding only checkpoints counts as empty, as in Jupyter. Removing them and
	// then the directory with rmdir means a file created meanwhile makes the deletion fail
	// instead of vanishing with it.
	// So does one holding only temporary files that an interrupted write (a process killed
	// mid-save) left long ago; a recent one may be a write under way, which makes it not empty.
	stale, err := s.onlyLeftovers(p)
	if err != nil {
		return err
	}
	for _, n := range append(stale, checkpointDir) {
		if err := s.root.RemoveAll(joinPath(p, n)); err != nil {
			return fsError(p, err)
		}
	}
	err = s.root.Remove(p)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "Directory " + p + " not empty", Err: err}
	}
	if err != nil {
		return fsError(p, err)
	}
	return s.forgetIDs(p)
}

// onlyLeftovers returns the stale temporary files of the directory p, or an invalid error
// when p holds anything else than those and checkpoints.
func (s *Store) onlyLeftovers(p string) ([]string, error) {
	d, err := s.openDir(p)
	if err != nil {
		return nil, fsError(p, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fsError(p, err)
	}
	now := s.clock.Now()
	var stale []string
	err = withFD(d, func(dfd int) error {
		for _, n := range names {
			if n == checkpointDir {
				continue
			}
			if strings.HasPrefix(n, tempPrefix) {
				if st, err := fstatat(dfd, n); err == nil && st.isRegular() && leftover(st, now) {
					stale = append(stale, n)
					continue
				}
			}
			return domainerr.Invalid("Directory %s not empty", p)
		}
		return nil
	})
	return stale, err
}
