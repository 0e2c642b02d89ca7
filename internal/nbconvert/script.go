package nbconvert

import (
	"strings"
)

// exportScript is nbconvert's "script": the exporter the kernel names in
// language_info.nbconvert_exporter (Python's for IPython kernels), else the code of the
// cells with the language's file extension and MIME type.
func exportScript(nb *notebook, o *out, opts Options) (*Result, error) {
	li := nb.Metadata.LanguageInfo
	if name := li.NbconvertExporter; name != "" && name != "script" {
		if ex, ok := exporters[name]; ok {
			return ex(nb, o, opts)
		}
	}
	ext := li.FileExtension
	if ext == "" {
		ext = ".txt"
	}
	mime := li.Mimetype
	if mime == "" {
		mime = "text/plain"
	}
	// The template's leading newlines are trimmed, as nbconvert trims them.
	start := true
	write := func(s string) {
		if start {
			s = strings.TrimLeft(s, "\r\n")
			start = s == ""
		}
		o.w(s)
	}
	for i := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[i]
		switch c.CellType {
		case "code":
			write("\n" + string(c.Source) + "\n")
		case "raw":
			if c.includesRaw(strings.ToLower(mime), "") {
				write(string(c.Source))
			}
		}
	}
	return &Result{Extension: ext, Mimetype: mime}, nil
}

// exportPython is nbconvert's "python": a script with a shebang, each code cell after its
// prompt as a comment and with IPython's syntax (magics, shell escapes, help) turned into
// the calls IPython makes of it, and Markdown cells as comments.
func exportPython(nb *notebook, o *out, _ Options) (*Result, error) {
	o.w("#!/usr/bin/env python\n# coding: utf-8\n")
	for i := range nb.Cells {
		if o.check() != nil {
			break
		}
		c := &nb.Cells[i]
		switch c.CellType {
		case "code":
			count := " "
			if c.ExecutionCount != nil && *c.ExecutionCount != 0 {
				count = c.executionCount()
			}
			o.w("\n# In[", count, "]:\n\n\n", ipythonToPython(string(c.Source)), "\n")
		case "markdown":
			o.w("\n# ", strings.ReplaceAll(string(c.Source), "\n", "\n# "), "\n")
		case "raw":
			if c.includesRaw("text/x-python", "") {
				o.w(string(c.Source))
			}
		}
	}
	return &Result{Extension: ".py", Mimetype: "text/x-python"}, nil
}
