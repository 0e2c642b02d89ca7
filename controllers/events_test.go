package controllers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The reasons admins read and filter on are those listed in api/v1alpha1. A named type keeps
// string variables out of recordEvent and setCondition, but an untyped string literal would
// still convert silently: this test finds one, and any event recorded around recordEvent.
func TestEvents_RecordedThroughRecordEventWithNamedReasons(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				switch fun.Sel.Name {
				case "Event", "Eventf", "AnnotatedEventf":
					if name != "events.go" {
						t.Errorf("%s: an event recorded with %s rather than recordEvent", fset.Position(call.Pos()), fun.Sel.Name)
					}
				}
			case *ast.Ident:
				reasonArg := map[string]int{"recordEvent": 4, "setCondition": 3}
				if i, ok := reasonArg[fun.Name]; ok && len(call.Args) > i {
					checked++
					if lit := stringLiteral(call.Args[i]); lit != "" {
						t.Errorf("%s: %s with the literal reason %s; name it in api/v1alpha1", fset.Position(call.Pos()), fun.Name, lit)
					}
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Errorf("only %d calls of recordEvent and setCondition found: is the test looking in the right place?", checked)
	}
}

// stringLiteral is a string literal in e (such as nbv1.EventReason("X")), or "".
func stringLiteral(e ast.Expr) string {
	found := ""
	ast.Inspect(e, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && found == "" {
			found = lit.Value
		}
		return found == ""
	})
	return found
}
