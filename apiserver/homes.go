package apiserver

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/domainerr"
)

// contentsKey holds, in a request's context, the contents store its user sees.
type contentsKey struct{}

// openContents gives a request of a user with a home (homes on, not an admin) a view of the
// contents rooted at that home, made on first use, and closes it when the request is done.
// Admins, and every user when homes are off, see the volume's root. The view lives in the
// request's context so that helpers taking a context find the same one (see store).
func (s *Server) openContents(c *gin.Context) {
	u := userOf(c)
	if !s.opts.Homes.On() || u == nil || u.Admin {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), contentsKey{}, s.opts.Contents))
		c.Next()
		return
	}
	home, err := s.opts.Homes.For(u.Name)
	if err != nil {
		s.abortErr(c, domainerr.Forbidden("You have no home on this server: %s", err.Error()))
		return
	}
	view, err := s.opts.Contents.Sub(home)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	defer func() { _ = view.Close() }()
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), contentsKey{}, view))
	c.Next()
}

// store is the contents store of the request whose context is ctx: its user's home, or the
// volume's root (see openContents). A route that reaches the contents without openContents
// is a mistake that must not show a user the volume's root, so it panics (a 500) instead.
func (s *Server) store(ctx context.Context) *contents.Store {
	if v, ok := ctx.Value(contentsKey{}).(*contents.Store); ok {
		return v
	}
	if !s.opts.Homes.On() {
		return s.opts.Contents
	}
	panic("apiserver: contents used by a route without openContents")
}

// sweepHomes sweeps the trash and the uploads of every home, each of which keeps its own (in
// its .nbkube directory), when homes are on.
func (s *Server) sweepHomes(ctx context.Context) {
	if !s.opts.Homes.On() {
		return
	}
	homes, err := s.opts.Contents.Glob(s.opts.Homes.Glob())
	if err != nil {
		s.opts.Log.Error(err, "Listing homes to sweep failed")
		return
	}
	for _, h := range homes {
		if ctx.Err() != nil {
			return
		}
		view, err := s.opts.Contents.Sub(h)
		if err != nil {
			s.opts.Log.V(1).Info("Cannot open a home to sweep it", "home", h, "error", err.Error())
			continue
		}
		s.sweepStore(ctx, view, h)
		_ = view.Close()
	}
}
