package apiserver

import (
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// The IPython notebook's first web service: notebooks of one flat directory (the contents
// root), addressed by ids that stay with the file.

// legacyNotebook is an entry of GET /notebooks.
type legacyNotebook struct {
	NotebookID string  `json:"notebook_id"`
	Name       string  `json:"name"`
	KernelID   *string `json:"kernel_id"`
}

const notebookExt = ".ipynb"

func (s *Server) listLegacyNotebooks(c *gin.Context) {
	ctx := c.Request.Context()
	root, err := s.opts.Contents.Get(ctx, "", contents.GetOptions{Type: jupyter.TypeDirectory, Content: true})
	if err != nil {
		s.abortErr(c, err)
		return
	}
	entries, _ := root.Content.([]jupyter.ContentsModel)
	// A notebook's kernel is its session's.
	kernels := map[string]string{}
	if s.opts.Sessions != nil {
		sessions, err := s.opts.Sessions.ListSessions(ctx, *userOf(c))
		if err != nil {
			s.abortErr(c, err)
			return
		}
		for _, se := range sessions {
			if se.Kernel != nil {
				kernels[se.Path] = se.Kernel.ID
			}
		}
	}
	list := []legacyNotebook{}
	for _, e := range entries {
		if e.Type != jupyter.TypeNotebook {
			continue
		}
		id, err := s.opts.Contents.NotebookID(ctx, e.Path)
		if err != nil {
			s.abortErr(c, err)
			return
		}
		nb := legacyNotebook{NotebookID: id, Name: strings.TrimSuffix(e.Name, notebookExt)}
		if k, ok := kernels[e.Path]; ok {
			nb.KernelID = &k
		}
		list = append(list, nb)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	c.JSON(http.StatusOK, list)
}

// newLegacyNotebook saves the body as a new notebook (named by ?name=), or makes an empty
// one, and answers with its id.
func (s *Server) newLegacyNotebook(c *gin.Context) {
	ctx := c.Request.Context()
	if err := legacyFormat(c); err != nil {
		s.abortErr(c, err)
		return
	}
	var nb jupyter.SaveModel
	present, err := readJSONRaw(c, &nb.Content)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	var m *jupyter.ContentsModel
	if present {
		name := c.Query("name")
		if name == "" {
			name = "Untitled"
		}
		p, perr := s.freeNotebookName(c, name)
		if perr != nil {
			s.abortErr(c, perr)
			return
		}
		nb.Type, nb.Format = jupyter.TypeNotebook, jupyter.FormatJSON
		m, err = s.opts.Contents.Save(ctx, p, &nb)
	} else {
		m, err = s.opts.Contents.NewUntitled(ctx, "", jupyter.TypeNotebook, notebookExt)
	}
	if err != nil {
		s.abortErr(c, err)
		return
	}
	id, err := s.opts.Contents.NotebookID(ctx, m.Path)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.Header("Location", s.opts.BaseURL+"notebooks/"+id)
	c.JSON(http.StatusCreated, id)
}

// freeNotebookName is name.ipynb, or name1.ipynb, name2.ipynb, ... when that is taken.
func (s *Server) freeNotebookName(c *gin.Context, name string) (string, error) {
	if strings.Contains(name, "/") {
		return "", badRequest("Invalid notebook name: %s", quote(name))
	}
	for i := 0; i < 10000; i++ {
		p := name + notebookExt
		if i > 0 {
			p = fmt.Sprintf("%s%d%s", name, i, notebookExt)
		}
		isFile, isDir, err := s.opts.Contents.Exists(c.Request.Context(), p)
		if err != nil {
			return "", err
		}
		if !isFile && !isDir {
			return p, nil
		}
	}
	return "", &apiError{status: http.StatusConflict, message: "No free notebook name for " + quote(name)}
}

func (s *Server) legacyPath(c *gin.Context) (string, error) {
	p, err := s.opts.Contents.NotebookPath(c.Request.Context(), c.Param("id"))
	if err != nil {
		return "", err
	}
	return p, nil
}

func legacyFormat(c *gin.Context) error {
	if f := c.DefaultQuery("format", "json"); f != "json" {
		return badRequest("Unsupported notebook format %s: only json is served", quote(f))
	}
	return nil
}

func (s *Server) getLegacyNotebook(c *gin.Context) {
	err := legacyFormat(c)
	var p string
	if err == nil {
		p, err = s.legacyPath(c)
	}
	var m *jupyter.ContentsModel
	if err == nil {
		m, err = s.opts.Contents.Get(c.Request.Context(), p, contents.GetOptions{Type: jupyter.TypeNotebook, Content: true})
	}
	if err != nil {
		s.abortErr(c, err)
		return
	}
	name := strings.TrimSuffix(path.Base(p), notebookExt)
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.ipynb"`, strings.ReplaceAll(name, `"`, "")))
	c.Header("Last-Modified", m.LastModified.UTC().Format(http.TimeFormat))
	c.JSON(http.StatusOK, m.Content)
}

// putLegacyNotebook saves the body over the notebook, renaming it first when ?name= differs.
func (s *Server) putLegacyNotebook(c *gin.Context) {
	ctx := c.Request.Context()
	err := legacyFormat(c)
	var p string
	if err == nil {
		p, err = s.legacyPath(c)
	}
	var nb jupyter.SaveModel
	var present bool
	if err == nil {
		present, err = readJSONRaw(c, &nb.Content)
		if err == nil && !present {
			err = badRequest("JSON body missing")
		}
	}
	if name := c.Query("name"); err == nil && name != "" && name+notebookExt != path.Base(p) {
		if strings.Contains(name, "/") {
			err = badRequest("Invalid notebook name: %s", quote(name))
		} else {
			var m *jupyter.ContentsModel
			if m, err = s.opts.Contents.Rename(ctx, p, path.Join(path.Dir(p), name+notebookExt)); err == nil {
				p = m.Path
			}
		}
	}
	if err == nil {
		nb.Type, nb.Format = jupyter.TypeNotebook, jupyter.FormatJSON
		_, err = s.opts.Contents.Save(ctx, p, &nb)
	}
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) deleteLegacyNotebook(c *gin.Context) {
	p, err := s.legacyPath(c)
	if err == nil {
		err = s.opts.Contents.Delete(c.Request.Context(), p)
	}
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
