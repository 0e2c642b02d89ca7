package jupyter

// TrashEntry is an entry of GET /api/trash, an nbkube route (Jupyter's trash is the desktop's):
// a file or directory deleted through the API, restorable until it is deleted for good.
type TrashEntry struct {
	// ID names the entry in the trash routes.
	ID string `json:"id"`
	// Name is the last component of OriginalPath.
	Name string `json:"name"`
	// OriginalPath is where the entry was deleted from, and where a restore puts it back.
	OriginalPath string `json:"original_path"`
	// Type is "directory", "notebook" or "file", as in a contents model.
	Type string `json:"type"`
	// Size is a file's size in bytes; null for a directory.
	Size *int64 `json:"size"`
	// Deleted is when the entry was deleted, to the second.
	Deleted Time `json:"deleted"`
}
