package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// File ids, as jupyter_server_fileid serves them: a file's or directory's UUID, which follows
// it through renames and moves made through the contents API, is new on a copy and forgotten on
// delete (internal/contents/ids.go). Real-time collaboration and server-side execution name
// documents by it (json:notebook:<id>). Ids are kept in each home with its other state, so a
// user's ids and paths are their home's, the same through every replica.

// fileIDModel is the answer of both routes.
type fileIDModel struct {
	ID   string `json:"id"`
	Path string `json:"path"`
}

// getFileID is GET /api/fileid/id?path=<path>: the id of the file at path, made on the first
// request.
func (s *Server) getFileID(c *gin.Context) error {
	p, ok := c.GetQuery("path")
	if !ok {
		return domainerr.Invalid("The path query parameter is required")
	}
	id, clean, err := s.store(c.Request.Context()).FileID(c.Request.Context(), p)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, fileIDModel{ID: id, Path: clean})
	return nil
}

// getFilePath is GET /api/fileid/path?id=<id>: where the file with the id is now.
func (s *Server) getFilePath(c *gin.Context) error {
	id := c.Query("id")
	if id == "" {
		return domainerr.Invalid("The id query parameter is required")
	}
	p, err := s.store(c.Request.Context()).FilePath(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, fileIDModel{ID: id, Path: p})
	return nil
}
