package contents

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// Defaults of Options.
const (
	DefaultMaxCheckpoints = 5
	DefaultMaxUploadSize  = 16 << 30
	DefaultUploadTTL      = time.Hour
	DefaultMaxReadSize    = 256 << 20
)

// Options configure a Store.
type Options struct {
	// MaxCheckpoints is how many checkpoints a file keeps; the oldest are dropped beyond it.
	// Zero means DefaultMaxCheckpoints (Jupyter keeps one).
	MaxCheckpoints int
	// AllowHidden serves dot files and directories, as Jupyter's allow_hidden does.
	AllowHidden bool
	// DeletePermanently makes Delete delete for good instead of moving to the user's trash:
	// Jupyter's delete_to_trash = False.
	DeletePermanently bool
	// DeleteNonEmptyDirs lets Delete remove a directory with contents for good, as Jupyter's
	// always_delete_dir does; without it, deleting for good refuses them. Moving to the trash
	// takes any directory.
	DeleteNonEmptyDirs bool
	// TrashMaxAge is how long an entry stays in a trash before SweepTrash deletes it for good.
	// Zero keeps entries until their user deletes them.
	TrashMaxAge time.Duration
	// Clock dates checkpoints, chunked uploads and trash entries. Nil means the real clock.
	Clock clock.PassiveClock
	// MaxUploadSize bounds the total size of a chunked upload (domainerr.ErrTooLarge beyond it).
	// Zero means DefaultMaxUploadSize.
	MaxUploadSize int64
	// UploadTTL is how long a chunked upload may wait for its next chunk before it is
	// abandoned and its partial file removed. Zero means DefaultUploadTTL.
	UploadTTL time.Duration
	// MaxReadSize bounds the files whose content a model carries (domainerr.ErrTooLarge beyond it),
	// because Get's model holds the whole file, base64 encoded, in memory (GetStream's does not,
	// but still reads the file once or twice per request). Zero means DefaultMaxReadSize.
	MaxReadSize int64
	// NotebookCacheBytes bounds the notebooks kept ready to serve (see notebookCache). Zero
	// means DefaultNotebookCacheBytes; negative keeps none.
	NotebookCacheBytes int64
}

// GetOptions are the query parameters of GET /api/contents/<path>.
type GetOptions struct {
	// Type is "", "directory", "file" or "notebook"; a file asked as a notebook is read as one.
	Type string
	// Format is "", "text" or "base64"; it applies to files only.
	Format string
	// Content asks for the content; without it, Content and Format are nil.
	Content bool
	// Hash adds the SHA-256 of a file's or notebook's bytes.
	Hash bool
}

// Store serves Jupyter's contents API from a directory tree. All its state is in the tree, so
// several stores (API replicas) may share one tree; see the package documentation.
//
// ForUploader copies a Store: what views share must be held by pointer, never a lock by value
// (go vet's copylocks check catches one).
type Store struct {
	*tree
	// borrowed says the tree is the store's this view was copied from, which closes it.
	borrowed bool
	opts     Options
	clock    clock.PassiveClock
	results  *validationCache
	// notebooks are notebooks' contents ready to serve, shared with sub stores as results is.
	notebooks *notebookCache
	// cpu admits notebook encodings and validations, the CPU-heavy part of a save, as many at a
	// time as there are processors and in arrival order (blocked channel sends are served
	// first in, first out). Without it, 64 concurrent saves share two cores at random and the
	// unlucky ones wait many times the average; with it, waiting is a fair queue.
	cpu chan struct{}
	// checkpoints keep the checkpoints of the tree's files (checkpoints.go), trash the users'
	// trash in it (trash.go) and uploads its chunked uploads in progress (upload.go).
	checkpoints *checkpoints
	trash       *trash
	uploads     *uploads
	// streamFrom is the size from which GetStream streams a file's content (streamFromSize;
	// the tests lower it to stream small files too).
	streamFrom int64
}

// New opens the tree at root. Close releases it.
func New(root string, opts Options) (*Store, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open contents root: %w", err)
	}
	t, err := openTree(r)
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("open contents root: %w", err)
	}
	if opts.MaxCheckpoints <= 0 {
		opts.MaxCheckpoints = DefaultMaxCheckpoints
	}
	if opts.MaxUploadSize <= 0 {
		opts.MaxUploadSize = DefaultMaxUploadSize
	}
	if opts.UploadTTL <= 0 {
		opts.UploadTTL = DefaultUploadTTL
	}
	if opts.MaxReadSize <= 0 {
		opts.MaxReadSize = DefaultMaxReadSize
	}
	if opts.NotebookCacheBytes == 0 {
		opts.NotebookCacheBytes = DefaultNotebookCacheBytes
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	shared := &Store{opts: opts, clock: c, results: newValidationCache(validationCacheSize),
		notebooks: newNotebookCache(opts.NotebookCacheBytes), cpu: make(chan struct{}, runtime.GOMAXPROCS(0)),
		streamFrom: streamFromSize}
	return shared.on(t), nil
}

// on is a store serving the tree t with s's options, caches and CPU queue, and checkpoints,
// trash and uploads of its own in t.
func (s *Store) on(t *tree) *Store {
	return &Store{tree: t, opts: s.opts, clock: s.clock, results: s.results, notebooks: s.notebooks, cpu: s.cpu,
		checkpoints: newCheckpoints(t, s.opts.MaxCheckpoints, s.clock),
		trash:       &trash{tree: t, clock: s.clock, maxAge: s.opts.TrashMaxAge},
		uploads:     &uploads{tree: t, clock: s.clock, maxSize: s.opts.MaxUploadSize, ttl: s.opts.UploadTTL},
		streamFrom:  s.streamFrom}
}

// Close releases the root directory, unless the store is a view sharing another's (see
// ForUploader).
func (s *Store) Close() error {
	if s.borrowed {
		return nil
	}
	s.checkpoints.share.close()
	return s.root.Close()
}

// IsHidden reports whether path is hidden the way Jupyter's is_hidden decides it: one of its
// components starts with a dot. A path that is not a valid API path is not reported hidden;
// every operation refuses it anyway.
func (s *Store) IsHidden(path string) bool {
	p, err := cleanPath(path)
	return err == nil && isHiddenPath(p)
}

// check cleans an API path and refuses the store's own directory and, unless hidden files are
// allowed, hidden paths; refusal is the Jupyter message for the operation.
func (s *Store) check(path, refusal string) (string, error) {
	p, err := cleanPath(path)
	if err != nil {
		return "", err
	}
	if isMetaPath(p) || (!s.opts.AllowHidden && isHiddenPath(p)) {
		return "", domainerr.Forbidden(refusal, p)
	}
	if err := s.refuseMetaTarget(p, refusal); err != nil {
		return "", err
	}
	return p, nil
}

// Exists reports whether path is a file or a directory, following symbolic links inside the
// root as Jupyter's file_exists and dir_exists do.
func (s *Store) Exists(_ context.Context, path string) (isFile, isDir bool, err error) {
	p, err := s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return false, false, err
	}
	fi, err := s.root.Stat(osName(p))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fsError(p, err)
	}
	return fi.Mode().IsRegular(), fi.IsDir(), nil
}

// Get returns the model of a file, notebook or directory, with its content if asked.
func (s *Store) Get(_ context.Context, path string, o GetOptions) (*jupyter.ContentsModel, error) {
	p, st, typ, err := s.resolve(path, o)
	if err != nil {
		return nil, err
	}
	return s.getResolved(p, st, typ, o)
}

// resolve checks the options and path of a Get and finds what the path is.
func (s *Store) resolve(path string, o GetOptions) (string, statInfo, string, error) {
	if !slices.Contains([]string{"", jupyter.TypeDirectory, jupyter.TypeFile, jupyter.TypeNotebook}, o.Type) {
		return "", statInfo{}, "", domainerr.Invalid("Type '%s' is invalid", o.Type)
	}
	if !slices.Contains([]string{"", jupyter.FormatText, jupyter.FormatBase64}, o.Format) {
		return "", statInfo{}, "", domainerr.Invalid("Format '%s' is invalid", o.Format)
	}
	p, err := s.check(path, "Refusing to serve hidden file or directory '%s'")
	if err != nil {
		return "", statInfo{}, "", err
	}
	fi, err := s.root.Stat(osName(p))
	if err != nil {
		return "", statInfo{}, "", fsError(p, err)
	}
	st := infoOf(fi)
	typ, err := modelType(p, st, o.Type)
	if err != nil {
		return "", statInfo{}, "", err
	}
	return p, st, typ, nil
}

// getResolved is Get once resolve found that p (st) has a model of type typ.
func (s *Store) getResolved(p string, st statInfo, typ string, o GetOptions) (*jupyter.ContentsModel, error) {
	if typ == jupyter.TypeDirectory {
		return s.dirModel(p, st, o.Content)
	}
	if !o.Content && !o.Hash {
		m := s.model(p, st, typ, s.writable(p))
		m.ETag = etagOf(st)
		return m, nil
	}
	f, st, err := s.openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cacheable := typ == jupyter.TypeNotebook && o.Content
	if cacheable {
		if n, ok := s.notebooks.get(keyOf(st)); ok && (n.hash != "" || !o.Hash) {
			return s.cachedModel(p, st, n, o), nil
		}
	}
	data, err := readAll(f, p, st.size, s.opts.MaxReadSize)
	if err != nil {
		return nil, err
	}
	m, err := s.contentModel(p, st, typ, data, o, s.writable(p))
	if err != nil {
		return nil, err
	}
	if cacheable && m.Hash != nil {
		s.notebooks.addHash(keyOf(st), *m.Hash)
	}
	// The stat of the file read: the tag names the version of the content served.
	m.ETag = etagOf(st)
	return m, nil
}

// cachedModel is the model of the notebook p (st) whose content n keeps.
func (s *Store) cachedModel(p string, st statInfo, n cachedNotebook, o GetOptions) *jupyter.ContentsModel {
	m := s.model(p, st, jupyter.TypeNotebook, s.writable(p))
	format := jupyter.FormatJSON
	m.Content, m.Format = n.content, &format
	if n.msg != "" {
		msg := n.msg
		m.Message = &msg
	}
	if o.Hash {
		h, alg := n.hash, "sha256"
		m.Hash, m.HashAlgorithm = &h, &alg
	}
	m.ETag = etagOf(st)
	return m
}

// modelType decides the type of the model of p as Jupyter's get does: directories are
// directories; a file is a notebook when asked as one or when, unasked, its name ends in
// .ipynb; anything else is a file.
func modelType(p string, st statInfo, asked string) (string, error) {
	switch {
	case st.isDir():
		if asked != "" && asked != jupyter.TypeDirectory {
			return "", &domainerr.Error{Kind: domainerr.ErrInvalid, Message: fmt.Sprintf("%s is a directory, not a %s", p, asked), Reason: "bad type"}
		}
		return jupyter.TypeDirectory, nil
	case asked == jupyter.TypeDirectory:
		return "", &domainerr.Error{Kind: domainerr.ErrInvalid, Message: p + " is not a directory", Reason: "bad type"}
	case asked == jupyter.TypeNotebook || (asked == "" && strings.HasSuffix(p, ".ipynb")):
		return jupyter.TypeNotebook, nil
	}
	return jupyter.TypeFile, nil
}

// model is the model of p without content.
func (s *Store) model(p string, st statInfo, typ string, writable bool) *jupyter.ContentsModel {
	_, name := splitPath(p)
	m := &jupyter.ContentsModel{
		Name:         name,
		Path:         p,
		Type:         typ,
		Writable:     writable,
		Created:      jupyter.Time{Time: st.ctime},
		LastModified: jupyter.Time{Time: st.mtime},
	}
	if typ != jupyter.TypeDirectory {
		size := st.size
		m.Size = &size
	}
	if typ == jupyter.TypeFile {
		if mt := guessMimetype(name); mt != "" {
			m.Mimetype = &mt
		}
	}
	return m
}

// read reads the regular file at p, following links inside the root.
func (s *Store) read(p string) ([]byte, statInfo, error) {
	f, st, err := s.openRegular(p)
	if err != nil {
		return nil, st, err
	}
	defer f.Close()
	data, err := readAll(f, p, st.size, s.opts.MaxReadSize)
	return data, st, err
}

// contentModel is the model of the file or notebook p whose bytes are data.
func (s *Store) contentModel(p string, st statInfo, typ string, data []byte, o GetOptions, writable bool) (*jupyter.ContentsModel, error) {
	m := s.model(p, st, typ, writable)
	if o.Hash {
		sum := sha256.Sum256(data)
		h, alg := hex.EncodeToString(sum[:]), "sha256"
		m.Hash, m.HashAlgorithm = &h, &alg
	}
	if !o.Content {
		return m, nil
	}
	if typ == jupyter.TypeNotebook {
		nb, msg, err := s.readNotebook(p, st, data)
		if err != nil {
			return nil, err
		}
		format := jupyter.FormatJSON
		m.Content, m.Format = nb, &format
		if msg != "" {
			m.Message = &msg
		}
		return m, nil
	}
	format, err := fileFormat(p, o.Format, o.Format != jupyter.FormatBase64 && utf8.Valid(data))
	if err != nil {
		return nil, err
	}
	if format == jupyter.FormatText {
		m.Content = string(data)
	} else {
		m.Content = encodeBase64Lines(data)
	}
	setFormat(m, format)
	return m, nil
}

// fileFormat is the format a file's content is served in, given the format asked and whether
// the file is UTF-8 (which need not be known when base64 is asked): text when it is and base64
// was not asked, base64 when text was not asked, else the error Jupyter answers.
func fileFormat(p, asked string, isUTF8 bool) (string, error) {
	switch {
	case asked != jupyter.FormatBase64 && isUTF8:
		return jupyter.FormatText, nil
	case asked == jupyter.FormatText:
		return "", &domainerr.Error{Kind: domainerr.ErrInvalid, Message: p + " is not UTF-8 encoded", Reason: "bad format"}
	}
	return jupyter.FormatBase64, nil
}

// setFormat sets the format of a file's model and, when its name tells no mimetype, the one
// Jupyter gives by format.
func setFormat(m *jupyter.ContentsModel, format string) {
	m.Format = &format
	if m.Mimetype == nil {
		mt := "text/plain"
		if format == jupyter.FormatBase64 {
			mt = "application/octet-stream"
		}
		m.Mimetype = &mt
	}
}

// encodeBase64Lines is Python's base64.encodebytes, which Jupyter uses: lines of 76
// characters, each ending in a newline.
func encodeBase64Lines(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	b.Grow(len(enc) + len(enc)/76 + 1)
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteByte('\n')
		enc = enc[76:]
	}
	if enc != "" {
		b.WriteString(enc)
		b.WriteByte('\n')
	}
	return b.String()
}

// decodeBase64 is Python's base64.decodebytes: line breaks and spaces are ignored.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	return base64.StdEncoding.DecodeString(s)
}

// dirModel is the model of the directory p, listing it if asked. Listing stats entries
// through the open directory and never reads a file, so its cost does not grow with sizes.
func (s *Store) dirModel(p string, st statInfo, content bool) (*jupyter.ContentsModel, error) {
	m := s.model(p, st, jupyter.TypeDirectory, s.writable(p))
	if !content {
		return m, nil
	}
	var entries []jupyter.ContentsModel
	err := s.listDir(p, func(dfd int, names []string) {
		slices.Sort(names)
		entries = make([]jupyter.ContentsModel, 0, len(names))
		w := newWritability(dfd)
		for _, name := range names {
			if e, ok := s.entry(p, dfd, name, w); ok {
				entries = append(entries, *e)
			}
		}
	})
	if err != nil {
		return nil, fsError(p, err)
	}
	format := jupyter.FormatJSON
	m.Content, m.Format = entries, &format
	return m, nil
}

// entry is the model of name in the listing of directory dir (open as dfd), or false when
// Jupyter would not list it: hidden or hide_globs names, special files, entries that cannot
// be stat'ed, and (our addition) links leading out of the root and names that are not UTF-8,
// which no client could address.
func (s *Store) entry(dir string, dfd int, name string, w writability) (*jupyter.ContentsModel, bool) {
	if strings.HasPrefix(name, tempPrefix) {
		s.dropLeftover(dfd, name)
		return nil, false
	}
	if !utf8.ValidString(name) || hiddenByGlob(name) {
		return nil, false
	}
	p := joinPath(dir, name)
	if isMetaPath(p) || (!s.opts.AllowHidden && strings.HasPrefix(name, ".")) {
		return nil, false
	}
	st, err := fstatat(dfd, name)
	if err != nil {
		return nil, false
	}
	if st.isLink() {
		fi, err := s.root.Stat(p)
		if err != nil || s.refuseMetaTarget(p, "%s") != nil {
			return nil, false
		}
		st = infoOf(fi)
	}
	if !st.isDir() && !st.isRegular() {
		return nil, false
	}
	// Jupyter's is_file_hidden also hides directories the server cannot list.
	if st.isDir() && !s.opts.AllowHidden && !accessible(dfd, name, unix.R_OK|unix.X_OK) {
		return nil, false
	}
	typ, _ := modelType(p, st, "")
	return s.model(p, st, typ, w.writable(dfd, name, st)), true
}
