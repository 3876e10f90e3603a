package pagpolar

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestFieldNames_ReadOnlyThroughTheTable: no reader of an answer outside
// internal/wire lists names of its own. A call reading a field (Str,
// StrNamed, Amount, Time, Array, Has) whose names are a literal of two or
// more strings is an alias list the table (internal/wire/fields.go) does
// not show, per answer kind; one documented name (an error body's "code")
// is not an alias list.
func TestFieldNames_ReadOnlyThroughTheTable(t *testing.T) {
	readers := map[string]bool{"Str": true, "StrNamed": true, "Amount": true, "Time": true, "Array": true, "Has": true}
	var files []string
	for _, dir := range []string{".", "apicheck"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	fset := token.NewFileSet()
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
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !readers[sel.Sel.Name] || len(call.Args) != 1 {
				return true
			}
			if lit, ok := call.Args[0].(*ast.CompositeLit); ok && len(lit.Elts) > 1 {
				t.Errorf("%s: %s reads names of its own; list them in internal/wire/fields.go", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
