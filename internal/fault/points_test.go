package fault_test

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/fault"
)

const faultImport = "github.com/onceflow/onceflow/internal/fault"

// repoRoot is the directory of the repository's go.mod, above this
// package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !strings.HasSuffix(dir, filepath.Join("internal", "fault")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above internal/fault")
		}
		dir = parent
	}
}

// declaredPoints parses points.go: constant name → its string value.
func declaredPoints(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "points.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("points.go: constant %s is not a string literal", name.Name)
				}
				out[name.Name] = constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
			}
		}
	}
	return out
}

// use is one reference to a fault point found in the repository.
type use struct {
	pos  string
	name string // the constant of package fault, "" when not one
	expr string // the argument as written
}

// scanRepo parses every Go file of the repository (testdata and hidden
// directories aside, as the go command does) and returns the arguments of
// its fault.Point calls and the positions of string literals equal to a
// point's name (a point named by hand instead of by its constant).
func scanRepo(t *testing.T, root string, names map[string]bool) (calls []use, literals []string) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		inFault := filepath.Dir(rel) == filepath.Join("internal", "fault")
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == faultImport {
				local = "fault"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind == token.STRING && !inFault {
					if v, err := strconv.Unquote(x.Value); err == nil && names[v] {
						literals = append(literals, fset.Position(x.Pos()).String()+": "+x.Value)
					}
				}
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || local == "" || sel.Sel.Name != "Point" {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); !ok || id.Name != local || len(x.Args) != 1 {
					return true
				}
				u := use{pos: fset.Position(x.Pos()).String(), expr: exprString(x.Args[0])}
				if a, ok := x.Args[0].(*ast.SelectorExpr); ok {
					if id, ok := a.X.(*ast.Ident); ok && id.Name == local {
						u.name = a.Sel.Name
					}
				}
				calls = append(calls, u)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return calls, literals
}

// exprString prints an expression the way it is written, for messages.
func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.Ident:
		return x.Name
	case *ast.BasicLit:
		return x.Value
	}
	return "an expression"
}

// TestPointNamesMatchCallSites keeps points.go the one list of fault
// points: every fault.Point call in the repository names a constant of
// points.go, every constant there has a call site, All lists each exactly
// once, and no Go file spells a point's name as a string of its own.
func TestPointNamesMatchCallSites(t *testing.T) {
	declared := declaredPoints(t)
	values := map[string]bool{}
	for c, v := range declared {
		if values[v] {
			t.Errorf("points.go: %s repeats the name %q", c, v)
		}
		values[v] = true
	}
	calls, literals := scanRepo(t, repoRoot(t), values)
	if len(calls) < len(declared) {
		t.Fatalf("found %d fault.Point calls for %d declared points; is the repository root right?", len(calls), len(declared))
	}
	used := map[string]bool{}
	for _, c := range calls {
		switch {
		case c.name == "":
			t.Errorf("%s: fault.Point(%s): pass a constant of internal/fault/points.go", c.pos, c.expr)
		case declared[c.name] == "":
			t.Errorf("%s: fault.Point(%s): no such point in internal/fault/points.go; add it there with where in the protocol it sits", c.pos, c.expr)
		default:
			used[c.name] = true
		}
	}
	for _, c := range slices.Sorted(maps.Keys(declared)) {
		if v := declared[c]; !used[c] {
			t.Errorf("points.go: %s (%q) has no fault.Point call; remove it or place it", c, v)
		}
	}
	for _, l := range literals {
		t.Errorf("%s: a fault point's name spelled out; use its constant from internal/fault", l)
	}
	listed := map[string]int{}
	for _, v := range fault.All() {
		listed[v]++
		if !values[v] {
			t.Errorf("All lists %q, which points.go does not declare", v)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(values)) {
		if listed[v] != 1 {
			t.Errorf("All lists %q %d times, want once", v, listed[v])
		}
	}
}
