package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/nbformat"
)

// The IPython notebook's first web service: notebooks of one flat directory (the contents
// root), addressed by ids that stay with the file. IPython 1.x's clients read and write
// nbformat 3: notebooks are served downgraded to it (its "json" format, the default), and
// a v3 notebook saved here is named by its metadata, as IPython's notebook manager named it.

const notebookExt = ".ipynb"

// listLegacyNotebooks is GET /notebooks: the notebooks of the root, with their kernels.
func (s *Server) listLegacyNotebooks(c *gin.Context) error {
	list, err := s.legacyNotebooks(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, list)
	return nil
}

// legacyNotebooks are the notebooks of the root by name; a notebook's kernel is its
// session's.
func (s *Server) legacyNotebooks(ctx context.Context, u User) ([]jupyter.LegacyNotebook, error) {
	root, err := s.store(ctx).Get(ctx, "", contents.GetOptions{Type: jupyter.TypeDirectory, Content: true})
	if err != nil {
		return nil, err
	}
	entries, _ := root.Content.([]jupyter.ContentsModel)
	sessions, err := s.opts.Sessions.ListSessions(ctx, u)
	if err != nil {
		return nil, err
	}
	kernels := map[string]string{}
	for _, se := range sessions {
		if se.Kernel != nil {
			kernels[se.Path] = se.Kernel.ID
		}
	}
	list := []jupyter.LegacyNotebook{}
	for _, e := range entries {
		if e.Type != jupyter.TypeNotebook {
			continue
		}
		id, err := s.store(ctx).NotebookID(ctx, e.Path)
		if err != nil {
			return nil, err
		}
		nb := jupyter.LegacyNotebook{NotebookID: id, Name: strings.TrimSuffix(e.Name, notebookExt)}
		if k, ok := kernels[e.Path]; ok {
			nb.KernelID = &k
		}
		list = append(list, nb)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
}

// newLegacyNotebook is POST /notebooks: it saves the body as a new notebook (named by
// legacyName), or makes an empty one, and answers with its id.
func (s *Server) newLegacyNotebook(c *gin.Context) error {
	if err := legacyFormat(c); err != nil {
		return err
	}
	nb := jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON}
	present, err := readJSONRaw(c, &nb.Content)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	var m *jupyter.ContentsModel
	if present {
		m, err = s.saveNewNotebook(ctx, legacyName(c, nb.Content), &nb)
	} else {
		m, err = s.store(ctx).NewUntitled(ctx, "", jupyter.TypeNotebook, notebookExt)
	}
	if err != nil {
		return err
	}
	id, err := s.store(ctx).NotebookID(ctx, m.Path)
	if err != nil {
		return err
	}
	c.Header("Location", s.opts.BaseURL+"notebooks/"+id)
	c.JSON(http.StatusCreated, id)
	return nil
}

// saveNewNotebook saves nb under a free name made of name, "Untitled" when empty.
func (s *Server) saveNewNotebook(ctx context.Context, name string, nb *jupyter.SaveModel) (*jupyter.ContentsModel, error) {
	if name == "" {
		name = "Untitled"
	}
	p, err := s.freeNotebookName(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.store(ctx).Save(ctx, p, nb)
}

// freeNotebookName is name.ipynb, or name1.ipynb, name2.ipynb, ... when that is taken.
func (s *Server) freeNotebookName(ctx context.Context, name string) (string, error) {
	if strings.Contains(name, "/") {
		return "", domainerr.Invalid("Invalid notebook name: %s", quote(name))
	}
	for i := 0; i < 10000; i++ {
		p := name + notebookExt
		if i > 0 {
			p = fmt.Sprintf("%s%d%s", name, i, notebookExt)
		}
		isFile, isDir, err := s.store(ctx).Exists(ctx, p)
		if err != nil {
			return "", err
		}
		if !isFile && !isDir {
			return p, nil
		}
	}
	return "", domainerr.Conflict("No free notebook name for %s", quote(name))
}

// legacyPath is the path of the notebook the request's id names.
func (s *Server) legacyPath(c *gin.Context) (string, error) {
	return s.store(c.Request.Context()).NotebookPath(c.Request.Context(), c.Param("id"))
}

// legacyNotebookPath is legacyPath for a request that reads or writes the notebook's
// content, which is served as JSON only.
func (s *Server) legacyNotebookPath(c *gin.Context) (string, error) {
	if err := legacyFormat(c); err != nil {
		return "", err
	}
	return s.legacyPath(c)
}

// legacyName is the name a request gives the notebook it saves: ?name=, or else the name
// in a v3 notebook's metadata (IPython 1.x's page renamed a notebook by saving it with a new
// one there).
func legacyName(c *gin.Context, body json.RawMessage) string {
	if name := c.Query("name"); name != "" {
		return name
	}
	var nb struct {
		Nbformat json.RawMessage `json:"nbformat"`
		Metadata struct {
			Name any `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &nb) != nil || string(nb.Nbformat) != "3" {
		return ""
	}
	name, _ := nb.Metadata.Name.(string)
	return name
}

func legacyFormat(c *gin.Context) error {
	if f := c.DefaultQuery("format", "json"); f != "json" {
		return domainerr.Invalid("Unsupported notebook format %s: only json is served", quote(f))
	}
	return nil
}

// getLegacyNotebook is GET /notebooks/<id>: the notebook's JSON in nbformat 3, as a
// download.
func (s *Server) getLegacyNotebook(c *gin.Context) error {
	p, err := s.legacyNotebookPath(c)
	if err != nil {
		return err
	}
	m, err := s.store(c.Request.Context()).Get(c.Request.Context(), p, contents.GetOptions{Type: jupyter.TypeNotebook, Content: true})
	if err != nil {
		return err
	}
	content, _ := m.Content.(json.RawMessage)
	name := strings.TrimSuffix(path.Base(p), notebookExt)
	v3, err := nbformat.DowngradeV3(content, name)
	if err != nil {
		return err
	}
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.ipynb"`, strings.ReplaceAll(name, `"`, "")))
	c.Header("Last-Modified", m.LastModified.UTC().Format(http.TimeFormat))
	c.JSON(http.StatusOK, v3)
	return nil
}

// putLegacyNotebook is PUT /notebooks/<id>: it saves the body over the notebook, renaming it
// first when the name legacyName finds differs.
func (s *Server) putLegacyNotebook(c *gin.Context) error {
	p, err := s.legacyNotebookPath(c)
	if err != nil {
		return err
	}
	nb := jupyter.SaveModel{Type: jupyter.TypeNotebook, Format: jupyter.FormatJSON}
	present, err := readJSONRaw(c, &nb.Content)
	if err != nil {
		return err
	}
	if !present {
		return domainerr.Invalid("JSON body missing")
	}
	ctx := c.Request.Context()
	if p, err = s.renameLegacyNotebook(ctx, p, legacyName(c, nb.Content)); err != nil {
		return err
	}
	if _, err := s.store(ctx).Save(ctx, p, &nb); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// renameLegacyNotebook renames the notebook at p to name (without its extension), unless
// name is empty or its name already; it returns the notebook's path.
func (s *Server) renameLegacyNotebook(ctx context.Context, p, name string) (string, error) {
	if name == "" || name+notebookExt == path.Base(p) {
		return p, nil
	}
	if strings.Contains(name, "/") {
		return "", domainerr.Invalid("Invalid notebook name: %s", quote(name))
	}
	m, err := s.store(ctx).Rename(ctx, p, path.Join(path.Dir(p), name+notebookExt))
	if err != nil {
		return "", err
	}
	return m.Path, nil
}

// deleteLegacyNotebook is DELETE /notebooks/<id>.
func (s *Server) deleteLegacyNotebook(c *gin.Context) error {
	p, err := s.legacyPath(c)
	if err != nil {
		return err
	}
	if err := s.store(c.Request.Context()).Delete(c.Request.Context(), userOf(c).Name, p); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
