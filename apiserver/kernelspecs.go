package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// KernelSpecLister reads the kernel specs users can start.
type KernelSpecLister interface {
	// ListKernelSpecs returns every kernel spec, sorted by name. A model's Resources map each
	// resource to its file name.
	ListKernelSpecs(ctx context.Context) ([]jupyter.KernelSpec, error)
	// GetKernelSpec returns the spec called name, matched case-insensitively; an error
	// matching domainerr.ErrNotFound when there is none.
	GetKernelSpec(ctx context.Context, name string) (jupyter.KernelSpec, error)
	// GetKernelSpecResource returns a file of the spec called name; an error matching
	// domainerr.ErrNotFound when there is no such spec or file. A file name is one path
	// segment.
	GetKernelSpecResource(ctx context.Context, name, file string) (repository.KernelSpecResource, error)
}

// defaultKernelSpec is Jupyter's default kernel name (jupyter_client's NATIVE_KERNEL_NAME).
const defaultKernelSpec = "python3"

// getKernelSpecs is GET /api/kernelspecs.
func (s *Server) getKernelSpecs(c *gin.Context) error {
	specs, err := s.userKernelSpecs(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	model := jupyter.KernelSpecs{Default: s.defaultKernelSpec(specs), KernelSpecs: make(map[string]jupyter.KernelSpec, len(specs))}
	for _, ks := range specs {
		model.KernelSpecs[ks.Name] = s.servedKernelSpec(ks.Name, ks)
	}
	c.JSON(http.StatusOK, model)
	return nil
}

// userKernelSpecs are the kernel specs u may start, sorted by name: a user whose policies
// allow only some is offered those, and a default among them, wherever a spec is offered or
// picked for the user (the spec list, a start that names none, /new): a launcher shows what
// the user may start, and a start without a name starts one the user may.
func (s *Server) userKernelSpecs(ctx context.Context, u User) ([]jupyter.KernelSpec, error) {
	specs, err := s.opts.KernelSpecs.ListKernelSpecs(ctx)
	if err != nil {
		return nil, err
	}
	if s.opts.Quotas == nil {
		return specs, nil
	}
	q, err := s.opts.Quotas.Quota(ctx, u)
	if err != nil {
		return nil, err
	}
	if q != nil && q.KernelSpecs != nil {
		specs = slices.DeleteFunc(specs, func(ks jupyter.KernelSpec) bool { return !slices.Contains(q.KernelSpecs, ks.Name) })
	}
	return specs, nil
}

// defaultKernelSpec is the configured default when it is among specs (sorted by name), else
// the first of them: a default that cannot start would leave clients without a kernel.
func (s *Server) defaultKernelSpec(specs []jupyter.KernelSpec) string {
	want := strings.ToLower(s.opts.DefaultKernelSpec)
	if want == "" {
		want = defaultKernelSpec
	}
	for _, ks := range specs {
		if ks.Name == want {
			return want
		}
	}
	if len(specs) > 0 {
		return specs[0].Name
	}
	return want
}

// getKernelSpec is GET /api/kernelspecs/<name>. The model carries the name as asked for, in
// its case, as Jupyter Server's does.
func (s *Server) getKernelSpec(c *gin.Context) error {
	name := c.Param("name")
	ks, err := s.opts.KernelSpecs.GetKernelSpec(c.Request.Context(), name)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, s.servedKernelSpec(name, ks))
	return nil
}

// servedKernelSpec is the model of a spec as served under name: Jupyter Server's
// kernelspec_model, whose resources are URLs under the base URL.
func (s *Server) servedKernelSpec(name string, ks jupyter.KernelSpec) jupyter.KernelSpec {
	resources := make(map[string]string, len(ks.Resources))
	for resource, file := range ks.Resources {
		resources[resource] = s.opts.BaseURL + "kernelspecs/" + escapePath(name, false) + "/" + file
	}
	ks.Name, ks.Resources = name, resources
	return ks
}

// getKernelSpecResource serves /kernelspecs/<name>/<file>, any file of the spec as Jupyter
// serves its directory's, with its MIME type from its name as /files does. Only files at the
// top of a spec exist (see KernelSpecLister), so a path of more than one segment, "." or ".."
// is no file.
func (s *Server) getKernelSpecResource(c *gin.Context) error {
	file := strings.TrimPrefix(c.Param("file"), "/")
	if file == "" || file == "." || file == ".." || strings.Contains(file, "/") {
		return errNotFound
	}
	res, err := s.opts.KernelSpecs.GetKernelSpecResource(c.Request.Context(), c.Param("name"), file)
	if err != nil {
		return err
	}
	h := c.Writer.Header()
	h.Set("Content-Type", fileMimetype(res.FileName))
	// An SVG or HTML file opened on its own is a page of this origin: it must not run
	// scripts. A kernel.js that a page loads is not confined by its own CSP.
	sandbox(c, "")
	if path.Ext(res.FileName) == ".png" {
		// Jupyter's month for logos.
		h.Set("Cache-Control", "max-age=2592000")
	}
	sum := sha256.Sum256(res.Data)
	h.Set("Etag", `"`+hex.EncodeToString(sum[:])+`"`)
	http.ServeContent(c.Writer, c.Request, res.FileName, time.Time{}, bytes.NewReader(res.Data))
	return nil
}
