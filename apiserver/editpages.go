package apiserver

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// The pages of a file that is not a notebook, at Notebook 6's addresses: /edit/<path>, the text
// editor, and /view/<path>, which shows what a browser shows by itself (images, PDF, and HTML
// in a sandboxed frame) and offers the rest as a download. Both send a directory to its
// dashboard and a notebook to its page, so that an old bookmark still leads somewhere useful.

// getEdit is GET /edit/<path>: the editor of a text file. A file is text when its bytes are
// UTF-8, Jupyter's check for format "text"; any other file cannot be edited as text and goes
// to its /view page, which shows it when a browser can and else offers it as a download.
func (s *Server) getEdit(c *gin.Context) error {
	p, ok, err := s.filePage(c)
	if err != nil || !ok {
		return err
	}
	ctx := c.Request.Context()
	text, err := s.store(ctx).IsText(ctx, p)
	if err != nil {
		return err
	}
	if !text {
		c.Header("Cache-Control", "no-store")
		c.Redirect(http.StatusFound, s.opts.BaseURL+"view/"+escapePath(p, false))
		return nil
	}
	s.renderApp(c, "editor", p, "")
	return nil
}

// getView is GET /view/<path>: the viewer of a file.
func (s *Server) getView(c *gin.Context) error {
	p, ok, err := s.filePage(c)
	if err != nil || !ok {
		return err
	}
	s.renderApp(c, "viewer", p, "")
	return nil
}

// filePage finds what a file page's path is: ok when it is a file other than a notebook,
// which the page then shows. Otherwise it has answered: a directory with its dashboard, a
// notebook with its page, nothing with a page that says so.
func (s *Server) filePage(c *gin.Context) (p string, ok bool, err error) {
	p = strings.Trim(c.Param("path"), "/")
	ctx := c.Request.Context()
	isFile, isDir, err := s.store(ctx).Exists(ctx, p)
	switch {
	case err != nil:
		return "", false, err
	case isDir:
		s.toTree(c, p)
		return "", false, nil
	case isFile && strings.HasSuffix(p, notebookExt):
		return "", false, s.openNotebook(c, p)
	case isFile:
		return p, true, nil
	}
	s.renderMessage(c, http.StatusNotFound, "Not found", "There is no file "+p+".", "")
	return "", false, nil
}
