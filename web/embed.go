// Package web holds nbkube's web pages' built scripts and styles (dist/, made from src/ by
// `make web`), embedded in the binary. A binary built before them has only dist's placeholder:
// Built reports false and the server shows a page that says how to build them.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Assets are the built files, by name (dashboard.js, notebook.css, chunk-*.js, ...).
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it exists
	}
	return sub
}

// Built reports whether the assets were built into this binary.
func Built() bool {
	_, err := fs.Stat(Assets(), "dashboard.js")
	return err == nil
}
