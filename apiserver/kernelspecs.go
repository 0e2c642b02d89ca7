package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// KernelSpecLister reads the kernel specs users can start.
type KernelSpecLister interface {
	// ListKernelSpecs returns every kernel spec, sorted by name.
	ListKernelSpecs(ctx context.Context) ([]nbv1.KernelSpec, error)
	// GetKernelSpec returns the spec called name, matched case-insensitively; an error
	// matching repository.ErrNotFound when there is none.
	GetKernelSpec(ctx context.Context, name string) (*nbv1.KernelSpec, error)
}

// defaultKernelSpec is Jupyter's default kernel name (jupyter_client's NATIVE_KERNEL_NAME).
const defaultKernelSpec = "python3"

// logoTypes are the Content-Types of the logo files the KernelSpec CRD admits.
var logoTypes = map[string]string{".png": "image/png", ".svg": "image/svg+xml"}

// getKernelSpecs is GET /api/kernelspecs.
func (s *Server) getKernelSpecs(c *gin.Context) {
	var specs []nbv1.KernelSpec
	if s.opts.KernelSpecs != nil {
		var err error
		if specs, err = s.opts.KernelSpecs.ListKernelSpecs(c.Request.Context()); err != nil {
			s.abortErr(c, err)
			return
		}
	}
	model := jupyter.KernelSpecs{Default: s.defaultKernelSpec(specs), KernelSpecs: make(map[string]jupyter.KernelSpec, len(specs))}
	for i := range specs {
		model.KernelSpecs[specs[i].Name] = s.kernelSpecModel(specs[i].Name, &specs[i])
	}
	c.JSON(http.StatusOK, model)
}

// defaultKernelSpec is the configured default when it is among specs (sorted by name), else
// the first of them: a default that cannot start would leave clients without a kernel.
func (s *Server) defaultKernelSpec(specs []nbv1.KernelSpec) string {
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
func (s *Server) getKernelSpec(c *gin.Context) {
	name := c.Param("name")
	ks, err := s.kernelSpec(c.Request.Context(), name)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	c.JSON(http.StatusOK, s.kernelSpecModel(name, ks))
}

// getKernelSpecResource serves /kernelspecs/<name>/<file>: the spec's logo, and nothing
// else (Jupyter serves any file of the spec's directory; nbkube has only the logo).
func (s *Server) getKernelSpecResource(c *gin.Context) {
	ks, err := s.kernelSpec(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.abortErr(c, err)
		return
	}
	logo := ks.Spec.Logo
	if logo == nil || strings.TrimPrefix(c.Param("file"), "/") != logo.FileName {
		abortJSON(c, http.StatusNotFound, "Not Found", nil)
		return
	}
	ext := path.Ext(logo.FileName)
	h := c.Writer.Header()
	h.Set("Content-Type", logoTypes[ext])
	// An SVG opened on its own is a page of this origin: it must not run scripts.
	h.Set("Content-Security-Policy", h.Get("Content-Security-Policy")+"; sandbox")
	if ext == ".png" {
		// Jupyter's month for logos.
		h.Set("Cache-Control", "max-age=2592000")
	}
	sum := sha256.Sum256(logo.Data)
	h.Set("Etag", `"`+hex.EncodeToString(sum[:])+`"`)
	http.ServeContent(c.Writer, c.Request, logo.FileName, time.Time{}, bytes.NewReader(logo.Data))
}

func (s *Server) kernelSpec(ctx context.Context, name string) (*nbv1.KernelSpec, error) {
	if s.opts.KernelSpecs == nil {
		return nil, notFound("Kernel spec %s not found", name)
	}
	return s.opts.KernelSpecs.GetKernelSpec(ctx, name)
}

// kernelSpecModel is Jupyter Server's kernelspec_model of ks under name.
func (s *Server) kernelSpecModel(name string, ks *nbv1.KernelSpec) jupyter.KernelSpec {
	spec := &ks.Spec
	file := jupyter.KernelSpecFile{
		Argv:          spec.Argv,
		Env:           spec.Env,
		DisplayName:   spec.DisplayName,
		Language:      spec.Language,
		InterruptMode: string(spec.InterruptMode),
		Metadata:      json.RawMessage(`{}`),
	}
	if file.Env == nil {
		file.Env = map[string]string{}
	}
	if file.InterruptMode == "" {
		file.InterruptMode = string(nbv1.InterruptModeSignal)
	}
	if spec.Metadata != nil && len(spec.Metadata.Raw) > 0 {
		file.Metadata = spec.Metadata.Raw
	}
	resources := map[string]string{}
	if logo := spec.Logo; logo != nil {
		resources[strings.TrimSuffix(logo.FileName, path.Ext(logo.FileName))] =
			s.opts.BaseURL + "kernelspecs/" + escapePath(name, false) + "/" + logo.FileName
	}
	return jupyter.KernelSpec{Name: name, Spec: file, Resources: resources}
}
