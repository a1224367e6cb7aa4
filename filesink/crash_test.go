package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/storage"
)

const crashChildEnv = "FILESINK_CRASH_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		if err := crashChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// crashScenario is one configuration of the child's sink.
type crashScenario struct {
	name         string
	batches      int
	rowsPerBatch int
	minFileSize  int64
}

func (c crashScenario) spec(table, driver string) string {
	return fmt.Sprintf("%s|%s|%d|%d|%d", table, driver, c.batches, c.rowsPerBatch, c.minFileSize)
}

// crashChild plays a driver: it runs batches from the first one without a
// done marker (its own commits/N) to the last, marking each after AddBatch.
func crashChild(spec string) error {
	f := strings.Split(spec, "|")
	if len(f) != 5 {
		return fmt.Errorf("bad spec %q", spec)
	}
	batches, _ := strconv.Atoi(f[2])
	per, _ := strconv.Atoi(f[3])
	minSize, _ := strconv.ParseInt(f[4], 10, 64)
	ctx := context.Background()
	table, err := storage.OpenLocal(f[0], storage.LocalOptions{})
	if err != nil {
		return err
	}
	driver, err := storage.OpenLocal(f[1], storage.LocalOptions{})
	if err != nil {
		return err
	}
	s, err := New(table, WithPartitionBy("day"), WithTargetFileSize(8<<10), WithCompactEvery(3), WithMinFileSize(minSize), WithMaxOpenFiles(2))
	if err != nil {
		return err
	}
	s.cfg.chunkRows = 128
	if err := s.Start(ctx, "crash"); err != nil {
		return err
	}
	mem := memory.NewGoAllocator()
	for b := 0; b < batches; b++ {
		done := fmt.Sprintf("commits/%05d", b)
		if _, err := driver.Get(ctx, done); err == nil {
			continue
		}
		rec := buildRecord(mem, paySchema, b*per, (b+1)*per)
		err := s.AddBatch(ctx, int64(b), paySchema, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return err
		}
		if err := driver.PutIfAbsent(ctx, done, []byte("done")); err != nil {
			return err
		}
	}
	return nil
}

// runChild runs the child with ONCEFLOW_FAULT=faultSpec and reports
// whether it was killed at a fault point.
func runChild(t *testing.T, spec, faultSpec string) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+spec, fault.EnvVar+"="+faultSpec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return false
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			name := strings.SplitN(faultSpec, "@", 2)[0]
			if !strings.Contains(stderr.String(), "onceflow-fault: "+name) {
				t.Fatalf("child killed without reaching %s: %s", faultSpec, stderr.String())
			}
			return true
		}
	}
	t.Fatalf("child (fault %q): %v\n%s", faultSpec, err, stderr.String())
	return false
}

// TestCrashAtRandomMoments SIGKILLs the child at seeded random moments
// until it completes, checking the committed rows after every kill.
func TestCrashAtRandomMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	sc := crashScenario{name: "random", batches: 12, rowsPerBatch: 1500, minFileSize: 4 << 10}
	tableDir, driverDir := t.TempDir(), t.TempDir()
	table, err := storage.OpenLocal(tableDir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := sc.spec(tableDir, driverDir)
	rng := rand.New(rand.NewPCG(7, 42))
	kills := 0
	for attempt := 0; attempt < 8; attempt++ {
		delay := time.Duration(50+rng.IntN(400)) * time.Millisecond
		killed := runChildKilledAfter(t, spec, delay)
		v, err := Version(context.Background(), table)
		if err != nil {
			t.Fatal(err)
		}
		checkExactlyOnce(t, table, int(v+1), sc.rowsPerBatch)
		t.Logf("kill after %s: killed=%v log=%d done=%d", delay, killed, v, doneCount(t, driverDir))
		if !killed {
			break
		}
		kills++
	}
	if kills == 0 {
		t.Fatal("no kill landed before the child finished")
	}
	if runChild(t, spec, "") {
		t.Fatal("clean run killed")
	}
	checkExactlyOnce(t, table, sc.batches, sc.rowsPerBatch)
}

// runChildKilledAfter runs the child without fault points and SIGKILLs it
// after delay, unless it finished first.
func runChildKilledAfter(t *testing.T, spec string, delay time.Duration) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+spec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(delay, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	if err == nil {
		return false
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	t.Fatalf("child: %v\n%s", err, stderr.String())
	return false
}

// committedIDs reads, with parquet-go, exactly the files Committed lists
// and returns how often each id appears.
func committedIDs(t *testing.T, table storage.Store) map[int64]int {
	t.Helper()
	ctx := context.Background()
	files, err := Committed(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, f := range files {
		data, err := table.Get(ctx, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if pf.NumRows() != f.Rows || int64(len(data)) != f.Size {
			t.Fatalf("%s: %d rows %d bytes, log says %d rows %d bytes", f.Path, pf.NumRows(), len(data), f.Rows, f.Size)
		}
		col, ok := pf.Schema().Lookup("id")
		if !ok {
			t.Fatalf("%s: no id column", f.Path)
		}
		for _, rg := range pf.RowGroups() {
			rows := rg.Rows()
			buf := make([]parquet.Row, 64)
			for {
				n, err := rows.ReadRows(buf)
				for _, r := range buf[:n] {
					seen[r[col.ColumnIndex].Int64()]++
				}
				if err != nil {
					break
				}
			}
			rows.Close()
		}
	}
	return seen
}

// checkExactlyOnce checks the committed rows are exactly the rows of the
// first batches batches, each once.
func checkExactlyOnce(t *testing.T, table storage.Store, batches, per int) {
	t.Helper()
	seen := committedIDs(t, table)
	if len(seen) != batches*per {
		t.Fatalf("%d distinct rows committed, want %d (batches 0..%d)", len(seen), batches*per, batches-1)
	}
	for id, n := range seen {
		if n != 1 || id < 0 || id >= int64(batches*per) {
			t.Fatalf("row %d committed %d times", id, n)
		}
	}
}

func doneCount(t *testing.T, driverDir string) int {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(driverDir, "commits"))
	return len(ents)
}

// TestCrashAtFaultPoints kills a real child process at each fault point in
// turn (SIGKILL), restarts it, and checks after every restart and at the
// end that the committed files hold every input row exactly once.
func TestCrashAtFaultPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	faulttest.Require(t)
	faults := []string{
		fault.FileSinkBetweenFiles, fault.FileSinkBeforeLog, fault.FileSinkAfterLog, fault.FileSinkCompaction,
		fault.FileSinkBetweenFiles + "@5", fault.FileSinkBeforeLog + "@2", fault.FileSinkAfterLog + "@3", fault.FileSinkCompaction + "@2",
	}
	for _, sc := range []crashScenario{
		{name: "rolling", batches: 12, rowsPerBatch: 1500},
		{name: "minFileSize", batches: 12, rowsPerBatch: 60, minFileSize: 6 << 10},
	} {
		t.Run(sc.name, func(t *testing.T) {
			tableDir, driverDir := t.TempDir(), t.TempDir()
			table, err := storage.OpenLocal(tableDir, storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec := sc.spec(tableDir, driverDir)
			kills := 0
			for _, f := range faults {
				start := time.Now()
				killed := runChild(t, spec, f)
				if killed {
					kills++
				}
				// Every batch the driver marked done is committed exactly once;
				// a killed batch may or may not be committed, never partly.
				done := doneCount(t, driverDir)
				v, err := Version(context.Background(), table)
				if err != nil {
					t.Fatal(err)
				}
				if v+1 < int64(done) || v+1 > int64(done)+1 {
					t.Fatalf("after %s: log at %d, driver done %d", f, v, done)
				}
				checkExactlyOnce(t, table, int(v+1), sc.rowsPerBatch)
				t.Logf("fault %-28s killed=%v done=%d log=%d (%s)", f, killed, done, v, time.Since(start).Round(time.Millisecond))
			}
			if kills < len(faults)-1 {
				t.Fatalf("only %d of %d fault points killed the child", kills, len(faults))
			}
			if runChild(t, spec, "") {
				t.Fatal("clean run killed")
			}
			if done := doneCount(t, driverDir); done != sc.batches {
				t.Fatalf("driver done %d of %d", done, sc.batches)
			}
			checkExactlyOnce(t, table, sc.batches, sc.rowsPerBatch)
			// Stray files from killed attempts may exist, but none is listed.
			files, _ := Committed(context.Background(), table)
			all, _ := table.List(context.Background(), "")
			t.Logf("%d committed files, %d objects on storage", len(files), len(all))
		})
	}
}
