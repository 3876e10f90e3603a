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
// StrNamed, Amount, Time, Array, Has, and apicheck's checkField and
// observeNested) given a literal of two or more strings is a name list the
// table (internal/wire/fields.go) does not show, per answer kind; one
// documented name (an error body's "code") is not a list.
func TestFieldNames_ReadOnlyThroughTheTable(t *testing.T) {
	readers := map[string]bool{"Str": true, "StrNamed": true, "Amount": true, "Time": true, "Array": true, "Has": true,
		"checkField": true, "observeNested": true} // apicheck's readers
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
			var name string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if !readers[name] {
				return true
			}
			for _, arg := range call.Args {
				if lit, ok := arg.(*ast.CompositeLit); ok && len(lit.Elts) > 1 {
					if _, strs := lit.Elts[0].(*ast.BasicLit); strs {
						t.Errorf("%s: %s reads names of its own; list them in internal/wire/fields.go", fset.Position(call.Pos()), name)
					}
				}
			}
			return true
		})
	}
}
