package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

const lakePkg = "github.com/onceflow/onceflow/examples/lake"

// lakePoints are the fault points the lake crash tests kill at.
func lakePoints() []string {
	return append(fault.EnginePoints(),
		fault.FilesAfterLog, fault.FilesAfterCompact, fault.FilesAfterLogPurge,
		fault.FileSinkBetweenFiles, fault.FileSinkBeforeLog, fault.FileSinkAfterLog, fault.FileSinkCompaction)
}

// hitsFor returns the hits of point to kill at, in turn: compaction runs
// every 10th batch, so only its first hit in a run is sure to come.
func hitsFor(point string) []int {
	if point == fault.FileSinkCompaction || point == fault.FilesAfterCompact || point == fault.FilesAfterLogPurge {
		return []int{1}
	}
	return []int{2, 1, 3}
}

// TestLakeCrashLocal runs examples/lake on local disk under SIGKILL at every
// engine, files source and filesink fault point and at random moments, with
// files landing between runs, and checks the lake holds every payment once.
func TestLakeCrashLocal(t *testing.T) {
	faulttest.Require(t)
	dir := t.TempDir()
	store, err := storage.OpenLocal(filepath.Join(dir, "lake"), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	lakeCrash(t, proc{
		bin:  buildProg(t, lakePkg),
		args: lakeArgs(filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp")),
	}, filepath.Join(dir, "in"), store, killsPerPoint())
}

// TestLakeCrashS3 is TestLakeCrashLocal with the checkpoint and the lake on
// S3, with half the kills per fault point (S3 round trips make each run
// slower; -e2e.long runs more). The child gets plain s3://bucket/prefix locations: the endpoint and
// credentials come from the environment, as in production.
func TestLakeCrashS3(t *testing.T) {
	faulttest.Require(t)
	loc := testenv.S3Bucket(t)
	store, err := s3store.New(context.Background(), loc.Bucket, "lake", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	in := filepath.Join(t.TempDir(), "in")
	lakeCrash(t, proc{
		bin:  buildProg(t, lakePkg),
		args: lakeArgs(in, "s3://"+loc.Bucket+"/lake", "s3://"+loc.Bucket+"/checkpoint"),
		env:  loc.Env,
	}, in, store, max(1, killsPerPoint()/2))
}

func lakeArgs(in, lake, cp string, extra ...string) []string {
	return append([]string{"-input", in, "-lake", lake, "-checkpoint", cp, "-trigger", "available-now",
		"-max-files-per-trigger", "1", "-retain", "4"}, extra...)
}

func lakeCrash(t *testing.T, p proc, in string, table storage.Store, perPoint int) {
	c := &crashPlan{p: p, l: newLander(t, in, 11), files: 3, per: 40, kills: map[string]int{}, started: time.Now()}
	points := lakePoints()
	for _, point := range points {
		if point == fault.EngineBeforeStateSync || point == fault.EngineAfterState || point == fault.EngineDuringSnapshot {
			continue // the lake query is stateless: no state, no snapshot
		}
		c.atPoint(t, point, perPoint, hitsFor(point)...)
	}
	c.atRandom(t, randomKills(), rand.New(rand.NewPCG(3, 4)), 1500*time.Millisecond)
	c.finish(t)
	var reached []string
	for _, p := range points {
		if p != fault.EngineBeforeStateSync && p != fault.EngineAfterState && p != fault.EngineDuringSnapshot {
			reached = append(reached, p)
		}
	}
	c.expectKills(t, reached)
	checkLake(t, table, c.l.all)

	// A data file the log does not list, such as a killed attempt can
	// leave behind, is never read: plant a copy of a committed file under
	// a name no batch wrote, run again, and check again.
	ctx := context.Background()
	committed, err := filesink.Committed(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	f := committed[len(committed)-1]
	data, err := table.Get(ctx, f.Path)
	if err != nil {
		t.Fatal(err)
	}
	orphan := path.Join(path.Dir(f.Path), filesink.FileName(1<<40, 0, 0, filesink.Zstd))
	if err := table.Put(ctx, orphan, data); err != nil {
		t.Fatal(err)
	}
	c.finish(t)
	if n := checkLake(t, table, c.l.all); n != 1 {
		t.Errorf("%d unlisted data files after planting %s; want 1", n, orphan)
	}
}

// lakeRow is a data file's row as parquet-go's generic reader decodes it;
// day is not in the files (a partition column lives in the folder name and
// the log).
type lakeRow struct {
	PaymentID   string `parquet:"payment_id"`
	MerchantID  string `parquet:"merchant_id"`
	AmountCents int64  `parquet:"amount_cents"`
	TS          int64  `parquet:"ts"`
}

// checkLake checks that the lake's committed version holds every payment of
// want exactly once, with its values and day, read through filesink's
// reader and, independently, with parquet-go's generic reader over exactly
// the files the log lists; files on storage the log does not list are
// counted and returned (a reader never sees them).
func checkLake(t *testing.T, table storage.Store, want map[string]payment) (unlisted int) {
	t.Helper()
	ctx := context.Background()
	committed, err := filesink.Committed(ctx, table)
	if err != nil {
		t.Fatal(err)
	}

	// Through filesink's reader.
	seen := map[string]int{}
	err = filesink.ReadRows(ctx, table, func(f filesink.File, cols []string, row []any) error {
		r := map[string]any{}
		for i, c := range cols {
			r[c] = row[i]
		}
		id, _ := r["payment_id"].(string)
		seen[id]++
		w, ok := want[id]
		if !ok {
			t.Errorf("%s: row %v is not an input payment", f.Path, row)
			return nil
		}
		ts, _ := r["ts"].(time.Time)
		if r["merchant_id"] != w.MerchantID || r["amount_cents"] != w.AmountCents ||
			ts.Format("2006-01-02T15:04:05.000Z") != w.TS || r["day"] != w.TS[:10] {
			t.Errorf("%s: row %v, input %+v", f.Path, row, w)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	compareCounts(t, "filesink.ReadRows", seen, want)

	// Independently: parquet-go's generic reader over the listed files.
	seen = map[string]int{}
	listed := map[string]bool{}
	for _, f := range committed {
		listed[f.Path] = true
		data, err := table.Get(ctx, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != f.Size {
			t.Errorf("%s: %d bytes, the log says %d", f.Path, len(data), f.Size)
		}
		if len(f.Partition) != 1 || f.Partition[0].Column != "day" || f.Partition[0].Value == nil ||
			!strings.HasPrefix(f.Path, "day="+*f.Partition[0].Value+"/") {
			t.Fatalf("%s: partition %+v", f.Path, f.Partition)
		}
		day := *f.Partition[0].Value
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		r := parquet.NewGenericReader[lakeRow](pf)
		buf := make([]lakeRow, 128)
		var n int64
		for {
			k, err := r.Read(buf)
			for _, row := range buf[:k] {
				n++
				seen[row.PaymentID]++
				w := want[row.PaymentID]
				ts := time.UnixMicro(row.TS).UTC().Format("2006-01-02T15:04:05.000Z")
				if row.MerchantID != w.MerchantID || row.AmountCents != w.AmountCents || ts != w.TS || day != w.TS[:10] {
					t.Errorf("%s: row %+v (ts %s, day %s), input %+v", f.Path, row, ts, day, w)
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
		}
		_ = r.Close()
		if n != f.Rows {
			t.Errorf("%s: %d rows, the log says %d", f.Path, n, f.Rows)
		}
	}
	compareCounts(t, "parquet-go over the log's files", seen, want)

	// Data files the log does not list: left by killed attempts, invisible.
	objs, err := table.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for _, o := range objs {
		if strings.HasSuffix(o.Name, ".parquet") && !listed[o.Name] {
			orphans = append(orphans, o.Name)
		}
	}
	t.Logf("%d committed files, %d unlisted data files on storage (never read)", len(committed), len(orphans))
	return len(orphans)
}

// compareCounts checks every payment of want was seen exactly once and
// nothing else was seen.
func compareCounts(t *testing.T, how string, seen map[string]int, want map[string]payment) {
	t.Helper()
	var bad []string
	for id := range want {
		if seen[id] != 1 {
			bad = append(bad, id)
		}
	}
	for id := range seen {
		if _, ok := want[id]; !ok {
			bad = append(bad, id)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("%s: %d of %d payments not seen exactly once, e.g. %s seen %d times", how, len(bad), len(want), bad[0], seen[bad[0]])
	}
}
