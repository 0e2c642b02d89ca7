package contents

import "os"

// tree is the directory tree a store serves, and the file operations every part of the store
// makes in it (fsutil.go, and the checks against .nbkube in sub.go): the files the API
// serves, their checkpoints, and the store's own state under .nbkube. The store and its
// checkpoints share one tree; a view from Sub opens a tree of its own, one from ForUploader
// shares its store's.
type tree struct {
	root *os.Root
	// real is where the system resolves root to, for refusing links into .nbkube directories
	// by what they resolve to (see refuseMetaTarget).
	real string
	// synced are the versions of files this tree's writes synced (see synced.go).
	synced syncedFiles
}

// openTree opens root as a tree. The tree is closed by closing its root.
func openTree(r *os.Root) (*tree, error) {
	real, err := realPathOf(r)
	if err != nil {
		return nil, err
	}
	return &tree{root: r, real: real}, nil
}
