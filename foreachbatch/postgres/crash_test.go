package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
)

// The crash test re-runs this test binary as a child that plays the engine's
// driver: batch after batch, AddBatch(N) then a local done/N marker (as the
// engine writes commits/N), starting at the first batch without a marker.
// The parent kills it at every pg-* fault point and at random moments,
// restarts it until every batch is done, and checks the table against the
// totals computed from the input.
const (
	crashDirEnv = "ONCEFLOW_PG_CRASH_DIR" // set in the child: its marker directory
	crashURLEnv = "ONCEFLOW_PG_CRASH_URL" // set in the child: the database URL

	crashBatches      = 120
	crashRowsPerBatch = 300
	crashKeys         = 37
)

// crashRows is batch id's input: deterministic, with repeated keys inside
// the batch (summed by the add merge) and a NULL now and then.
func crashRows(id int64) (keys []int64, amounts []*int64) {
	for i := range int64(crashRowsPerBatch) {
		keys = append(keys, (id*7+i*13)%crashKeys)
		if (id+i)%29 == 0 {
			amounts = append(amounts, nil)
		} else {
			v := id*1000 + i
			amounts = append(amounts, &v)
		}
	}
	return keys, amounts
}

func crashSink(pool *pgxpool.Pool) (*Sink, error) {
	return NewOffsetsInSink(pool, "crash-job", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true),
		WithRetry(5, 10*time.Millisecond, 100*time.Millisecond))
}

// TestCrashChild is the child's body; it does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process of TestCrashExactlyOnce")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(crashURLEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := crashSink(pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "crash"); err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(kvSchema); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	for id := int64(0); id < crashBatches; id++ {
		marker := filepath.Join(dir, strconv.FormatInt(id, 10))
		if _, err := os.Stat(marker); err == nil {
			continue
		}
		keys, amounts := crashRows(id)
		rec := kvRecord(t, mem, kvSchema, keys, amounts)
		res, err := s.Write(ctx, id, kvSchema, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatalf("batch %d: %v", id, err)
		}
		fmt.Fprintf(os.Stderr, "crash-child: batch %d skipped=%v\n", id, res.Skipped)
		f, err := os.Create(marker)
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes")
	}
	faulttest.Require(t)
	dsn := testenv.PGURL(t)
	pool, err := pgxpool.New(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	done := func() int {
		n := 0
		for id := range crashBatches {
			if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(id))); err == nil {
				n++
			}
		}
		return n
	}
	// run starts the child; kill, when positive, kills it after that delay.
	// It returns the child's stderr and whether it died of a fault point.
	run := func(faultSpec string, kill time.Duration) (string, bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashURLEnv+"="+dsn, fault.EnvVar+"="+faultSpec)
		var out strings.Builder
		cmd.Stderr = &out
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if kill > 0 {
			timer := time.AfterFunc(kill, func() { _ = cmd.Process.Kill() })
			defer timer.Stop()
		}
		err := cmd.Wait()
		if err == nil {
			return out.String(), false
		}
		faulted := strings.Contains(out.String(), "onceflow-fault: ")
		killed := kill > 0 && strings.Contains(err.Error(), "killed")
		if !faulted && !killed {
			t.Fatalf("child failed (%v) without a planned death:\n%s", err, out.String())
		}
		return out.String(), true
	}

	points := fault.PostgresPoints()
	deaths, kills, skips := 0, 0, 0
	for round := 0; done() < crashBatches; round++ {
		if round > 200 {
			t.Fatalf("no progress after %d rounds: %d of %d batches done", round, done(), crashBatches)
		}
		var (
			spec string
			kill time.Duration
		)
		switch {
		case round < 3*len(points): // every point, at its 1st, 2nd and 3rd hit
			spec = fmt.Sprintf("%s@%d", points[round%len(points)], 1+round/len(points))
		case round%2 == 0: // then random kills, and random points at random hits
			kill = time.Duration(20+rng.IntN(600)) * time.Millisecond
		default:
			spec = fmt.Sprintf("%s@%d", points[rng.IntN(len(points))], 1+rng.IntN(3))
		}
		out, died := run(spec, kill)
		skips += strings.Count(out, "skipped=true")
		if died {
			deaths++
			if kill > 0 {
				kills++
			}
		}
	}
	if out, died := run("", 0); died || !strings.Contains(out, "PASS") {
		t.Fatalf("final run: died=%v\n%s", died, out)
	}
	t.Logf("%d planned deaths (%d random kills) and %d repeated batches skipped before all %d batches were done",
		deaths, kills, skips, crashBatches)
	if skips < 3 {
		t.Errorf("only %d batches were repeated after a commit: pg-after-commit did not fire", skips)
	}
	if deaths < 3*len(points) {
		t.Errorf("only %d deaths: the fault points did not fire", deaths)
	}

	want := map[int64]*int64{}
	for id := range int64(crashBatches) {
		keys, amounts := crashRows(id)
		for i, k := range keys {
			if amounts[i] == nil {
				if _, ok := want[k]; !ok {
					want[k] = nil
				}
				continue
			}
			if want[k] == nil {
				want[k] = new(int64)
			}
			*want[k] += *amounts[i]
		}
	}
	got := totals(t, pool, "totals")
	if len(got) != len(want) {
		t.Errorf("%d keys in the table, want %d", len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if (g == nil) != (w == nil) || (g != nil && *g != *w) {
			t.Errorf("k=%d: total %v, want %v", k, deref(g), deref(w))
		}
	}
	if p := progressOf(t, pool, "onceflow_progress", "crash-job"); p != crashBatches-1 {
		t.Errorf("progress %d, want %d", p, crashBatches-1)
	}
}

func deref(p *int64) string {
	if p == nil {
		return "NULL"
	}
	return strconv.FormatInt(*p, 10)
}
