package kernel

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the kernels below the engine: of onceflow's packages
// they import only batch, the language they implement (never the engine,
// the state store, sources or sinks).
func TestImports(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/onceflow/onceflow/") && p != "github.com/onceflow/onceflow/batch" {
				t.Errorf("%s imports %s; kernel may import only batch of onceflow's packages", name, p)
			}
		}
	}
}
