package agentapi

import (
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The agent imports this package: anything beyond the standard library would grow every
// kernel pod's agent binary, and a Kubernetes import would bring the whole client along.
func TestAgentAPI_ImportsTheStandardLibraryOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			pkg, err := build.Import(path, "", build.FindOnly)
			if err != nil || !pkg.Goroot {
				t.Errorf("%s imports %q, which is not in the standard library", name, path)
			}
		}
	}
}
