package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// The older interface's web pages: the dashboard (of any directory), a notebook's page by its
// id, /new, copy and print. Each is a small HTML shell that names its script and carries the
// page's configuration as a JSON data block; the scripts (web/, embedded) do the rest through
// the public API, as any client does. A page is served only to a request that accepts HTML: a
// client asking for JSON keeps the answers of the REST interface (/ still redirects it to
// /api/contents), so pages and REST share no path the older interface did not.

//go:embed pages/app.html
var appHTML string

//go:embed pages/message.html
var messageHTML string

var (
	appTemplate     = template.Must(template.New("app").Parse(appHTML))
	messageTemplate = template.Must(template.New("message").Parse(messageHTML))
)

// pageCSP is the pages' Content-Security-Policy: scripts only from this server, never inline
// (the configuration is a JSON data block, which is not run); styles may be inline (KaTeX and
// CodeMirror set style attributes); images also from data: and blob: URLs (outputs); no
// plugins, no frames of other sites, no base URL tricks.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"font-src 'self' data:; connect-src 'self'; frame-src 'self' blob: data:; form-action 'self'; base-uri 'none'; " +
	"object-src 'none'; frame-ancestors 'self'"

// assetsPath is where the pages' scripts and styles are served, under the base URL.
const assetsPath = "static/nbkube/"

// pageConfig is what a page's script reads from its JSON data block (web/src/shell/config.ts).
type pageConfig struct {
	BaseURL    string `json:"baseUrl"`
	Page       string `json:"page"`
	Path       string `json:"path"`
	NotebookID string `json:"notebookId,omitempty"`
	// Terminal is the terminal's name (the terminal page).
	Terminal  string `json:"terminal,omitempty"`
	User      string `json:"user"`
	CanLogout bool   `json:"canLogout"`
	// TerminalsAvailable tells whether the server runs terminals, under the name of
	// JupyterLab's page config option, which its terminal client reads.
	TerminalsAvailable bool `json:"terminalsAvailable"`
}

// appPage is what the page shell shows.
type appPage struct {
	Title, Page, Static, API, Favicon string
	Config                            pageConfig
}

// messagePage is a page that only tells something: an error, or how to build the pages.
type messagePage struct {
	Title, Message, Code, Home, Favicon string
}

//go:embed pages/favicon.svg
var favicon []byte

// faviconPath is where the pages' icon is, under the base URL: where browsers look for one.
const faviconPath = "favicon.ico"

// getFavicon is GET /favicon.ico: the pages' icon (SVG, which browsers take at that name too).
func (s *Server) getFavicon(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=86400")
	c.Data(http.StatusOK, "image/svg+xml", favicon)
}

// wantsPage reports whether a request asks for a web page: a browser's navigation accepts
// text/html; API clients send no Accept, */* or application/json.
func wantsPage(r *http.Request) bool {
	for _, a := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(a, ",") {
			media, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(media), "text/html") {
				return true
			}
		}
	}
	return false
}

// pagesOnly answers a request for a page route that does not ask for HTML as the REST
// interface answers a path it does not serve.
func (s *Server) pagesOnly(c *gin.Context) {
	if !wantsPage(c.Request) {
		s.abortErr(c, errNotFound)
	}
}

// notebookIDsOnly lets only notebook ids through to the routes of /<notebook_id>; other
// single-segment paths are not found, before any authentication, as without the route.
func (s *Server) notebookIDsOnly(c *gin.Context) {
	if !contents.IsNotebookID(c.Param("id")) {
		s.notFoundPage(c)
	}
}

// noRoute answers a path nothing serves: a browser's request for a page with a page (a
// Notebook 6 address of a notebook goes to its page), the API's with Jupyter's JSON.
func (s *Server) noRoute(c *gin.Context) {
	p, under := strings.CutPrefix(c.Request.URL.Path, s.opts.BaseURL)
	if under && wantsPage(c.Request) && (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead) {
		if rest, ok := strings.CutPrefix(p, "notebooks/"); ok {
			s.toTree(c, rest)
			return
		}
	}
	s.notFoundPage(c)
}

// notebook6Address sends a browser's /notebooks/<path> (Notebook 6's address of a notebook,
// JupyterHub's default_url, old bookmarks) to the page of what is at path; a notebook id there
// is the older IPython interface's, which the route serves.
func (s *Server) notebook6Address(c *gin.Context) {
	if id := c.Param("id"); wantsPage(c.Request) && !contents.IsNotebookID(id) {
		s.toTree(c, id)
	}
}

// toTree redirects to /tree/<p>, which shows what is there: a notebook's page, a directory's
// listing, a file.
func (s *Server) toTree(c *gin.Context, p string) {
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, s.opts.BaseURL+"tree/"+escapePath(strings.Trim(p, "/"), false))
	c.Abort()
}

// notFoundPage answers a path nothing serves: with a page for a browser's request for one
// (outside the API), else with Jupyter's JSON.
func (s *Server) notFoundPage(c *gin.Context) {
	p, _ := strings.CutPrefix(c.Request.URL.Path, s.opts.BaseURL)
	if !wantsPage(c.Request) || p == "api" || strings.HasPrefix(p, "api/") {
		s.abortErr(c, errNotFound)
		return
	}
	s.renderMessage(c, http.StatusNotFound, "Not found", "There is no page at this address.", "")
}

// loginFirst sends a browser that is not logged in to the login page, which brings it back.
// Everything else goes on to authenticate.
func (s *Server) loginFirst(c *gin.Context) {
	if !wantsPage(c.Request) {
		return
	}
	id, err := s.auth.identify(c.Request)
	if err == nil && id.user == nil {
		c.Header("Cache-Control", "no-store")
		c.Redirect(http.StatusFound, s.opts.BaseURL+"login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
		c.Abort()
	}
}

// sameSiteNavigation refuses a page route that changes something (new, copy) when another
// site sent the browser there: a link or an image elsewhere must not make notebooks.
func (s *Server) sameSiteNavigation(c *gin.Context) {
	switch c.GetHeader("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return
	}
	s.renderMessage(c, http.StatusForbidden, "Refused", "This page makes a notebook, and another site sent you here. Open it from nbkube's own pages.", "")
	c.Abort()
}

// getRoot is GET /: the dashboard of the root directory for a browser; for an API client, as
// before the pages, a redirect to the root listing.
func (s *Server) getRoot(c *gin.Context) {
	if !wantsPage(c.Request) {
		c.Redirect(http.StatusFound, s.opts.BaseURL+"api/contents")
		return
	}
	s.renderApp(c, "dashboard", "", "")
}

// getTree is GET /tree/<path>: the dashboard of a directory, a notebook's page (by its id), or
// the file itself.
func (s *Server) getTree(c *gin.Context) error {
	p := strings.Trim(c.Param("path"), "/")
	ctx := c.Request.Context()
	isFile, isDir, err := s.store(ctx).Exists(ctx, p)
	switch {
	case err != nil:
		return err
	case isDir:
		s.renderApp(c, "dashboard", p, "")
	case isFile && strings.HasSuffix(p, notebookExt):
		id, err := s.store(ctx).NotebookID(ctx, p)
		if err != nil {
			return err
		}
		c.Redirect(http.StatusFound, s.opts.BaseURL+id)
	case isFile:
		c.Redirect(http.StatusFound, s.opts.BaseURL+"files/"+escapePath(p, false))
	default:
		s.renderMessage(c, http.StatusNotFound, "Not found", "There is no file or directory "+p+".", "")
	}
	return nil
}

// getNotebookPage is GET /<notebook_id>: the notebook's page.
func (s *Server) getNotebookPage(c *gin.Context) error {
	return s.renderByID(c, "notebook")
}

// getPrintPage is GET /<notebook_id>/print: the notebook's print view.
func (s *Server) getPrintPage(c *gin.Context) error {
	return s.renderByID(c, "print")
}

// renderByID renders app for the notebook whose id the path names.
func (s *Server) renderByID(c *gin.Context, app string) error {
	id := c.Param("id")
	p, err := s.store(c.Request.Context()).NotebookPath(c.Request.Context(), id)
	if err != nil {
		return err
	}
	s.renderApp(c, app, p, id)
	return nil
}

// getCopyPage is GET /<notebook_id>/copy: it copies the notebook beside it, as the contents
// API copies (name-Copy1.ipynb), and opens the copy's page.
func (s *Server) getCopyPage(c *gin.Context) error {
	ctx := c.Request.Context()
	st := s.store(ctx)
	p, err := st.NotebookPath(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	dir, _ := path.Split(p)
	copied, err := st.Copy(ctx, p, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return err
	}
	return s.openNotebook(c, copied.Path)
}

// getNew is GET /new: a new notebook (Untitled.ipynb, ...) in ?dir= (the root by default)
// for ?kernel= (the user's default kernel spec when absent), opened on its page.
func (s *Server) getNew(c *gin.Context) error {
	ctx := c.Request.Context()
	spec, err := s.newNotebookSpec(c, c.Query("kernel"))
	if err != nil {
		return err
	}
	dir := strings.Trim(c.Query("dir"), "/")
	st := s.store(ctx)
	m, err := st.NewUntitled(ctx, dir, jupyter.TypeNotebook, notebookExt)
	if err != nil {
		return err
	}
	if spec != nil {
		if err := saveKernelSpec(ctx, st, m.Path, spec); err != nil {
			return err
		}
	}
	return s.openNotebook(c, m.Path)
}

// openNotebook redirects to the page of the notebook at p.
func (s *Server) openNotebook(c *gin.Context, p string) error {
	id, err := s.store(c.Request.Context()).NotebookID(c.Request.Context(), p)
	if err != nil {
		return err
	}
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, s.opts.BaseURL+id)
	return nil
}

// newNotebookSpec is the kernel spec a new notebook is for: the one asked for, which must be
// among those the user may start, or the user's default; nil when the server has none.
func (s *Server) newNotebookSpec(c *gin.Context, asked string) (*jupyter.KernelSpec, error) {
	specs, err := s.userKernelSpecs(c.Request.Context(), *userOf(c))
	if err != nil {
		return nil, err
	}
	name := asked
	if name == "" {
		name = s.defaultKernelSpec(specs)
	}
	for i := range specs {
		if specs[i].Name == name {
			return &specs[i], nil
		}
	}
	if asked != "" {
		return nil, domainerr.NotFound("No such kernel spec %s", asked)
	}
	return nil, nil
}

// saveKernelSpec writes the kernel spec into the new notebook's metadata, as a front end's
// first save would, so that its page starts the right kernel.
func saveKernelSpec(ctx context.Context, st *contents.Store, p string, ks *jupyter.KernelSpec) error {
	nb := map[string]any{
		"cells": []any{},
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": ks.Name, "display_name": ks.Spec.DisplayName, "language": ks.Spec.Language},
			"language_info": map[string]any{"name": ks.Spec.Language},
		},
		"nbformat":       4,
		"nbformat_minor": 5,
	}
	body, err := json.Marshal(nb)
	if err != nil {
		return err
	}
	_, err = st.Save(ctx, p, &jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON, Content: body})
	return err
}

// renderApp answers with the shell of a page (dashboard, notebook, print) of p.
func (s *Server) renderApp(c *gin.Context, page, p, id string) {
	title := "nbkube"
	switch {
	case page == "dashboard" && p == "":
		title = "nbkube: home"
	case p != "":
		title = path.Base(p) + " - nbkube"
	}
	s.renderPage(c, title, pageConfig{Page: page, Path: p, NotebookID: id})
}

// renderPage answers with the shell of the page cfg names, titled title; the configuration's
// base URL, user and login are filled in here.
func (s *Server) renderPage(c *gin.Context, title string, cfg pageConfig) {
	if !assetBuilt(s.opts.Assets) {
		s.renderMessage(c, http.StatusServiceUnavailable, "The web pages are not built",
			"This nbkube binary was built without its web pages. Build them (Node.js and npm are needed), then the binary:",
			"make web build\n# or: (cd web && npm ci && node build.mjs) && go build ./cmd/nbkube")
		return
	}
	// A browser holds a login cookie (the printed URL's ?token= made one) unless it proved
	// itself with an Authorization header, which nothing ends.
	cfg.BaseURL, cfg.User, cfg.CanLogout = s.opts.BaseURL, userOf(c).Name, c.GetHeader("Authorization") == ""
	cfg.TerminalsAvailable = s.opts.Terminals != nil
	data := appPage{
		Title: title, Page: cfg.Page, Static: s.opts.BaseURL + assetsPath, API: s.opts.BaseURL + "api", Favicon: s.opts.BaseURL + faviconPath,
		Config: cfg,
	}
	var buf bytes.Buffer
	if err := appTemplate.Execute(&buf, data); err != nil {
		s.abortErr(c, err)
		return
	}
	pageHeaders(c)
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}

// page adapts a page handler that returns its error to Gin, as handle does for the API:
// pageError answers the error.
func (s *Server) page(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.pageError(c, err)
		}
	}
}

// pageError answers a page route's error with a page that says what went wrong, with the
// status the REST interface would answer.
func (s *Server) pageError(c *gin.Context, err error) {
	status, body, failed := answerTo(err)
	if failed {
		s.opts.Log.Error(err, "Request failed", "method", c.Request.Method, "path", c.Request.URL.Path)
	}
	title := http.StatusText(status)
	if errors.Is(err, domainerr.ErrNotFound) || status == http.StatusNotFound {
		title = "Not found"
	}
	s.renderMessage(c, status, title, body.Message, "")
}

// renderMessage answers with a page that tells title and message (and code, preformatted).
func (s *Server) renderMessage(c *gin.Context, status int, title, message, code string) {
	var buf bytes.Buffer
	if err := messageTemplate.Execute(&buf, messagePage{Title: title, Message: message, Code: code, Home: s.opts.BaseURL, Favicon: s.opts.BaseURL + faviconPath}); err != nil {
		s.abortErr(c, err)
		return
	}
	pageHeaders(c)
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
	c.Abort()
}

// pageHeaders are the headers of every page: the strict policy, and no caching (a page
// carries the user's name and the server's configuration).
func pageHeaders(c *gin.Context) {
	c.Header("Content-Security-Policy", pageCSP)
	c.Header("Cache-Control", "no-store")
	c.Header("Referrer-Policy", "same-origin")
}

// assetBuilt reports whether assets holds the built pages.
func assetBuilt(assets fs.FS) bool {
	_, err := fs.Stat(assets, "dashboard.js")
	return err == nil
}

// getAsset is GET /static/nbkube/<file>: the pages' scripts, styles and fonts. Names with a
// content hash (chunk-*, asset-*) never change and are cached for a year; the entry points
// are revalidated by their entity tag.
func (s *Server) getAsset(c *gin.Context) {
	name := strings.TrimPrefix(c.Param("file"), "/")
	if name == "" || strings.HasPrefix(name, ".") || !fs.ValidPath(name) {
		s.abortErr(c, errNotFound)
		return
	}
	if strings.HasSuffix(name, ".gz") {
		s.abortErr(c, errNotFound)
		return
	}
	h := c.Writer.Header()
	// The build stores scripts and styles gzipped beside them too.
	file := name
	if _, err := fs.Stat(s.opts.Assets, name+".gz"); err == nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(c.Request) {
			file = name + ".gz"
			h.Set("Content-Encoding", "gzip")
		}
	}
	data, err := fs.ReadFile(s.opts.Assets, file)
	if err != nil {
		s.abortErr(c, errNotFound)
		return
	}
	tag, ok := s.assetTags.Load(file)
	if !ok {
		sum := sha256.Sum256(data)
		tag = `"` + hex.EncodeToString(sum[:12]) + `"`
		s.assetTags.Store(file, tag)
	}
	h.Set("ETag", tag.(string))
	if strings.HasPrefix(name, "chunk-") || strings.HasPrefix(name, "asset-") {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(c.Writer, c.Request, name, time.Time{}, bytes.NewReader(data))
}

// acceptsGzip reports whether the client takes gzip-encoded answers.
func acceptsGzip(r *http.Request) bool {
	for _, a := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(a, ",") {
			enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}
