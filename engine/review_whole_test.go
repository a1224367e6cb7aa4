package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// Review of "one working table" (whole.go): a group-by or row-per-window
// aggregation in memory keeps one kernel.GroupBy for all its state
// partitions and splits only its state changes and its output by
// partition. The partitioned path (q.cfg.partitionedAgg) is the oracle:
// every test compares the output (rows in order), the progress figures and
// every committed state version, partition by partition, batch for batch,
// with restarts from the checkpoint between batches and checkpoints that
// change path between runs.

// wholePaths says, per run of a query, whether it takes the partitioned
// path (the oracle) or the one working table.
type wholePaths struct {
	name        string
	partitioned func(run, runs int) bool
}

var (
	wholeOracle = wholePaths{"partitioned", func(int, int) bool { return true }}
	// Alternating paths, a restart between every two batches, change
	// path at every restart, both ways.
	wholeVaries = []wholePaths{
		{"whole", func(int, int) bool { return false }},
		{"alternating, partitioned first", func(r, _ int) bool { return r%2 == 0 }},
		{"alternating, whole first", func(r, _ int) bool { return r%2 == 1 }},
	}
)

type wholeRes struct {
	out, progress, state []string
	errs                 []string
	batches              int64
}

// wholeCase is a query of the equivalence tests: its output mode and the
// operators whose state is compared.
type wholeCase struct {
	name   string
	mode   OutputMode
	ops    []string
	stream func([]Source) *Stream
}

type wholeCfg struct {
	mode  OutputMode
	parts int
	ops   []string
	// runs: the first runs-1 run one batch each (Once), the last the
	// rest (AvailableNow); 0: one run a batch.
	runs int
	mem  memory.Allocator
	// store wraps the checkpoint (nil: a local store).
	store func(storage.Store) storage.Store
	// keepGoing: a run's error is recorded, not fatal.
	keepGoing bool
	// knob sets test knobs on run's query (after NewQuery).
	knob func(q *Query, run int)
	// opts are more options for every run.
	opts []Option
	// fromVersion is the first state version compared (older ones may
	// be purged).
	fromVersion int64
	// combiner leaves the partitioned path's combiner at its default
	// (adaptive); otherwise it is off, so that the partitioned path adds
	// rows one by one, as the one table does.
	combiner bool
}

func wholeProgressLine(t *testing.T, p Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch %d in %d", p.BatchID, p.NumInputRows)
	for _, s := range p.Sinks {
		fmt.Fprintf(&b, " out %d", s.NumOutputRows)
	}
	var ev []string
	for k, v := range p.EventTime {
		ev = append(ev, k+"="+v)
	}
	sort.Strings(ev)
	fmt.Fprintf(&b, " event %v", ev)
	for _, op := range p.StateOperators {
		fmt.Fprintf(&b, "; %s (%s) total %d updated %d removed %d late %d parts %d", op.OperatorID, op.OperatorName, op.NumRowsTotal, op.NumRowsUpdated, op.NumRowsRemoved, op.NumRowsDroppedByWatermark, op.NumPartitions)
		var cm []string
		for k, v := range op.CustomMetrics {
			if k == "numRowsCombined" || k == "numPartialGroups" {
				continue
			}
			cm = append(cm, fmt.Sprint(k, "=", v))
		}
		sort.Strings(cm)
		fmt.Fprintf(&b, " %v", cm)
		if op.MemoryUsedBytes < 0 || op.NumRowsTotal > 0 && op.MemoryUsedBytes == 0 {
			t.Errorf("batch %d operator %s: %d rows in %d bytes", p.BatchID, op.OperatorID, op.NumRowsTotal, op.MemoryUsedBytes)
		}
	}
	return b.String()
}

// wholeRun runs stream over scripts, restarted from its checkpoint between
// runs, each run on the path paths gives it.
func wholeRun(t *testing.T, stream func([]Source) *Stream, scripts [][][][]revRow, c wholeCfg, paths wholePaths) wholeRes {
	t.Helper()
	cp := localStore(t)
	if c.store != nil {
		cp = c.store(cp)
	}
	sink := memsink.New("out")
	var res wholeRes
	var mu sync.Mutex
	listen := WithProgressListener(func(p Progress) {
		line := wholeProgressLine(t, p)
		mu.Lock()
		res.progress = append(res.progress, line)
		res.batches = max(res.batches, p.BatchID+1)
		mu.Unlock()
	})
	mk := func() []Source {
		var srcs []Source
		for i, s := range scripts {
			srcs = append(srcs, &revScript{name: strconv.Itoa(i), batches: s})
		}
		return srcs
	}
	nb := 0
	for _, s := range scripts {
		nb = max(nb, len(s))
	}
	runs := c.runs
	if runs == 0 {
		runs = nb + 1
	}
	parts := c.parts
	if parts == 0 {
		parts = 3
	}
	for i := range runs {
		trig := Once()
		if i == runs-1 {
			trig = AvailableNow()
		}
		opts := []Option{WithCheckpoint(cp), WithSink(sink), WithTrigger(trig), WithOutputMode(c.mode),
			WithStatePartitions(parts), WithSnapshotEvery(3), listen}
		if c.mem != nil {
			opts = append(opts, WithAllocator(c.mem))
		}
		opts = append(opts, c.opts...)
		q, err := NewQuery(stream(mk()), opts...)
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.partitionedAgg = paths.partitioned(i, runs)
		if !c.combiner {
			q.cfg.combine = combineKnobs{mode: combineOff}
		}
		if c.knob != nil {
			c.knob(q, i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = q.Run(ctx)
		cancel()
		if err != nil {
			if !c.keepGoing {
				t.Fatalf("%s: run %d: %v", paths.name, i, err)
			}
			res.errs = append(res.errs, fmt.Sprintf("run %d: %s", i, wholeErrText(err)))
		}
	}
	for _, id := range sink.BatchIDs() {
		for _, r := range sink.Batch(id) {
			res.out = append(res.out, fmt.Sprint(id, r))
		}
	}
	res.state = wholeStateVersions(t, cp, stream(mk()), c.mode, c.ops, parts, c.fromVersion, res.batches)
	return res
}

// wholeStateVersions is stateVersions from version from on (the older
// ones may be purged).
func wholeStateVersions(t *testing.T, cp storage.Store, stream *Stream, mode OutputMode, ops []string, parts int, from, versions int64) []string {
	t.Helper()
	ctx := context.Background()
	cfg := defaultConfig()
	cfg.mode = mode
	ex, err := bindStream(stream, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.release()
	specs := map[string]storeSpec{}
	for _, c := range ex.ops {
		specs[c.op.id()] = c.specs[0]
	}
	var out []string
	for _, op := range ops {
		for p := range parts {
			st, err := statestore.Open(ctx, StateFolder(cp, op, p, ""), statestore.Options{KeySchema: specs[op].key, ValueSchema: specs[op].value})
			if err != nil {
				t.Fatal(err)
			}
			for v := from; v < versions; v++ {
				recs, err := st.Load(ctx, v)
				if err != nil {
					t.Fatalf("%s partition %d version %d: %v", op, p, v, err)
				}
				rows, err := memsink.Rows(recs)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					r.Release()
				}
				out = append(out, fmt.Sprintf("%s/%d v%d %v", op, p, v, rows))
			}
		}
	}
	return out
}

// wholeErrText is an error without what names a partition (the
// partitioned path says "operator g partition 2: ...", the one table
// "operator g: ..." where it merges).
func wholeErrText(err error) string {
	return wholePartRE.ReplaceAllString(err.Error(), "")
}

var wholePartRE = regexp.MustCompile(` partition \d+`)

// wholeCompare runs the oracle and every path pattern and compares them.
func wholeCompare(t *testing.T, stream func([]Source) *Stream, scripts [][][][]revRow, c wholeCfg) {
	t.Helper()
	want := wholeRun(t, stream, scripts, c, wholeOracle)
	if len(want.out) == 0 && len(want.errs) == 0 {
		t.Fatal("the oracle has no output")
	}
	for _, paths := range wholeVaries {
		got := wholeRun(t, stream, scripts, c, paths)
		for _, cmp := range []struct {
			what     string
			got, exp []string
		}{{"errors", got.errs, want.errs}, {"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
			if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
				t.Errorf("%s: %s differs from the partitioned path:\n%s", paths.name, cmp.what, firstDiff(cmp.got, cmp.exp))
			}
		}
	}
}

func wholeScripts(seed uint64, sources, batches int) [][][][]revRow {
	var scripts [][][][]revRow
	for i := range max(1, sources) {
		scripts = append(scripts, revGen(seed*131+uint64(i), batches))
	}
	return scripts
}

// TestReviewWholeRestartEquivalence: group-bys and windows in every output
// mode, restarted between batches, on checkpoints that change path from
// run to run (partitioned first, whole first, alternating): output,
// progress and every state version, partition by partition, are the
// partitioned path's.
func TestReviewWholeRestartEquivalence(t *testing.T) {
	c := batch.Col
	cases := []wholeCase{
		{"group by k,n/update", Update, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k", "n").ID("g").Agg(revAggs()...)
		}},
		{"group by f (NaN, -0, nulls), b/complete", Complete, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("f", "b").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.CountRows().As("rows"), batch.First(c("s")).As("fs"), batch.Last(c("k")).As("lk"))
		}},
		{"event time among the keys/update (eviction)", Update, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("k", "ts").ID("g").Agg(revAggs()...)
		}},
		{"event time among the keys/append (eviction)", Append, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("ts", "n").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
		}},
		{"tumbling window/append", Append, []string{"w"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k", "n").ID("w").Agg(revAggs()...)
		}},
		{"tumbling window/update", Update, []string{"w"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("w").Agg(revAggs()...)
		}},
		{"tumbling window/complete", Complete, []string{"w"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "n").ID("w").Agg(batch.Sum(c("v")).As("sv"), batch.First(c("k")).As("fk"))
		}},
		{"sliding window (a row per window)/update", Update, []string{"w"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 4*time.Second).GroupByWindow(SlidingWindow("ts", 12*time.Second, 4*time.Second), "k").ID("w").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wholeCompare(t, tc.stream, wholeScripts(uint64(len(tc.name)), 1, 6), wholeCfg{mode: tc.mode, ops: tc.ops})
		})
	}
}

// TestReviewWholeKeyTypes: keys of every type the hash and the table take
// (large strings, binary, int8, int64, uint64, float32 with NaN and -0,
// timestamps, nulls), several at once, with eviction: removed keys and
// upserts land in the partitions the partitioned path puts them in.
func TestReviewWholeKeyTypes(t *testing.T) {
	c := batch.Col
	typed := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 3*time.Second).Select(
			batch.As(batch.Cast(c("k"), arrow.BinaryTypes.LargeString), "lk"),
			batch.As(batch.Cast(c("s"), arrow.BinaryTypes.Binary), "bs"),
			batch.As(batch.Cast(batch.Mod(c("n"), batch.Lit(int32(100))), arrow.PrimitiveTypes.Int8), "i8"),
			batch.As(batch.Cast(c("n"), arrow.PrimitiveTypes.Int64), "n64"),
			batch.As(batch.Cast(c("u"), arrow.PrimitiveTypes.Uint64), "u64"),
			batch.As(batch.Cast(c("f"), arrow.PrimitiveTypes.Float32), "f32"),
			batch.As(c("ts"), "ts"), batch.As(c("v"), "v"), batch.As(c("b"), "b"), batch.As(c("s"), "s"))
	}
	aggs := func() []batch.Agg {
		return []batch.Agg{batch.Sum(c("v")).As("sv"), batch.CountRows().As("rows"), batch.First(c("s")).As("fs"), batch.Last(c("v")).As("lv")}
	}
	cases := []wholeCase{
		{"large string, int8/update", Update, []string{"g"}, func(s []Source) *Stream {
			return typed(s).GroupBy("lk", "i8").ID("g").Agg(aggs()...)
		}},
		{"binary, bool, float32/complete", Complete, []string{"g"}, func(s []Source) *Stream {
			return typed(s).GroupBy("bs", "b", "f32").ID("g").Agg(aggs()...)
		}},
		{"float32, int64, ts/update (eviction)", Update, []string{"g"}, func(s []Source) *Stream {
			return typed(s).GroupBy("f32", "n64", "ts").ID("g").Agg(aggs()...)
		}},
		{"uint64, large string, ts/append (eviction)", Append, []string{"g"}, func(s []Source) *Stream {
			return typed(s).GroupBy("ts", "u64", "lk").ID("g").Agg(aggs()...)
		}},
		{"window over large string, int8/append", Append, []string{"w"}, func(s []Source) *Stream {
			return typed(s).GroupByWindow(TumblingWindow("ts", 6*time.Second), "lk", "i8").ID("w").Agg(aggs()...)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wholeCompare(t, tc.stream, wholeScripts(uint64(len(tc.name)), 1, 7), wholeCfg{mode: tc.mode, ops: tc.ops})
		})
	}
}

// TestReviewWholeChains: an aggregation on one table after another
// operator and before another (windows then windows, a group-by whose
// groups close then a window, dedup then group by, join then group by),
// with order-sensitive aggregates (First, Last) downstream, which see the
// upstream operator's output order.
func TestReviewWholeChains(t *testing.T) {
	c := batch.Col
	cases := []struct {
		name    string
		mode    OutputMode
		ops     []string
		sources int
		stream  func([]Source) *Stream
	}{
		{"window then window/append", Append, []string{"w", "w2"}, 1, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).
				GroupByWindow(TumblingWindow("ts", 5*time.Second), "k", "n").ID("w").
				Agg(batch.Sum(c("v")).As("sv"), batch.CountRows().As("c"), batch.Last(c("s")).As("ls"), batch.First(c("b")).As("fb")).
				Select(batch.As(c("window_start"), "slot"), batch.As(c("window_end"), "slot_end"), batch.As(c("n"), "n"), batch.As(c("k"), "k"), batch.As(c("sv"), "sv"), batch.As(c("ls"), "ls"), batch.As(c("fb"), "fb")).
				GroupByWindow(TumblingWindow("slot", 20*time.Second), "n").ID("w2").
				Agg(batch.Sum(c("sv")).As("total"), batch.First(c("k")).As("fk"), batch.Last(c("k")).As("lk"), batch.First(c("ls")).As("fls"), batch.Last(c("fb")).As("lfb"))
		}},
		{"group by closing groups then window/append", Append, []string{"g", "w"}, 1, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 2*time.Second).
				GroupBy("ts", "k").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls")).
				GroupByWindow(TumblingWindow("ts", 10*time.Second)).ID("w").
				Agg(batch.First(c("k")).As("fk"), batch.Last(c("k")).As("lk"), batch.First(c("sv")).As("fsv"), batch.Last(c("ls")).As("lls"), batch.Sum(c("sv")).As("total"))
		}},
		{"window then group by window_end/update", Append, []string{"w", "g"}, 1, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).
				GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("w").Agg(batch.Sum(c("v")).As("sv")).
				GroupBy("window_end").ID("g").Agg(batch.First(c("k")).As("fk"), batch.Last(c("k")).As("lk"), batch.Sum(c("sv")).As("total"))
		}},
		{"dedup then group by/update", Update, []string{"d", "g"}, 1, func(s []Source) *Stream {
			return ReadStream(s...).DropDuplicates("k", "s").ID("d").GroupBy("n").ID("g").Agg(batch.First(c("k")).As("fk"), batch.Last(c("s")).As("ls"), batch.Sum(c("v")).As("sv"))
		}},
		{"join then group by/update", Update, []string{"g"}, 2, func(s []Source) *Stream {
			right := ReadStream(s[1]).Select(batch.As(c("k"), "rk"), batch.As(c("s"), "rs"), batch.As(c("v"), "rv"))
			return ReadStream(s[0]).Join(right, Inner, On("k", "rk")).ID("j").
				GroupBy("n", "rs").ID("g").Agg(batch.Sum(c("rv")).As("srv"), batch.First(c("rk")).As("fk"), batch.Last(c("v")).As("lv"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wholeCompare(t, tc.stream, wholeScripts(uint64(len(tc.name)), tc.sources, 8), wholeCfg{mode: tc.mode, ops: tc.ops})
		})
	}
}

// TestReviewWholePartitionCounts: 1, 3 and 8 state partitions (8 is the
// default: most partitions hold no group, and a whole-state commit writes
// every one of them).
func TestReviewWholePartitionCounts(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("k", "ts").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
	}
	win := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "n").ID("w").Agg(batch.Sum(c("v")).As("sv"), batch.First(c("k")).As("fk"))
	}
	for _, p := range []int{1, 3, 8} {
		t.Run(fmt.Sprint("group by/update/", p), func(t *testing.T) {
			wholeCompare(t, stream, wholeScripts(uint64(p), 1, 8), wholeCfg{mode: Update, ops: []string{"g"}, parts: p})
		})
		t.Run(fmt.Sprint("window/append/", p), func(t *testing.T) {
			wholeCompare(t, win, wholeScripts(uint64(p)+7, 1, 8), wholeCfg{mode: Append, ops: []string{"w"}, parts: p})
		})
	}
}

// TestReviewWholeChangedPartitionsRefused: the checkpoint records P; a
// restart with another P is refused on either path, and the state is left
// as it was.
func TestReviewWholeChangedPartitionsRefused(t *testing.T) {
	stream := func(s Source) *Stream {
		return ReadStream(s).GroupBy("k").ID("g").Agg(batch.Sum(batch.Col("v")).As("sv"))
	}
	script := revGen(3, 4)
	for _, partitioned := range []bool{false, true} {
		cp := localStore(t)
		for i, p := range []int{3, 5, 1, 3} {
			q, err := NewQuery(stream(&revScript{batches: script}), WithCheckpoint(cp), WithSink(memsink.New("out")), WithTrigger(Once()), WithStatePartitions(p))
			if err != nil {
				t.Fatal(err)
			}
			q.cfg.partitionedAgg = partitioned && i > 0
			err = q.Run(context.Background())
			if (p != 3) != (err != nil) {
				t.Errorf("partitioned %v: run %d with %d partitions (checkpoint: 3): error %v", partitioned, i, p, err)
			}
		}
		got := stateVersions(t, cp, stream(&revScript{batches: script}), Update, []string{"g"}, 3, 2)
		if len(got) != 6 {
			t.Errorf("partitioned %v: state %v", partitioned, got)
		}
	}
}

// wholeOverflowScript: batch 2 takes group m's sum of v past int64 (its
// rows arrive in several records, beside other groups in every
// partition); the batches after it never run.
func wholeOverflowScript() [][][]revRow {
	var script [][][]revRow
	for b := range 5 {
		var recs [][]revRow
		for r := range 3 {
			var rows []revRow
			for i := range 6 {
				rows = append(rows, revRow{k: fmt.Sprint("k", (b+r+i)%7), n: int32(i), sec: int64(b*5 + i), v: int64(b*100 + i), s: fmt.Sprint("s", i)})
			}
			if b == 2 || b == 1 {
				rows = append(rows, revRow{k: "m", n: 1, sec: int64(b * 5), v: math.MaxInt64 / 3, s: "big"})
			}
			recs = append(recs, rows)
		}
		script = append(script, recs)
	}
	return script
}

// TestReviewWholeOverflowOutcome: a batch whose merge overflows fails on
// the one table as on the partitioned path, and so does every restart
// (whichever path the checkpoint was written by); nothing of the failed
// batch is committed, and the state and output before it are the oracle's.
func TestReviewWholeOverflowOutcome(t *testing.T) {
	c := batch.Col
	streams := map[string]func([]Source) *Stream{
		"group by": func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
		},
		"window": func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 100*time.Second), "k").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.CountRows().As("rows"))
		},
	}
	for name, stream := range streams {
		t.Run(name, func(t *testing.T) {
			cfg := wholeCfg{mode: Update, ops: []string{"g"}, keepGoing: true, runs: 6}
			want := wholeRun(t, stream, [][][][]revRow{wholeOverflowScript()}, cfg, wholeOracle)
			if len(want.errs) != 4 || !strings.Contains(want.errs[0], "overflow") {
				t.Fatalf("the oracle's errors: %v", want.errs)
			}
			for _, paths := range wholeVaries {
				got := wholeRun(t, stream, [][][][]revRow{wholeOverflowScript()}, cfg, paths)
				for _, cmp := range []struct {
					what     string
					got, exp []string
				}{{"errors", got.errs, want.errs}, {"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
					if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
						t.Errorf("%s: %s differs from the partitioned path:\n%s", paths.name, cmp.what, firstDiff(cmp.got, cmp.exp))
					}
				}
			}
		})
	}
}

// wholeFailStore fails the first Put of each named file, and writes every
// other state file at once, durably, outside the batch's sync group: a
// version that some partitions committed and others did not.
type wholeFailStore struct {
	storage.Store
	mu   sync.Mutex
	fail map[string]bool
}

func (s *wholeFailStore) Put(ctx context.Context, name string, data []byte) error {
	s.mu.Lock()
	fail := s.fail[name]
	delete(s.fail, name)
	s.mu.Unlock()
	if fail {
		return errors.New("injected: disk full")
	}
	if strings.HasPrefix(name, "state/") {
		return s.Store.Put(context.Background(), name, data)
	}
	return s.Store.Put(ctx, name, data)
}

// TestReviewWholeHalfCommittedVersion: a batch whose commit fails in one
// partition after the others committed (their files of that version are
// durable), re-run after a restart on either path: the output and every
// state version are those of a run without the failure.
func TestReviewWholeHalfCommittedVersion(t *testing.T) {
	c := batch.Col
	streams := map[string]struct {
		mode   OutputMode
		stream func([]Source) *Stream
	}{
		"group by/update": {Update, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k", "n").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"), batch.CountRows().As("rows"))
		}},
		"event time key/update": {Update, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("k", "ts").ID("g").Agg(batch.Sum(c("v")).As("sv"))
		}},
		"window/append": {Append, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.First(c("s")).As("fs"))
		}},
	}
	scripts := wholeScripts(11, 1, 7)
	for name, st := range streams {
		t.Run(name, func(t *testing.T) {
			base := wholeCfg{mode: st.mode, ops: []string{"g"}, keepGoing: true, runs: 9}
			want := wholeRun(t, st.stream, scripts, base, wholeOracle)
			for _, failAt := range []string{fmt.Sprintf("state/g/deltas/%020d.delta", 2), fmt.Sprintf("state/g/deltas/%020d.delta", 5)} {
				for _, paths := range append([]wholePaths{wholeOracle}, wholeVaries[0], wholeVaries[2]) {
					cfg := base
					cfg.store = func(s storage.Store) storage.Store {
						return &wholeFailStore{Store: s, fail: map[string]bool{failAt: true}}
					}
					got := wholeRun(t, st.stream, scripts, cfg, paths)
					if len(got.errs) != 1 || !strings.Contains(got.errs[0], "injected") {
						t.Errorf("%s, failing %s: errors %v, want the injected one once", paths.name, failAt, got.errs)
					}
					for _, cmp := range []struct {
						what     string
						got, exp []string
					}{{"output", got.out, want.out}, {"state", got.state, want.state}} {
						if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
							t.Errorf("%s, failing %s: %s differs from a run without the failure:\n%s", paths.name, failAt, cmp.what, firstDiff(cmp.got, cmp.exp))
						}
					}
				}
			}
		})
	}
}

// TestReviewWholeOverflowAndBackAsBefore: a batch whose rows take a
// group's running sum past int64 and back by its end (100, then
// MaxInt64-50, -100 and 0) succeeded with the exact sum on the default
// path before one working table (partitioned, the adaptive combiner adds
// the batch's net sum: combine.go documents it). The one table adds row by
// row and fails it. So a checkpoint written before the change whose newest
// batch reached the sinks but not commits/N replays N with the new code
// into a failure, on every restart: the query can never pass a batch the
// sinks already hold, which combine.go's rule "a replay must not turn a
// failed batch into an emitted one or the other way round" forbids.
func TestReviewWholeOverflowAndBackAsBefore(t *testing.T) {
	script := [][]payRow{
		{{id: "a", merchant: "m", sec: 1, amount: 100}, {id: "b", merchant: "n", sec: 1, amount: 1}},
		{{id: "c", merchant: "m", sec: 2, amount: math.MaxInt64 - 50}, {id: "d", merchant: "m", sec: 2, amount: -100}, {id: "e", merchant: "m", sec: 2, amount: 0}},
	}
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	sink := memsink.New("out")
	cp := localStore(t)
	run := func(partitioned bool, store storage.Store) error {
		q, err := NewQuery(stream(&payScript{batches: script}), WithCheckpoint(store), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.partitionedAgg = partitioned // the combiner at its default
		return q.Run(context.Background())
	}
	// Before the change: batch 1 reaches the sink, and its commit is lost.
	lost := &wholeLoseCommit{Store: cp, name: checkpoint.CommitFile(1)}
	if err := run(true, lost); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("the run before the change: %v", err)
	}
	before := fmt.Sprint(sink.All())
	// After the change: batch 1 is replayed from its entry.
	for i := range 2 {
		if err := run(false, cp); err != nil {
			t.Errorf("restart %d on one working table replays batch 1, which the sink holds (%s): %v", i, before, err)
		}
	}
}

// wholeLoseCommit fails the write of one commit entry.
type wholeLoseCommit struct {
	storage.Store
	name string
}

func (s *wholeLoseCommit) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	if name == s.name {
		return errors.New("injected: commit lost")
	}
	return s.Store.PutIfAbsent(ctx, name, data)
}

func (s *wholeLoseCommit) Put(ctx context.Context, name string, data []byte) error {
	if name == s.name {
		return errors.New("injected: commit lost")
	}
	return s.Store.Put(ctx, name, data)
}

// TestReviewWholeNoLeak: one working table releases every buffer it takes
// from the query's allocator: output and state split by partition, the
// table's restart from partitions loaded in turn, a batch whose merge
// overflows, a version whose commit fails in one partition, and a restart
// whose load fails in one partition while the next ones wait their turn.
func TestReviewWholeNoLeak(t *testing.T) {
	c := batch.Col
	cases := []wholeCase{
		{"group by/update", Update, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k", "n").ID("g").Agg(revAggs()...)
		}},
		{"event time key/update", Update, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("k", "ts").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
		}},
		{"window/complete", Complete, []string{"g"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("g").Agg(batch.Sum(c("v")).As("sv"))
		}},
		{"window then group by/append", Append, []string{"w", "g"}, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).
				GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("w").Agg(batch.Sum(c("v")).As("sv")).
				GroupBy("window_end").ID("g").Agg(batch.First(c("k")).As("fk"), batch.Sum(c("sv")).As("total"))
		}},
	}
	scripts := wholeScripts(5, 1, 6)
	for _, tc := range cases {
		for _, paths := range wholeVaries[:2] {
			t.Run(tc.name+"/"+paths.name, func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				wholeRun(t, tc.stream, scripts, wholeCfg{mode: tc.mode, ops: tc.ops, mem: mem, parts: 4}, paths)
				mem.AssertSize(t, 0)
			})
		}
	}
	groupBy := func(s []Source) *Stream {
		return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
	}
	t.Run("overflow", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		res := wholeRun(t, groupBy, [][][][]revRow{wholeOverflowScript()}, wholeCfg{mode: Update, ops: []string{"g"}, mem: mem, keepGoing: true, runs: 4}, wholeVaries[0])
		if len(res.errs) != 2 {
			t.Errorf("errors %v", res.errs)
		}
		mem.AssertSize(t, 0)
	})
	t.Run("commit fails in one partition", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		res := wholeRun(t, groupBy, scripts, wholeCfg{mode: Update, ops: []string{"g"}, mem: mem, keepGoing: true, parts: 4,
			store: func(s storage.Store) storage.Store {
				return &wholeFailStore{Store: s, fail: map[string]bool{fmt.Sprintf("state/g/deltas/%020d.delta", 3): true}}
			}}, wholeVaries[0])
		if len(res.errs) != 1 {
			t.Errorf("errors %v", res.errs)
		}
		mem.AssertSize(t, 0)
	})
	for _, bad := range []int{0, 1, 3} {
		t.Run(fmt.Sprint("load fails in partition ", bad), func(t *testing.T) {
			cp := localStore(t)
			sink := memsink.New("out")
			for range 3 {
				q, err := NewQuery(groupBy([]Source{&revScript{batches: scripts[0]}}), WithCheckpoint(cp), WithSink(sink), WithTrigger(Once()), WithStatePartitions(4))
				if err != nil {
					t.Fatal(err)
				}
				if err := q.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if err := cp.Put(context.Background(), fmt.Sprintf("state/g/%d/%020d.delta", bad, 2), []byte("not a state file")); err != nil {
				t.Fatal(err)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			q, err := NewQuery(groupBy([]Source{&revScript{batches: scripts[0]}}), WithCheckpoint(cp), WithSink(sink), WithTrigger(Once()), WithStatePartitions(4), WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err = q.Run(ctx)
			timedOut := ctx.Err() != nil
			cancel()
			if err == nil || timedOut || !strings.Contains(err.Error(), fmt.Sprint("partition ", bad)) {
				t.Errorf("restart over a bad state file in partition %d: %v", bad, err)
			}
			mem.AssertSize(t, 0)
		})
	}
}

// TestReviewWholeRowWindowsAdopted: a sliding window in append mode is
// computed by panes, unless the checkpoint holds it a row per window
// (written before panes): then adoptRows turns it back into a
// row-per-window aggregation, on one working table. Checkpoints written
// in that form by either path continue on the other.
func TestReviewWholeRowWindowsAdopted(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 4*time.Second).
			GroupByWindow(SlidingWindow("ts", 12*time.Second, 4*time.Second), "k").ID("w").
			Agg(batch.Sum(c("v")).As("sv"), batch.First(c("s")).As("fs"), batch.Last(c("n")).As("ln"), batch.CountRows().As("rows"))
	}
	// The first run writes the row-per-window form; later runs adopt it.
	knob := func(q *Query, run int) { q.cfg.rowWindows = run == 0 }
	wholeCompare(t, stream, wholeScripts(21, 1, 8), wholeCfg{mode: Append, ops: []string{"w"}, knob: knob})
}

// TestReviewWholeLargeState: thousands of groups per partition (the
// stores' loads return runs of stored rows as slices of their records),
// most of them changed in some batches and few in others (full and
// partial commits), evicted by the watermark, restarted between batches.
func TestReviewWholeLargeState(t *testing.T) {
	c := batch.Col
	var script [][][]revRow
	for b := range 6 {
		var recs [][]revRow
		keys := 3000
		if b%2 == 1 {
			keys = 40 // few groups change: a partial commit
		}
		for r := range 3 {
			var rows []revRow
			for i := r; i < keys; i += 3 {
				rows = append(rows, revRow{k: fmt.Sprint("key-", (i*7+b)%keys), n: int32(i % 5), sec: int64(b*4 + i%3), v: int64(i), s: fmt.Sprint("s", i%11)})
			}
			recs = append(recs, rows)
		}
		script = append(script, recs)
	}
	stream := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 6*time.Second).GroupBy("k", "ts").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
	}
	wholeCompare(t, stream, [][][][]revRow{script}, wholeCfg{mode: Update, ops: []string{"g"}, parts: 3, runs: 5})
}

// wholePeakAlloc counts the bytes allocated and not yet freed, and their
// peak.
type wholePeakAlloc struct {
	memory.Allocator
	mu        sync.Mutex
	cur, peak int64
}

func (a *wholePeakAlloc) add(n int64) {
	a.mu.Lock()
	a.cur += n
	a.peak = max(a.peak, a.cur)
	a.mu.Unlock()
}

func (a *wholePeakAlloc) Allocate(size int) []byte {
	a.add(int64(size))
	return a.Allocator.Allocate(size)
}

func (a *wholePeakAlloc) Reallocate(size int, b []byte) []byte {
	a.add(int64(size - len(b)))
	return a.Allocator.Reallocate(size, b)
}

func (a *wholePeakAlloc) Free(b []byte) {
	a.add(-int64(len(b)))
	a.Allocator.Free(b)
}

// wholeBigSource is one batch of recs records of rows rows each (ten
// merchants), built with mem.
type wholeBigSource struct {
	mem        memory.Allocator
	recs, rows int
}

func (s *wholeBigSource) Schema() *arrow.Schema { return paySchema }
func (s *wholeBigSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *wholeBigSource) LatestOffset(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage("1"), nil
}
func (s *wholeBigSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	if string(start) == string(end) {
		return nil
	}
	for r := range s.recs {
		ib := array.NewStringBuilder(s.mem)
		mb := array.NewStringBuilder(s.mem)
		tb := array.NewTimestampBuilder(s.mem, paySchema.Field(2).Type.(*arrow.TimestampType))
		ab := array.NewInt64Builder(s.mem)
		for i := range s.rows {
			ib.Append("id")
			mb.Append(fmt.Sprint("m", i%10))
			tb.Append(arrow.Timestamp(r))
			ab.Append(int64(i))
		}
		cols := []arrow.Array{ib.NewArray(), mb.NewArray(), tb.NewArray(), ab.NewArray()}
		for _, b := range []array.Builder{ib, mb, tb, ab} {
			b.Release()
		}
		rec := array.NewRecordBatch(paySchema, cols, int64(s.rows))
		for _, c := range cols {
			c.Release()
		}
		err := emit(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// TestReviewWholeBatchMemory: a large batch of few groups (200 records of
// 2000 rows, ten merchants). The one table holds every record of the batch
// (c.pending[0]) until finishWhole merges them; the default path before it
// (partitioned, the adaptive combiner) held them too (the combiner keeps
// the rows it folded for its overflow fallback). The one table's peak must
// not exceed it.
func TestReviewWholeBatchMemory(t *testing.T) {
	peak := func(partitioned bool) int64 {
		mem := &wholePeakAlloc{Allocator: memory.NewGoAllocator()}
		q, err := NewQuery(ReadStream(&wholeBigSource{mem: mem, recs: 200, rows: 2000}).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total")),
			WithCheckpoint(localStore(t)), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.partitionedAgg = partitioned // the combiner at its default
		if err := q.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return mem.peak
	}
	before, whole := peak(true), peak(false)
	t.Logf("peak bytes: default path before one working table %d, one working table %d", before, whole)
	if whole > 4*before {
		t.Errorf("one working table holds %d bytes at its peak for a batch of 400000 rows in ten groups, %.1fx the default path before it (%d)", whole, float64(whole)/float64(before), before)
	}
}

// TestReviewWholePartitionsEmptiedAndRefilled: with 8 partitions, batches
// whose groups the watermark evicts all at once (partitions emptied) while
// others gain groups, then batches where most groups change (a whole-state
// commit, decided over all partitions at once, writes the emptied ones as
// empty full deltas) and where few do, in update and append mode, with
// restarts between batches on alternating paths.
func TestReviewWholePartitionsEmptiedAndRefilled(t *testing.T) {
	row := func(k string, sec, v int64) revRow { return revRow{k: k, n: 1, sec: sec, v: v, s: k} }
	var script [][][]revRow
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprint("key", i))
	}
	// 0: twelve groups at 1s. 1: two new groups at 30s (the watermark
	// then passes 1s: the twelve are evicted at 2). 2: one of them
	// changes. 3: a group at 60s, one at 30s changes. 4: nothing but
	// late rows. 5: every group at 60s changes, two new.
	var b0 []revRow
	for i, k := range keys {
		b0 = append(b0, row(k, 1, int64(i)))
	}
	script = append(script,
		[][]revRow{b0[:5], b0[5:]},
		[][]revRow{{row("x", 30, 1), row("y", 30, 2)}},
		[][]revRow{{row("x", 30, 3)}},
		[][]revRow{{row("z", 60, 4), row("y", 30, 5)}},
		[][]revRow{{row("late", 1, 6)}},
		[][]revRow{{row("z", 60, 7), row("w", 60, 8), row("u", 61, 9)}},
		[][]revRow{{row("v", 90, 10)}},
	)
	c := batch.Col
	for _, mode := range []OutputMode{Update, Append} {
		t.Run(mode.String(), func(t *testing.T) {
			stream := func(s []Source) *Stream {
				return ReadStream(s...).WithWatermark("ts", 0).GroupBy("k", "ts").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
			}
			cfg := wholeCfg{mode: mode, ops: []string{"g"}, parts: 8}
			want := wholeRun(t, stream, [][][][]revRow{script}, cfg, wholeOracle)
			// The scenario: some partition holds groups at a version and
			// none at the next.
			emptied := false
			for i := 1; i < len(want.state); i++ {
				prev, cur := want.state[i-1], want.state[i]
				if !strings.HasSuffix(prev, " []") && strings.HasSuffix(cur, " []") && strings.Fields(prev)[0] == strings.Fields(cur)[0] {
					emptied = true
				}
			}
			if !emptied {
				t.Fatalf("no partition is emptied:\n%s", strings.Join(want.state, "\n"))
			}
			for _, paths := range wholeVaries {
				got := wholeRun(t, stream, [][][][]revRow{script}, cfg, paths)
				for _, cmp := range []struct {
					what     string
					got, exp []string
				}{{"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
					if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
						t.Errorf("%s: %s differs from the partitioned path:\n%s", paths.name, cmp.what, firstDiff(cmp.got, cmp.exp))
					}
				}
			}
		})
	}
}

// TestReviewWholePurgeAndSnapshots: a short retention (purges every
// batch) and a snapshot every batch, over whole-state commits written by
// one path and partial ones by the other: every retained version loads as
// the partitioned path's.
func TestReviewWholePurgeAndSnapshots(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("k", "ts").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Last(c("s")).As("ls"))
	}
	cfg := wholeCfg{mode: Update, ops: []string{"g"}, parts: 4, opts: []Option{WithMinBatchesToRetain(2), WithSnapshotEvery(1)}, fromVersion: 9}
	wholeCompare(t, stream, wholeScripts(41, 1, 10), cfg)
}

// TestReviewWholeListStates: count distinct keeps a list per group in its
// state, which the partitioned path never split (its input rows are
// scalar, and the combiner leaves count distinct out); the one table
// splits it by partition at every commit (kernel.Partition's take path).
// Output, progress and state are the partitioned path's, and no buffer of
// the query's allocator is left behind.
func TestReviewWholeListStates(t *testing.T) {
	c := batch.Col
	aggs := func() []batch.Agg {
		return []batch.Agg{batch.CountDistinct(c("s")).As("ds"), batch.CountDistinct(c("v")).As("dv"), batch.CountDistinct(c("f")).As("df"),
			batch.CountDistinct(c("b")).As("db"), batch.Sum(c("v")).As("sv")}
	}
	cases := []struct {
		name   string
		mode   OutputMode
		stream func([]Source) *Stream
	}{
		{"group by/update", Update, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(aggs()...)
		}},
		{"event time key/update", Update, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 2*time.Second).GroupBy("n", "ts").ID("g").Agg(aggs()...)
		}},
		{"window/append", Append, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("g").Agg(aggs()...)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wholeCompare(t, tc.stream, wholeScripts(uint64(len(tc.name)), 1, 6), wholeCfg{mode: tc.mode, ops: []string{"g"}})
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			wholeRun(t, tc.stream, wholeScripts(uint64(len(tc.name)), 1, 6), wholeCfg{mode: tc.mode, ops: []string{"g"}, mem: mem}, wholeVaries[0])
			mem.AssertSize(t, 0)
		})
	}
}
