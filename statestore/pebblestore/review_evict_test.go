package pebblestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// rvRow is one scripted input row: k, a nullable second key k2, amount,
// and a nullable event time ts in Unix ms (converted to the script's
// unit).
type rvRow struct {
	k   int64
	k2  *int64
	amt int64
	ts  *int64
}

func rvI(v int64) *int64 { return &v }

// rvR is a row with key k, k2 = k%2, amount 1 and time ms.
func rvR(k, ms int64) rvRow { return rvRow{k: k, k2: rvI(k % 2), amt: 1, ts: rvI(ms)} }

// rvScript is a source of scripted batches: offset n is the number of
// batches read; one batch per trigger; avail says how many exist.
type rvScript struct {
	unit    arrow.TimeUnit
	batches [][]rvRow
	avail   atomic.Int64
	schema  *arrow.Schema
}

func newRVScript(unit arrow.TimeUnit, batches [][]rvRow) *rvScript {
	return &rvScript{unit: unit, batches: batches, schema: arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k2", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: unit}, Nullable: true},
	}, nil)}
}

func (s *rvScript) Schema() *arrow.Schema { return s.schema }
func (s *rvScript) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}
func (s *rvScript) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	end := max(min(s.avail.Load(), n+1), n)
	return json.RawMessage(strconv.FormatInt(end, 10)), nil
}

func (s *rvScript) raw(ms int64) int64 {
	switch s.unit {
	case arrow.Second:
		return ms / 1000
	case arrow.Millisecond:
		return ms
	case arrow.Microsecond:
		return ms * 1000
	}
	return ms * 1000_000
}

func (s *rvScript) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	mem := memory.DefaultAllocator
	kb, k2b, ab := array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	tb := array.NewTimestampBuilder(mem, s.schema.Field(3).Type.(*arrow.TimestampType))
	defer kb.Release()
	defer k2b.Release()
	defer ab.Release()
	defer tb.Release()
	n := 0
	for i := a; i < b; i++ {
		for _, r := range s.batches[i] {
			kb.Append(r.k)
			if r.k2 == nil {
				k2b.AppendNull()
			} else {
				k2b.Append(*r.k2)
			}
			ab.Append(r.amt)
			if r.ts == nil {
				tb.AppendNull()
			} else {
				tb.Append(arrow.Timestamp(s.raw(*r.ts)))
			}
			n++
		}
	}
	cols := []arrow.Array{kb.NewArray(), k2b.NewArray(), ab.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(s.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// rvCase is one query compared between the backends.
type rvCase struct {
	build func(src engine.Source) *engine.Stream
	mode  engine.OutputMode
	// perOp, when set, gives the pebble run WithOperatorStateStore options
	// instead of WithStateStore.
	perOp func(b *pebblestore.Backend) []engine.Option
	// restartEvery runs one batch per query run (a restart every batch);
	// else the script runs in one run. Every third restart is on a fresh
	// machine (a new pebble directory).
	restartEvery bool
	// memFirst runs the first memFirst batches of the pebble checkpoint on
	// the in-memory backend (a migration to pebble afterwards).
	memFirst int
	parts    int
	timeCol  string // the pebble store's time index
}

type rvResult struct {
	mem, disk     *memsink.Sink
	memCP, diskCP storage.Store
	root          string // the last pebble run's working directory
}

// rvCompare runs c over the script on both backends and fails at the
// first batch whose output differs.
func rvCompare(t *testing.T, sc *rvScript, c rvCase) rvResult {
	t.Helper()
	parts := c.parts
	if parts == 0 {
		parts = 2
	}
	mem, disk := memsink.New("mem"), memsink.New("disk")
	memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	diskCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	lastRoot := ""
	steps := []int{len(sc.batches)}
	if c.restartEvery {
		steps = steps[:0]
		for i := 1; i <= len(sc.batches); i++ {
			steps = append(steps, i)
		}
	}
	if c.memFirst > 0 {
		steps = []int{c.memFirst, len(sc.batches)}
		if c.restartEvery {
			steps = steps[:0]
			for i := 1; i <= len(sc.batches); i++ {
				steps = append(steps, i)
			}
		}
	}
	for i, avail := range steps {
		sc.avail.Store(int64(avail))
		common := []engine.Option{engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(parts), engine.WithMinBatchesToRetain(3), engine.WithSnapshotEvery(2), engine.WithOutputMode(c.mode)}
		if err := run(t, c.build(sc), append(common, engine.WithCheckpoint(memCP), engine.WithSink(mem))...); err != nil {
			t.Fatalf("in-memory run to batch %d: %v", avail, err)
		}
		if avail <= c.memFirst {
			if err := run(t, c.build(sc), append(common, engine.WithCheckpoint(diskCP), engine.WithSink(disk))...); err != nil {
				t.Fatalf("in-memory run (before migration) to batch %d: %v", avail, err)
			}
			continue
		}
		root := filepath.Join(work, "machine-a")
		if i%3 == 2 {
			root = filepath.Join(work, "machine-"+strconv.Itoa(i)) // another machine: no working copy
		}
		lastRoot = root
		b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: root, CacheSize: 8 << 20, UploadEvery: 2, MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		opts := []engine.Option{engine.WithStateStore(b)}
		if c.perOp != nil {
			opts = c.perOp(b)
		}
		err = run(t, c.build(sc), append(append(common, engine.WithCheckpoint(diskCP), engine.WithSink(disk)), opts...)...)
		if cerr := b.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("pebble run to batch %d: %v", avail, err)
		}
	}
	rvSame(t, disk, mem)
	return rvResult{mem: mem, disk: disk, memCP: memCP, diskCP: diskCP, root: lastRoot}
}

func rvSame(t *testing.T, disk, mem *memsink.Sink) {
	t.Helper()
	got, want := batches(disk), batches(mem)
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			t.Fatalf("pebble output differs from the in-memory one at batch line %d:\n--- pebble\n%s\n--- memory\n%s\n=== all pebble\n%s=== all memory\n%s", i, g[i], w[i], got, want)
		}
	}
	t.Fatalf("pebble output has %d batch lines, the in-memory one %d:\n=== all pebble\n%s=== all memory\n%s", len(g), len(w), got, want)
}

// rvBase is 2023-11-14T22:13:20Z in ms.
const rvBase = int64(1_700_000_000_000)

// rvEdgeBatches: late rows, rows exactly at the watermark, far-future
// rows (the watermark jumps many windows at once), batches of late rows
// only, null second keys (a null event time is refused by the engine), and a final jump past
// everything (then one more batch so that it is in force).
func rvEdgeBatches(base int64) [][]rvRow {
	B := base
	nullK2 := rvRow{k: 8, amt: 5, ts: rvI(B + 11_000)}
	return [][]rvRow{
		{rvR(1, B+1000), rvR(2, B+9999), rvR(1, B+12_000)},
		{rvR(1, B+10_000), rvR(3, B+5000), rvR(4, B+7000), rvR(2, B+25_000), nullK2},
		{rvR(5, B+20_000), rvR(1, B+100_000), rvR(6, B+19_999)},
		{rvR(9, B+100_001), rvR(5, B+95_000), rvR(5, B+94_999)},
		{rvR(1, B), rvR(2, B+3)}, // late only
		{rvR(3, B+110_000), rvR(3, B+96_000), nullK2},
		{rvR(1, B+10_000_000)},
		{rvR(2, B+10_000_000), rvR(2, B+10_000_001)},
		{rvR(4, B+10_000_002)},
	}
}

func rvSum() []batch.Agg {
	return []batch.Agg{batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")}
}

// rvQueries are the evicting operators, each with its time-index column.
func rvQueries() map[string]rvCase {
	wm := 5 * time.Second
	return map[string]rvCase{
		"tumblingAppend": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.TumblingWindow("ts", 10*time.Second), "k").ID("w").Agg(rvSum()...)
		}, mode: engine.Append, timeCol: "window_end"},
		"tumblingUpdate": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.TumblingWindow("ts", 10*time.Second), "k", "k2").ID("w").Agg(rvSum()...)
		}, mode: engine.Update, timeCol: "window_end"},
		"slidingPanesAppend": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.SlidingWindow("ts", 30*time.Second, 10*time.Second), "k").ID("w").Agg(rvSum()...)
		}, mode: engine.Append, timeCol: "window_start"},
		"slidingRowsUpdate": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.SlidingWindow("ts", 30*time.Second, 10*time.Second), "k").ID("w").Agg(rvSum()...)
		}, mode: engine.Update, timeCol: "window_end"},
		"eventTimeKeyAppend": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupBy("ts", "k2").ID("w").Agg(rvSum()...)
		}, mode: engine.Append, timeCol: "ts"},
		"eventTimeKeyUpdate": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupBy("k2", "ts").ID("w").Agg(rvSum()...)
		}, mode: engine.Update, timeCol: "ts"},
		"dedupWithin": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).DropDuplicatesWithinWatermark("k").ID("w")
		}, mode: engine.Append, timeCol: "ts"},
		"dedupWithinTwoKeys": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).DropDuplicatesWithinWatermark("k2", "k").ID("w")
		}, mode: engine.Append, timeCol: "ts"},
		"dedupEventTimeKey": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).DropDuplicates("k", "ts").ID("w")
		}, mode: engine.Append, timeCol: "ts"},
		"completeTumbling": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.TumblingWindow("ts", 10*time.Second), "k").ID("w").Agg(rvSum()...)
		}, mode: engine.Complete, timeCol: "window_end"},
		"completeEventTimeKey": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupBy("ts", "k").ID("w").Agg(rvSum()...)
		}, mode: engine.Complete, timeCol: "ts"},
	}
}

// TestReviewEvictEdgesMatchMemory: every evicting operator, on the edge
// script, in one run and with a restart every batch (every third on a
// fresh machine), gives the in-memory output batch for batch; when the
// watermark has passed everything but the last window, the pebble state
// holds the in-memory state's rows and its time index exactly those.
func TestReviewEvictEdgesMatchMemory(t *testing.T) {
	for name, q := range rvQueries() {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", name, restart), func(t *testing.T) {
				q := q
				q.restartEvery = restart
				sc := newRVScript(arrow.Millisecond, rvEdgeBatches(rvBase))
				res := rvCompare(t, sc, q)
				rvCheckState(t, res, 2, q.mode != engine.Complete, q.timeCol)
			})
		}
	}
}

// rvCheckState compares the state left on both backends (rows, and the
// pebble time index's entries = its rows), and when leak, that it is
// small (only the last window's groups).
func rvCheckState(t *testing.T, res rvResult, parts int, leak bool, timeCol string) {
	t.Helper()
	memRows := stateRows(t, res.memCP, "w", parts, false, "")
	diskRows := stateRows(t, res.diskCP, "w", parts, true, timeCol)
	if res.root != "" {
		rvWorkingIndex(t, res.diskCP, res.root, "w", parts, timeCol, diskRows)
	}
	if diskRows != memRows {
		t.Fatalf("the pebble state holds %d rows, the in-memory one %d", diskRows, memRows)
	}
	if leak && memRows > 9 {
		t.Fatalf("%d rows left after the watermark passed all but the last window", memRows)
	}
}

// rvWorkingIndex opens the working copies the last pebble run left (as
// the backend does, with the time index) and checks that their time index
// names exactly their rows, want in all.
func rvWorkingIndex(t *testing.T, cp storage.Store, root, id string, parts int, timeCol string, want int64) {
	t.Helper()
	ctx := context.Background()
	commits, err := cp.List(ctx, "commits/")
	if err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	for _, c := range commits {
		if v, err := strconv.ParseInt(strings.TrimLeft(c.Name[len("commits/"):], "0"), 10, 64); err == nil && v > last {
			last = v
		}
	}
	if last < 0 {
		last = 0
	}
	var rows, indexed int64
	for p := range parts {
		folder := engine.StateFolder(cp, id, p, "")
		ks, vs, err := statestore.ReadSchemas(ctx, folder)
		if err != nil {
			t.Fatal(err)
		}
		o := statestore.Options{KeySchema: ks, ValueSchema: vs, Backend: pebblestore.BackendName}
		s, err := pebblestore.Open(ctx, folder, pebblestore.Options{State: o, Dir: filepath.Join(root, id, strconv.Itoa(p)), TimeIndex: timeCol})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Restore(ctx, last); err != nil {
			t.Fatal(err)
		}
		err = s.Scan(ctx, nil, nil, 0, func(r arrow.RecordBatch) error { rows += r.NumRows(); return nil })
		if err == nil {
			err = s.ScanBefore(ctx, math.MaxInt64, 0, func(r arrow.RecordBatch) error { indexed += r.NumRows(); return nil })
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("working copy of partition %d: %v", p, err)
		}
	}
	if rows != want || indexed != rows {
		t.Fatalf("the working copies hold %d rows and %d index entries; the state has %d rows", rows, indexed, want)
	}
}

// TestReviewEvictUnitsAndEpoch: the edge script in seconds, microseconds
// and nanoseconds, and shifted to straddle the Unix epoch (pre-1970 event
// times, a watermark that crosses 0), for windows, panes, an event-time
// key and dedup within the watermark, with a restart every batch.
func TestReviewEvictUnitsAndEpoch(t *testing.T) {
	qs := rvQueries()
	for _, name := range []string{"tumblingAppend", "slidingPanesAppend", "slidingRowsUpdate", "eventTimeKeyAppend", "dedupWithin"} {
		for _, unit := range []arrow.TimeUnit{arrow.Second, arrow.Microsecond, arrow.Nanosecond} {
			for _, base := range []int64{rvBase, -60_000, -rvBase} {
				if unit == arrow.Nanosecond && base == -rvBase {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/base=%d", name, unit, base), func(t *testing.T) {
					q := qs[name]
					q.restartEvery = true
					bs := rvEdgeBatches(base)
					if unit == arrow.Second {
						// whole seconds: shift every time to the second below
						for _, b := range bs {
							for i := range b {
								if b[i].ts != nil {
									v := *b[i].ts
									v -= ((v % 1000) + 1000) % 1000
									b[i].ts = &v
								}
							}
						}
					}
					res := rvCompare(t, newRVScript(unit, bs), q)
					rvCheckState(t, res, 2, base > 0, q.timeCol)
				})
			}
		}
	}
}

// TestReviewEvictMigrationFromMemory: a checkpoint written on the
// in-memory backend (snapshots every 2 versions, deltas) for the first
// batches, then continued on pebble: the time index must be built for the
// rows that came from the memory snapshot and deltas, so the groups they
// hold close and are evicted as in memory.
func TestReviewEvictMigrationFromMemory(t *testing.T) {
	for name, q := range rvQueries() {
		for _, first := range []int{2, 3, 5} {
			for _, restart := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/memFirst=%d/restart=%v", name, first, restart), func(t *testing.T) {
					q := q
					q.memFirst, q.restartEvery = first, restart
					res := rvCompare(t, newRVScript(arrow.Millisecond, rvEdgeBatches(rvBase)), q)
					rvCheckState(t, res, 2, q.mode != engine.Complete, q.timeCol)
				})
			}
		}
	}
}

// TestReviewEvictChainPerOperator: window -> GroupBy(window_end) in append
// mode (update is refused below a second aggregation), with one operator on pebble and the other in memory (both ways)
// and both on pebble, with a restart every batch.
func TestReviewEvictChainPerOperator(t *testing.T) {
	// A sliding window by panes, then a group-by on its window_end (the
	// event time it passes on, minus 1 ms).
	build2 := func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).WithWatermark("ts", 5*time.Second).
			GroupByWindow(engine.SlidingWindow("ts", 20*time.Second, 10*time.Second), "k").ID("w").Agg(rvSum()...).
			GroupBy("window_end").ID("g").Agg(batch.Sum(batch.Col("total")).As("total"), batch.CountRows().As("n"))
	}
	per := map[string]func(b *pebblestore.Backend) []engine.Option{
		"wPebble": func(b *pebblestore.Backend) []engine.Option {
			return []engine.Option{engine.WithOperatorStateStore("w", b)}
		},
		"gPebble": func(b *pebblestore.Backend) []engine.Option {
			return []engine.Option{engine.WithOperatorStateStore("g", b)}
		},
		"both": func(b *pebblestore.Backend) []engine.Option {
			return []engine.Option{engine.WithStateStore(b)}
		},
		"bothButG": func(b *pebblestore.Backend) []engine.Option {
			return []engine.Option{engine.WithStateStore(b), engine.WithOperatorStateStore("g", nil)}
		},
	}
	for name, opts := range per {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", name, restart), func(t *testing.T) {
				rvCompare(t, newRVScript(arrow.Millisecond, rvEdgeBatches(rvBase)), rvCase{build: build2, mode: engine.Append, perOp: opts, restartEvery: restart, parts: 3})
			})
		}
	}
}

// TestReviewDedupWithinWatermarkReturns: DropDuplicatesWithinWatermark
// (delay 5 s) with keys whose expiry (first time + 5 s) lies exactly at
// the watermark (kept: a duplicate), and keys that return after they
// expired (emitted again), on 1 and 5 partitions, with a restart every
// batch; pebble must match memory and the hand-worked answer.
func TestReviewDedupWithinWatermarkReturns(t *testing.T) {
	B := rvBase
	bs := [][]rvRow{
		{rvR(1, B+1000), rvR(2, B+3000)},     // new: 1, 2; watermark then 3000-5000
		{rvR(3, B+13_000)},                   // new: 3; watermark then 8000
		{rvR(2, B+13_000), rvR(4, B+9000)},   // 2 expires at 8000 = watermark: duplicate; new: 4; 1 evicted
		{rvR(1, B+20_000), rvR(2, B+8001)},   // 1 returns: new; 2 still a duplicate; 2 evicted (wm 8000? no: max 13000)
		{rvR(2, B+16_000), rvR(5, B+16_000)}, // watermark 15000: 2 expired
		{rvR(2, B+16_001), rvR(6, B+40_000)},
		{rvR(2, B+50_000), rvR(1, B+50_000)},
	}
	for _, parts := range []int{1, 5} {
		t.Run(fmt.Sprintf("parts=%d", parts), func(t *testing.T) {
			q := rvQueries()["dedupWithin"]
			q.restartEvery, q.parts = true, parts
			res := rvCompare(t, newRVScript(arrow.Millisecond, bs), q)
			var ks []string
			for _, id := range res.disk.BatchIDs() {
				var b []string
				for _, r := range res.disk.Batch(id) {
					b = append(b, fmt.Sprint(r[0]))
				}
				ks = append(ks, fmt.Sprintf("%d:%s", id, strings.Join(b, ",")))
			}
			t.Logf("emitted keys by batch: %v", ks)
			seen := map[string]int{}
			for _, r := range res.disk.All() {
				seen[fmt.Sprint(r[0])]++
			}
			if seen["1"] < 2 || seen["2"] < 2 {
				t.Fatalf("keys 1 and 2 must be emitted again after they expire: %v", seen)
			}
		})
	}
}

// TestReviewDedupWithinEventTimeKey: DropDuplicatesWithinWatermark with
// the event-time column among its keys runs in memory; on pebble it must
// run as well or be refused by NewQuery naming the operator and the way
// out.
func TestReviewDedupWithinEventTimeKey(t *testing.T) {
	build := func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).WithWatermark("ts", 5*time.Second).DropDuplicatesWithinWatermark("k", "ts").ID("w")
	}
	b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sc := newRVScript(arrow.Millisecond, rvEdgeBatches(rvBase))
	_, err = engine.NewQuery(build(sc), engine.WithCheckpoint(cp), engine.WithSink(memsink.New("x")), engine.WithStateStore(b))
	if err != nil {
		if !strings.Contains(err.Error(), `WithOperatorStateStore("w", nil)`) {
			t.Fatalf("refused without the way out: %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	rvCompare(t, sc, rvCase{build: build, mode: engine.Append, restartEvery: true, timeCol: "ts"})
}

// TestReviewPebbleToMemoryRefusedPerOperator: an operator whose state is
// on pebble cannot be moved back to memory with WithOperatorStateStore(id,
// nil): the query refuses to start (ErrBackendMismatch) and writes no
// batch.
func TestReviewPebbleToMemoryRefusedPerOperator(t *testing.T) {
	sc := newRVScript(arrow.Millisecond, rvEdgeBatches(rvBase))
	q := rvQueries()["tumblingAppend"]
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sink := memsink.New("x")
	common := []engine.Option{engine.WithCheckpoint(cp), engine.WithSink(sink), engine.WithTrigger(engine.AvailableNow()), engine.WithOutputMode(engine.Append)}
	sc.avail.Store(3)
	if err := run(t, q.build(sc), append(common, engine.WithStateStore(b))...); err != nil {
		t.Fatal(err)
	}
	n := len(sink.BatchIDs())
	sc.avail.Store(6)
	err = run(t, q.build(sc), append(common, engine.WithStateStore(b), engine.WithOperatorStateStore("w", nil))...)
	if !errors.Is(err, statestore.ErrBackendMismatch) {
		t.Fatalf("pebble -> memory for operator w: %v", err)
	}
	if len(sink.BatchIDs()) != n {
		t.Fatalf("batches written after the refusal: %d, before %d", len(sink.BatchIDs()), n)
	}
}

// TestReviewEvictMoreShapes: a chain of two evicting operators (dedup
// within the watermark, then a window; complete mode is refused below a
// second aggregation), a sliding
// window without keys and one with a non-combinable aggregate (row per
// window in append mode, not panes), on 3 partitions with a restart every
// batch.
func TestReviewEvictMoreShapes(t *testing.T) {
	wm := 5 * time.Second
	cases := map[string]rvCase{
		"dedupThenWindow": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).
				DropDuplicatesWithinWatermark("k").ID("d").
				GroupByWindow(engine.TumblingWindow("ts", 10*time.Second), "k2").ID("w").Agg(rvSum()...)
		}, mode: engine.Append, timeCol: "window_end"},
		"slidingNoKeysAppend": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.SlidingWindow("ts", 30*time.Second, 10*time.Second)).ID("w").Agg(rvSum()...)
		}, mode: engine.Append, timeCol: "window_end"},
		"slidingDistinctAppend": {build: func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", wm).GroupByWindow(engine.SlidingWindow("ts", 30*time.Second, 10*time.Second), "k2").ID("w").Agg(batch.CountDistinct(batch.Col("k")).As("keys"), batch.Max(batch.Col("amount")).As("m"))
		}, mode: engine.Append, timeCol: "window_end"},
	}
	for name, q := range cases {
		t.Run(name, func(t *testing.T) {
			q.restartEvery, q.parts = true, 3
			res := rvCompare(t, newRVScript(arrow.Millisecond, rvEdgeBatches(rvBase)), q)
			if q.timeCol != "" {
				rvCheckState(t, res, 3, true, q.timeCol)
			}
		})
	}
}

// TestReviewEvictManyDue: one window holding more groups than a pebble
// batch (applyRows) and a ScanBefore record (64Ki) in one partition,
// closed and evicted at once, on a tumbling window in append mode: the
// output and the (empty) state match memory.
func TestReviewEvictManyDue(t *testing.T) {
	B := rvBase
	const n = 70_000
	first := make([]rvRow, 0, n)
	for k := range int64(n) {
		first = append(first, rvR(k, B+1000+k%5000))
	}
	bs := [][]rvRow{first, {rvR(1, B+30_000)}, {rvR(2, B+40_000)}, {rvR(3, B+60_000)}}
	q := rvQueries()["tumblingAppend"]
	q.parts, q.restartEvery = 1, true
	res := rvCompare(t, newRVScript(arrow.Millisecond, bs), q)
	var out int
	for _, r := range res.disk.All() {
		_ = r
		out++
	}
	if out < n {
		t.Fatalf("%d windows emitted, want at least %d", out, n)
	}
	rvCheckState(t, res, 1, true, q.timeCol)
}
