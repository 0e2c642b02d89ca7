package apiserver

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
)

// The trash routes are nbkube's own: Jupyter's delete_to_trash moves files to the desktop's
// trash, which a server's clients cannot reach. DELETE /api/contents/<path> moves to the
// user's trash (see package contents); these list, restore and empty it.

// DefaultTrashSweepInterval is how often a server deletes expired trash entries and abandoned
// uploads unless configured.
const DefaultTrashSweepInterval = time.Hour

// listTrash is GET /api/trash: the user's trash entries, newest first.
func (s *Server) listTrash(c *gin.Context) error {
	list, err := s.store(c.Request.Context()).ListTrash(c.Request.Context(), userOf(c).Name)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, list)
	return nil
}

// restoreBody is the optional body of POST /api/trash/<id>/restore.
type restoreBody struct {
	// Path restores the entry there instead of where it was deleted from.
	Path string `json:"path"`
}

// restoreTrash is POST /api/trash/<id>/restore: the entry goes back, and the answer is its
// model, as a rename's.
func (s *Server) restoreTrash(c *gin.Context) error {
	var body restoreBody
	if err := readJSON(c, &body); err != nil {
		return err
	}
	m, err := s.store(c.Request.Context()).RestoreTrash(c.Request.Context(), userOf(c).Name, c.Param("id"), body.Path)
	if err != nil {
		return err
	}
	return s.writeModel(c, http.StatusOK, m, true)
}

// deleteTrash is DELETE /api/trash/<id>: the entry is gone for good.
func (s *Server) deleteTrash(c *gin.Context) error {
	if err := s.store(c.Request.Context()).DeleteTrash(c.Request.Context(), userOf(c).Name, c.Param("id")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// emptyTrash is DELETE /api/trash: every entry is gone for good.
func (s *Server) emptyTrash(c *gin.Context) error {
	if err := s.store(c.Request.Context()).EmptyTrash(c.Request.Context(), userOf(c).Name); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// sweep deletes expired trash entries and abandoned chunked uploads, in the volume's root and
// in every home, now and every TrashSweepInterval until ctx ends.
// Every replica sweeps: the store's sweeps are safe to run in several at once, and a replica
// that stops leaves the others sweeping.
func (s *Server) sweep(ctx context.Context) {
	tick := time.NewTicker(s.opts.TrashSweepInterval)
	defer tick.Stop()
	for {
		s.sweepStore(ctx, s.opts.Contents, "")
		s.sweepHomes(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweepStore sweeps the trash and the uploads of store, the volume's root or the home home,
// logging what fails.
func (s *Server) sweepStore(ctx context.Context, store *contents.Store, home string) {
	var kv []any
	if home != "" {
		kv = []any{"home", home}
	}
	if err := store.SweepTrash(ctx); err != nil && ctx.Err() == nil {
		s.opts.Log.Error(err, "Trash sweep failed", kv...)
	}
	if err := store.SweepUploads(ctx); err != nil && ctx.Err() == nil {
		s.opts.Log.Error(err, "Upload sweep failed", kv...)
	}
}
