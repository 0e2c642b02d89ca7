// Package contents is Jupyter's file contents manager (Jupyter Server 1.23's
// FileContentsManager with LargeFileManager's chunked uploads) over a directory tree, for
// the /api/contents handlers. It returns the models of package jupyter, and refuses with
// domainerr.Error (not found, conflict, invalid, forbidden, too large, no space) carrying
// Jupyter's messages.
//
// Parts. A Store answers the API from a tree: the root it opened and the file operations on
// it (tree.go, fsutil.go). Beside the store, in the same tree, stand the checkpoints of its
// files (checkpoints.go, checkpointshare.go), the users' trash (trash.go, trashsweep.go) and
// the chunked uploads in progress (upload.go), as Jupyter Server's Checkpoints stand beside
// its ContentsManager: each holds what only it uses, and the store checks a request's path
// and hands the request over. The notebook format is package nbformat's.
//
// Paths. API paths are cleaned as Jupyter cleans them (slashes and "." dropped); ".." and
// NUL bytes are refused. Every file system access goes through an os.Root, which resolves
// each component with openat and refuses symbolic links that leave the root, so a link
// swapped in between a check and a use cannot lead outside either. Operations that create,
// rename or stat by name open the parent directory through the root and pass the system
// single names only. Hidden paths (a component starting with a dot) are refused unless
// AllowHidden; the store's own .nbkube directory always is, at any depth (a home's, see
// Sub), and so is a path that resolves into one through symbolic links, which a kernel
// mounting the tree can make: the store reads where the system resolved the directory or
// file it opened (/proc/self/fd) and refuses it there, on the descriptor it then uses. A
// link is renamed, deleted and restored as itself, wherever it leads: that reads nothing
// through it, and the model answered is the link's own when its target is not served.
//
// Homes. Sub gives a view rooted at a directory of the tree (a user's home), opened through
// the store's root, so that nothing in the view reaches outside it, and with its own .nbkube
// directory inside the home.
//
// Writes are atomic and durable: a temporary file in the target's directory is written,
// synced, renamed over the target and the directory synced, so a crash leaves the old file or
// the new one, never a truncated one. An overwritten file keeps its permissions. Names chosen
// by the store (untitled files, copies) are claimed with renames that cannot replace, so
// replicas cannot overwrite each other's new files. A save may be conditional (SaveIf): it
// replaces the file only if it is still the version the client loaded, named by its ETag or
// modification time. Writes that replace a served file (saves, restores, uploads) rename
// holding an flock on .nbkube/save.lock, and conditional saves check under it too, so of
// conditional saves from one version, through any replicas, exactly one succeeds. The first
// conditional save makes the file; before it, writes take no lock. What never takes it (a
// kernel writing in place, a deletion) can still slip in between a check and its rename.
//
// State. Everything lives in the tree, so replicas sharing a volume see the same store:
// checkpoints in .ipynb_checkpoints/ next to each file (Jupyter's layout, several per file;
// see checkpoints.go), partial uploads, notebook ids and each user's trash under .nbkube/
// (see upload.go, ids.go and trash.go). What a store holds in memory cannot make replicas
// disagree: caches keyed by the version of the file they were computed from (device, inode,
// size, modification time: versionKey), that is the notebooks' validation results
// (cache.go) and their contents ready to serve (modelcache.go); the versions of files it
// synced itself (synced.go); and its own work in progress: the copies that give shared
// checkpoints files of their own (checkpointshare.go) and the queue of notebook encodings
// and upgrades for the processors (Store.cpu).
//
// Notebooks are read and written by package nbformat, as Python's nbformat does: saved in
// its layout, in their own version, and even when invalid, with the failure in the model's
// message. Reads report validation failures as Jupyter's do, but validate each file version
// once: schema validation costs far more than the rest of a read, so its result is cached by
// file version, and a save fills the cache for the version it wrote. Notebooks of nbformat 1
// to 3 are upgraded on every read, with new cell ids each time, as Jupyter's are.
package contents
