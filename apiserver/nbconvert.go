package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/nbconvert"
)

// exportTimeout bounds one export: nbconvert's exporters run in linear time, so a notebook that
// takes longer is one no client waits for.
const exportTimeout = time.Minute

// errExportTimeout is an export that ran out of its time.
var errExportTimeout = fmt.Errorf("the export took longer than %s", exportTimeout)

// exportLimit bounds an export's output: twice the largest notebook the server accepts, since
// highlighting and escaping grow a notebook's text.
func (s *Server) exportLimit() int {
	return int(2 * s.opts.MaxBodyBytes)
}

// getNbconvert is GET /api/nbconvert: the formats that /nbconvert/ serves, with the output
// MIME types Jupyter lists for them.
func (s *Server) getNbconvert(c *gin.Context) {
	list := map[string]jupyter.Exporter{}
	for _, f := range nbconvert.Formats() {
		list[f] = jupyter.Exporter{OutputMimetype: nbconvert.ListedMimetype(f)}
	}
	c.JSON(http.StatusOK, list)
}

// exportFile is GET /nbconvert/<format>/<path>: the notebook at path converted, as an
// attachment with ?download=true. Anything but a notebook is sent to where it is served, as
// Jupyter sends it.
func (s *Server) exportFile(c *gin.Context) error {
	format, p := c.Param("format"), apiPath(c)
	// Jupyter takes a same-site Referer in place of the XSRF token for GET: the export is
	// read with the user's cookie.
	if !sameSite(c) {
		return domainerr.Forbidden("Blocking Cross Origin request")
	}
	if !slices.Contains(nbconvert.Formats(), format) {
		return domainerr.NotFound("No exporter for format: %s", format)
	}
	if s.hidden(p) {
		return domainerr.NotFound("file or directory %s does not exist", quote(p))
	}
	ctx := c.Request.Context()
	m, err := s.store(ctx).Get(ctx, p, contents.GetOptions{})
	if err != nil {
		return err
	}
	switch m.Type {
	case jupyter.TypeDirectory:
		c.Redirect(http.StatusFound, s.opts.BaseURL+"tree"+escapePath(p, true))
		return nil
	case jupyter.TypeFile:
		c.Redirect(http.StatusFound, s.opts.BaseURL+"files"+escapePath(p, true))
		return nil
	}
	m, err = s.store(ctx).Get(ctx, p, contents.GetOptions{Type: jupyter.TypeNotebook, Content: true})
	if err != nil {
		return err
	}
	data, err := contentBytes(m.Content)
	if err != nil {
		return err
	}
	r, err := s.export(ctx, format, data, m.Name)
	if err != nil {
		return err
	}
	c.Header("Last-Modified", m.LastModified.UTC().Format(http.TimeFormat))
	download := strings.EqualFold(c.DefaultQuery("download", "false"), "true")
	return writeExport(c, format, m.Name, r, download)
}

// exportModel is POST /nbconvert/<format>: the notebook of the contents model in the body
// converted.
func (s *Server) exportModel(c *gin.Context) error {
	format := c.Param("format")
	if !slices.Contains(nbconvert.Formats(), format) {
		return domainerr.NotFound("No exporter for format: %s", format)
	}
	var model struct {
		Name    *string         `json:"name"`
		Content json.RawMessage `json:"content"`
	}
	if err := readJSON(c, &model); err != nil {
		return err
	}
	if len(model.Content) == 0 || string(model.Content) == "null" {
		return domainerr.Invalid("No notebook content in body of request")
	}
	name := "notebook.ipynb"
	if model.Name != nil {
		name = *model.Name
	}
	r, err := s.export(c.Request.Context(), format, model.Content, name)
	if err != nil {
		return err
	}
	return writeExport(c, format, name, r, false)
}

// export converts data within the server's bounds of time and output size.
func (s *Server) export(ctx context.Context, format string, data []byte, name string) (*nbconvert.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	// The wait for a slot counts in the export's time.
	select {
	case s.exports <- struct{}{}:
		defer func() { <-s.exports }()
	case <-ctx.Done():
		return nil, errExportTimeout
	}
	r, err := nbconvert.Export(ctx, format, data, nbconvert.Options{Name: stem(name), MaxOutputBytes: s.exportLimit()})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, errExportTimeout
	}
	return r, err
}

// writeExport answers with an export: a zip of the document and its images when it has
// images beside it, else the document with its MIME type.
//
// An export is made of a user's notebook, and an admin may open another user's: opened on its
// own it would be a page of nbkube's origin whose scripts act with the reader's login. Every
// export is sandboxed (Jupyter Server sandboxes none; it serves one user). The HTML keeps its
// scripts (MathJax, the notebook's JavaScript outputs), as /files keeps a page's; the other
// formats are text and need none, and "script" takes its MIME type from the notebook, which
// may name text/html.
func writeExport(c *gin.Context, format, name string, r *nbconvert.Result, download bool) error {
	if format == "html" {
		sandbox(c, "allow-scripts")
	} else {
		sandbox(c, "")
	}
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-store, no-cache, must-revalidate, max-age=0")
	if len(r.Files) > 0 {
		z, err := nbconvert.Zip(stem(name), r)
		if err != nil {
			return err
		}
		h.Set("Content-Disposition", attachment(stem(name)+".zip"))
		c.Data(http.StatusOK, "application/zip", z)
		return nil
	}
	if download {
		h.Set("Content-Disposition", attachment(stem(name)+r.Extension))
	}
	c.Data(http.StatusOK, r.Mimetype+"; charset=utf-8", r.Body)
	return nil
}

// attachment is the Content-Disposition of a download named name, as Jupyter writes it.
func attachment(name string) string {
	return "attachment; filename*=utf-8''" + url.PathEscape(name)
}

// stem is a file name without its extension, as Python's os.path.splitext cuts it.
func stem(name string) string {
	base := strings.TrimLeft(name, ".")
	return name[:len(name)-len(base)] + strings.TrimSuffix(base, path.Ext(base))
}

// contentBytes is a notebook model's content as JSON.
func contentBytes(content any) ([]byte, error) {
	if raw, ok := content.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(content)
}
