package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/onceflow/onceflow"

// goList runs `go list args...` in the module root and returns its output
// lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v); put Go's bin directory on PATH to run the import checks", err)
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = moduleRoot(t)
	// The engine module on its own: the workspace (go.work) would add the
	// command line and plugin modules, which may import what the engine must not.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information to find the module root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// isStd reports whether path is a standard-library package (no dot in its
// first element).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func TestContractImportsOnlyArrowStorageAndStd(t *testing.T) {
	for _, imp := range goList(t, "-f", `{{join .Imports "\n"}}`, module+"/contract") {
		if imp == "" || isStd(imp) || under(imp, "github.com/apache/arrow-go/v18/arrow") || imp == module+"/storage" {
			continue
		}
		t.Errorf("contract imports %s; it may import only Arrow, %s/storage and the standard library, so that every plugin can depend on it", imp, module)
	}
}

func TestCheckpointImportsOnlyOffsetlogStorageAndStd(t *testing.T) {
	for _, imp := range goList(t, "-f", `{{join .Imports "\n"}}`, module+"/checkpoint") {
		if imp == "" || isStd(imp) || imp == module+"/offsetlog" || imp == module+"/storage" {
			continue
		}
		t.Errorf("checkpoint imports %s; it may import only %s/offsetlog, %s/storage and the standard library, so that the command line, audit and examples read a checkpoint without the engine", imp, module, module)
	}
}

// importersAllowed are the packages of this module that may import engine
// in their non-test files.
var importersAllowed = []string{
	module + "/engine", // and its subpackages
	module + "/cmd",
	module + "/examples",
	module + "/tests",
	module + "/bench",
	module + "/monitor",
}

func TestOnlyCommandsExamplesTestsAndPluginsImportEngine(t *testing.T) {
	engine := module + "/engine"
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...") {
		pkg, imps, _ := strings.Cut(line, " ")
		if !slices.Contains(strings.Fields(imps), engine) {
			continue
		}
		if slices.ContainsFunc(importersAllowed, func(p string) bool { return under(pkg, p) }) {
			continue
		}
		t.Errorf("%s imports %s; only %v may (a source, sink or store implements package contract instead)", pkg, engine, importersAllowed)
	}
}

func TestEngineDependsOnNoMetricsOrHTTPPackage(t *testing.T) {
	engine := module + "/engine"
	deps := goList(t, "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, engine)
	var all []string
	for _, line := range deps {
		pkg, imps, _ := strings.Cut(line, " ")
		all = append(all, pkg)
		if strings.HasPrefix(pkg, "github.com/prometheus/") {
			t.Errorf("engine depends on %s; metrics belong to package monitor", pkg)
		}
		// net/http itself comes in through Arrow (arrow/compute ->
		// parquet -> thrift's HTTP transport), which the linker drops;
		// no package of this module may use it.
		if under(pkg, module) {
			for _, imp := range strings.Fields(imps) {
				if under(imp, "net/http") || imp == "net" {
					t.Errorf("%s (a dependency of engine) imports %s; an HTTP server belongs to package monitor", pkg, imp)
				}
			}
		}
	}
	if !slices.Contains(all, engine) {
		t.Fatalf("go list -deps %s did not list the engine itself: %v", engine, all)
	}
}

// TestProgramWithoutMonitorLinksNoMetricsOrHTTPServer builds a query
// program that does not import monitor (testdata/nomonitor) and checks
// its symbol table: no Prometheus client, no HTTP server. Before monitor
// existed, such a program linked the Prometheus client's packages (their
// init and default registry) although it never served metrics.
func TestProgramWithoutMonitorLinksNoMetricsOrHTTPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH (%v)", err)
	}
	bin := filepath.Join(t.TempDir(), "nomonitor")
	build := exec.Command(gobin, "build", "-o", bin, "./internal/lint/testdata/nomonitor")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/nomonitor: %v\n%s", err, out)
	}
	nm := exec.Command(gobin, "tool", "nm", bin)
	out, err := nm.Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	var bad []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		sym := fields[len(fields)-1]
		if strings.HasPrefix(sym, "github.com/prometheus/") || strings.HasPrefix(sym, "net/http.(*Server)") || sym == "net.Listen" {
			bad = append(bad, sym)
		}
	}
	if len(bad) > 0 {
		t.Errorf("a program without monitor links %d metrics or HTTP-server symbols, e.g. %v", len(bad), bad[:min(len(bad), 5)])
	}
}
