package apiserver

import (
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// getFile serves a file's raw bytes, as Jupyter's /files/ does: its MIME type from the name,
// as an attachment with ?download=1. A page among them runs its scripts as Jupyter's /files
// lets it, in the CSP sandbox, so in no origin of nbkube's.
func (s *Server) getFile(c *gin.Context) error {
	p := apiPath(c)
	if !sameSite(c) {
		return domainerr.Forbidden("Blocking Cross Origin request")
	}
	if s.hidden(p) {
		return errNotFound
	}
	f, info, err := s.store(c.Request.Context()).Open(c.Request.Context(), p)
	if err != nil {
		return err
	}
	defer f.Close()
	name := path.Base(p)
	sandbox(c, "allow-scripts")
	h := c.Writer.Header()
	if c.Query("download") != "" {
		h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	}
	h.Set("Content-Type", fileMimetype(name))
	http.ServeContent(c.Writer, c.Request, name, info.ModTime(), f)
	return nil
}

// sandbox confines a response of user content that a browser may show as a page of its own
// (HTML, SVG, XML, or whatever type a notebook names): the CSP sandbox gives the document an
// opaque origin, so that its scripts, where flags let them run, are not nbkube's. They read no
// cookie or storage of its origin (so not the XSRF token) nor any answer of the server, and
// what they send that would change something carries Origin: null, which authenticate
// refuses. flags never hold allow-same-origin, which would undo all of it. nosniff is every
// response's (securityHeaders).
func sandbox(c *gin.Context, flags string) {
	h := c.Writer.Header()
	policy := "sandbox"
	if flags != "" {
		policy += " " + flags
	}
	h.Set("Content-Security-Policy", h.Get("Content-Security-Policy")+"; "+policy)
}

// fileMimetype follows Jupyter's choices: notebooks as application/x-ipynb+json, compressed
// files as such (RFC 6713), unknown types as bytes.
func fileMimetype(name string) string {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".ipynb"):
		return "application/x-ipynb+json"
	case strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".tgz"):
		return "application/gzip"
	}
	t := mime.TypeByExtension(path.Ext(lower))
	switch {
	case t == "":
		return "application/octet-stream"
	case strings.HasPrefix(t, "text/plain"):
		return "text/plain; charset=UTF-8"
	}
	return t
}

// sameSite refuses cross-site fetches of files that a cookie authenticated: a page elsewhere
// must not read a user's files with the user's cookie. A request that a token authenticated
// needs no check; one that merely carries a token no provider knows is still a cookie's.
// Browsers tell the site through Sec-Fetch-Site, older ones through Referer.
func sameSite(c *gin.Context) bool {
	if c.GetBool(tokenAuthKey) {
		return true
	}
	r := c.Request
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site != "cross-site"
	}
	ref := r.Header.Get("Referer")
	if ref == "" {
		return true
	}
	u, err := url.Parse(ref)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
