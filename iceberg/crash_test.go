package iceberg

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
)

var crashKills = flag.Int("iceberg.kills", 1, "SIGKILLs per fault point (at its 2nd, 3rd, … hit in successive runs) in the crash tests")

// crashProg compiles internal/crashprog with the fault points, once per
// test binary (both crash tests share it), into a directory removed by
// TestMain. The child is built without -race: it is the process being
// killed, and the race detector would only slow each of its many runs.
var crashProg = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "iceberg-crashprog-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "crashprog")
	cmd := exec.Command("go", "build", "-tags", fault.Tag, "-o", bin, "github.com/onceflow/onceflow/iceberg/internal/crashprog")
	var eb bytes.Buffer
	cmd.Stderr = &eb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build crashprog: %v\n%s", err, eb.String())
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := crashProg(); err == nil && bin != "" {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func buildCrashProg(t *testing.T) string {
	t.Helper()
	bin, err := crashProg()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runProg runs the program once with the fault spec ("" for none) and
// reports whether it was killed by SIGKILL.
func runProg(t *testing.T, bin string, env, args []string, spec string) (killed bool, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	cmd.Env = append(append(os.Environ(), env...), fault.EnvVar+"="+spec)
	err := cmd.Run()
	if err == nil {
		return false, eb.String()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, eb.String()
		}
	}
	t.Fatalf("crashprog %v (fault %q): %v\n%s", args, spec, err, eb.String())
	return false, ""
}

// crashPoints are the points each crash test kills at: the sink's three
// and the engine's step between the sink and commits/N.
func crashPoints() []string {
	return append(fault.IcebergSinkPoints(), fault.EngineAfterSink, fault.EngineAfterCommit)
}

// crashEnv is where a crash test's tables live: a local warehouse, or an
// S3 bucket.
type crashEnv struct {
	warehouse string
	env       []string
}

func localEnv(t *testing.T) crashEnv { return crashEnv{} }

func s3Env(t *testing.T) crashEnv {
	loc := testenv.S3Bucket(t)
	return crashEnv{warehouse: "s3://" + loc.Bucket + "/wh", env: loc.Env}
}

// openFor opens the crash test's catalog in this process.
func (e crashEnv) open(t *testing.T, dbPath string) *Catalog {
	t.Helper()
	opts := []CatalogOption{}
	if e.warehouse != "" {
		opts = append(opts, WithWarehouse(e.warehouse))
		ep := ""
		for _, kv := range e.env {
			if v, ok := strings.CutPrefix(kv, "ONCEFLOW_S3_ENDPOINT="); ok {
				ep = v
			}
		}
		opts = append(opts, WithS3(S3Config{Endpoint: ep, PathStyle: true}))
	}
	cat, err := OpenCatalog(context.Background(), "sqlite:"+dbPath, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	return cat
}

// TestCrashCounterToIceberg kills a real query process (counter →
// partitioned Iceberg table) at each fault point (once, or -iceberg.kills times), restarts it, and
// checks through the catalog that the table holds every row exactly once.
func TestCrashCounterToIceberg(t *testing.T) {
	faulttest.Require(t)
	t.Parallel()
	bin := buildCrashProg(t)
	for envName, mk := range map[string]func(*testing.T) crashEnv{"local": localEnv, "s3": s3Env} {
		t.Run(envName, func(t *testing.T) {
			t.Parallel()
			for _, point := range crashPoints() {
				t.Run(point, func(t *testing.T) {
					e := mk(t)
					dir := t.TempDir()
					db := filepath.Join(dir, "catalog.db")
					args := []string{"-catalog", "sqlite:" + db, "-checkpoint", filepath.Join(dir, "cp"),
						"-table", "lake.out", "-rows", "600", "-per-batch", "100"}
					if e.warehouse != "" {
						args = append(args, "-warehouse", e.warehouse)
					}
					crashAndFinish(t, bin, e.env, args, point)
					cat := e.open(t, db)
					if got := tableInts(t, cat, "lake.out", "i"); !slices.Equal(got, seq(0, 600)) {
						t.Fatalf("table holds %d rows, want 0..599 once each: %v", len(got), got)
					}
				})
			}
		})
	}
}

// TestCrashIcebergToIceberg does the same for a query that reads an
// Iceberg table (one snapshot per batch) into another.
func TestCrashIcebergToIceberg(t *testing.T) {
	faulttest.Require(t)
	t.Parallel()
	bin := buildCrashProg(t)
	for envName, mk := range map[string]func(*testing.T) crashEnv{"local": localEnv, "s3": s3Env} {
		t.Run(envName, func(t *testing.T) {
			t.Parallel()
			for _, point := range crashPoints() {
				t.Run(point, func(t *testing.T) {
					e := mk(t)
					dir := t.TempDir()
					db := filepath.Join(dir, "catalog.db")
					cat := e.open(t, db)
					src := newTestSink(t, cat, "lake.src", "producer")
					for b := int64(0); b < 5; b++ {
						addBatch(t, src, b, b*50, b*50+50)
					}
					args := []string{"-catalog", "sqlite:" + db, "-checkpoint", filepath.Join(dir, "cp"),
						"-table", "lake.copy", "-from", "lake.src"}
					if e.warehouse != "" {
						args = append(args, "-warehouse", e.warehouse)
					}
					crashAndFinish(t, bin, e.env, args, point)
					if got := tableInts(t, cat, "lake.copy", "i"); !slices.Equal(got, seq(0, 250)) {
						t.Fatalf("copy holds %d rows, want 0..249 once each: %v", len(got), got)
					}
				})
			}
		})
	}
}

// crashAndFinish kills the program at the point's 2nd, 3rd, … hit in
// -iceberg.kills successive runs, then runs it to the end.
func crashAndFinish(t *testing.T, bin string, env, args []string, point string) {
	t.Helper()
	kills := 0
	for k := 2; k < 2+*crashKills; k++ {
		killed, stderr := runProg(t, bin, env, args, fmt.Sprintf("%s@%d", point, k))
		if !killed {
			break
		}
		if !strings.Contains(stderr, "onceflow-fault: "+point) {
			t.Fatalf("killed without reaching the fault point:\n%s", stderr)
		}
		kills++
	}
	if killed, stderr := runProg(t, bin, env, args, ""); killed {
		t.Fatalf("clean run was killed:\n%s", stderr)
	}
	if kills == 0 {
		t.Errorf("the fault point %s was never reached", point)
	}
}
