package jupyter

import "encoding/json"

// Content types of the contents API.
const (
	TypeDirectory = "directory"
	TypeFile      = "file"
	TypeNotebook  = "notebook"
)

// Formats of the contents API.
const (
	FormatJSON   = "json"
	FormatText   = "text"
	FormatBase64 = "base64"
)

// ContentsModel is a file, notebook or directory of the contents API. Content and Format are
// null when the content was not asked for; Content is a []ContentsModel (directory, entries
// without content), a string (file, text or base64) or the notebook's JSON (notebook); a
// large file's is a StreamedContent, which only WriteJSON and AppendJSON render.
type ContentsModel struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	Type         string  `json:"type"`
	Writable     bool    `json:"writable"`
	Created      Time    `json:"created"`
	LastModified Time    `json:"last_modified"`
	Mimetype     *string `json:"mimetype"`
	Content      any     `json:"content"`
	Format       *string `json:"format"`
	Size         *int64  `json:"size"`
	// Hash and HashAlgorithm are present when asked for with ?hash=1.
	Hash          *string `json:"hash,omitempty"`
	HashAlgorithm *string `json:"hash_algorithm,omitempty"`
	// Message tells of a notebook that failed validation (it is saved or read all the same).
	Message *string `json:"message,omitempty"`
	// ETag is the HTTP entity tag of the version of the file or notebook the model describes,
	// which the API server sends as a header (never in the body) for conditional saves; ""
	// for directories and listing entries.
	ETag string `json:"-"`
}

// SaveModel is the body of PUT and POST on /api/contents.
type SaveModel struct {
	Name     string          `json:"name,omitempty"`
	Path     string          `json:"path,omitempty"`
	Type     string          `json:"type,omitempty"`
	Format   string          `json:"format,omitempty"`
	Content  json.RawMessage `json:"content,omitempty"`
	Chunk    *int            `json:"chunk,omitempty"`
	CopyFrom string          `json:"copy_from,omitempty"`
	Ext      string          `json:"ext,omitempty"`
}

// Checkpoint is an entry of /api/contents/<path>/checkpoints.
type Checkpoint struct {
	ID           string `json:"id"`
	LastModified Time   `json:"last_modified"`
}
