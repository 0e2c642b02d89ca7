package contents

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// metaDir is the store's own directory at the root (notebook ids, partial uploads). It is
// never served, whatever AllowHidden says: writing into it would corrupt the store's state.
const metaDir = ".nbkube"

// checkpointDir is where a file's checkpoints live, next to it, as in Jupyter.
const checkpointDir = ".ipynb_checkpoints"

// tempPrefix names the store's temporary files. Like Jupyter's ".~" intermediates they are
// dot files, so that they are hidden; listings skip them even when hidden files are shown.
const tempPrefix = ".~nbkube-"

// hideGlobs are Jupyter's default ContentsManager.hide_globs: names never listed.
var hideGlobs = []string{"__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*.so", "*.dylib", "*~"}

// cleanPath returns the canonical form of an API path: no leading, trailing or doubled
// slashes and no "." components, as Jupyter's to_os_path normalises them; "" is the root.
// A ".." component is refused even where it would stay inside the root, so that a path is
// never reinterpreted; so are NUL bytes and invalid UTF-8, which no client can mean.
func cleanPath(p string) (string, error) {
	if !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
		return "", domainerr.Invalid("Invalid path: %q", p)
	}
	parts := strings.Split(p, "/")
	kept := parts[:0]
	for _, part := range parts {
		switch part {
		case "", ".":
			continue
		case "..":
			return "", domainerr.Forbidden("%s is outside root contents directory", p)
		}
		kept = append(kept, part)
	}
	return strings.Join(kept, "/"), nil
}

// isHiddenPath is Jupyter's is_hidden on a clean API path: any component starting with a dot.
func isHiddenPath(p string) bool {
	for part := range strings.SplitSeq(p, "/") {
		if strings.HasPrefix(part, ".") {
			return true
		}
	}
	return false
}

// isMetaPath reports whether p is the store's own directory or inside it, or inside the own
// directory of a store rooted deeper in the tree (a user's home, see Sub).
func isMetaPath(p string) bool {
	for part := range strings.SplitSeq(p, "/") {
		if part == metaDir {
			return true
		}
	}
	return false
}

// osName is the name of an API path for os.Root: the root itself is ".".
func osName(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// splitPath splits a clean API path into its directory and name.
func splitPath(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// joinPath joins a clean directory and a name.
func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// isUnder reports whether p is dir or inside it.
func isUnder(p, dir string) bool {
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

// splitExt is Python's os.path.splitext: leading dots belong to the name, so ".bashrc" has no
// extension. Checkpoint file names are built with it, as Jupyter builds them.
func splitExt(name string) (base, ext string) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || strings.Trim(name[:i], ".") == "" {
		return name, ""
	}
	return name[:i], name[i:]
}

// copyPattern is Jupyter's copy_pat: an earlier "-Copy<n>." is dropped from a copy's name.
var copyPattern = regexp.MustCompile(`-Copy\d*\.`)

// candidateNames yields Jupyter's increment_filename sequence for name: name itself, then
// the name with insert and 1, 2, ... before its extension. The extension is the last one for
// notebooks and everything from the first dot otherwise ("data-Copy1.tar.gz").
func candidateNames(name, insert string) func(yield func(string) bool) {
	base, dot, ext := rpartition(name, ".")
	if ext != "ipynb" {
		base, dot, ext = partition(name, ".")
	}
	return func(yield func(string) bool) {
		if !yield(base + dot + ext) {
			return
		}
		for i := 1; ; i++ {
			if !yield(base + insert + strconv.Itoa(i) + dot + ext) {
				return
			}
		}
	}
}

func partition(s, sep string) (string, string, string) {
	if before, after, ok := strings.Cut(s, sep); ok {
		return before, sep, after
	}
	return s, "", ""
}

func rpartition(s, sep string) (string, string, string) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", s
	}
	return s[:i], sep, s[i+len(sep):]
}

// hiddenByGlob reports whether a name matches one of Jupyter's hide_globs. The globs are all
// of the forms "name" and "*suffix", matched as such rather than with path.Match, since a
// listing checks every entry against every glob.
func hiddenByGlob(name string) bool {
	for _, g := range hideGlobs {
		if suffix, ok := strings.CutPrefix(g, "*"); ok {
			if strings.HasSuffix(name, suffix) {
				return true
			}
		} else if name == g {
			return true
		}
	}
	return false
}
