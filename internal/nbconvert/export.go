package nbconvert

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
)

// Result is a notebook converted to one format.
type Result struct {
	// Body is the converted notebook.
	Body []byte
	// Extension is the file extension of the output, with its dot, as nbconvert gives it.
	Extension string
	// Mimetype is the output's MIME type.
	Mimetype string
	// Files are the outputs the format keeps beside the document (the images of the text
	// formats), in the order the document refers to them.
	Files []File
}

// File is an output written beside the document.
type File struct {
	Name string
	Data []byte
}

// Options tune an export.
type Options struct {
	// Name is the notebook's file name without its extension: the title of the HTML page and
	// of the LaTeX document, as nbconvert takes it.
	Name string
	// MaxOutputBytes bounds the export; DefaultMaxOutputBytes when zero.
	MaxOutputBytes int
}

// DefaultMaxOutputBytes bounds an export unless Options say otherwise. Highlighted code takes
// several times its source's size, so the bound is well above any notebook a server accepts
// while keeping one export's memory in check.
const DefaultMaxOutputBytes = 256 << 20

// ErrUnknownFormat is returned for a format nbkube does not export to.
var ErrUnknownFormat = errors.New("no exporter for format")

// exporter converts a decoded notebook.
type exporter func(nb *notebook, o *out, opts Options) (*Result, error)

// exporters are filled in init: the script exporter looks them up.
var exporters map[string]exporter

func init() {
	exporters = map[string]exporter{
		"asciidoc": exportAsciiDoc,
		"html":     exportHTML,
		"latex":    exportLaTeX,
		"markdown": exportMarkdown,
		"python":   exportPython,
		"rst":      exportRST,
		"script":   exportScript,
	}
}

// Formats are the formats Export converts to.
func Formats() []string {
	f := []string{"notebook"}
	for name := range exporters {
		f = append(f, name)
	}
	sort.Strings(f)
	return f
}

// ListedMimetype is the output MIME type Jupyter lists for format in /api/nbconvert: the
// exporter's own, and none for "script", whose output takes the kernel language's type.
func ListedMimetype(format string) string {
	switch format {
	case "asciidoc":
		return "text/asciidoc"
	case "html":
		return "text/html"
	case "latex":
		return "text/latex"
	case "markdown":
		return "text/markdown"
	case "notebook":
		return "application/json"
	case "python":
		return "text/x-python"
	case "rst":
		return "text/restructuredtext"
	}
	return ""
}

// Export converts the nbformat 4 notebook data (as stored, or as the contents API returns it)
// to format. It stops with ctx's error when ctx ends, and with ErrTooLarge when the output
// would exceed its bound; a notebook it cannot read is an error wrapping its reason.
func Export(ctx context.Context, format string, data []byte, opts Options) (*Result, error) {
	limit := opts.MaxOutputBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	if format == "notebook" {
		return exportNotebook(ctx, data, limit)
	}
	ex, ok := exporters[format]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownFormat, format)
	}
	nb, err := decode(data)
	if err != nil {
		return nil, err
	}
	o := newOut(ctx, limit)
	r, err := ex(nb, o, opts)
	if err != nil {
		return nil, err
	}
	if r.Body, err = o.result(); err != nil {
		return nil, err
	}
	return r, nil
}

// Zip packs a result with files into one archive, as Jupyter Server serves such exports: the
// document named after the notebook, and each file by its base name.
func Zip(name string, r *Result) ([]byte, error) {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	add := func(n string, data []byte) error {
		w, err := z.Create(n)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := add(name+r.Extension, r.Body); err != nil {
		return nil, err
	}
	for _, f := range r.Files {
		if err := add(path.Base(f.Name), f.Data); err != nil {
			return nil, err
		}
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
