package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/foreachbatch"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// Review of the split commit of one working table (150f692): in update
// mode without eviction, aggPart.finishUpdate has the table build its state
// change and its output already split by partition
// (kernel.GroupBy.StateOutputParts), and finishWhole commits and emits
// those pieces, slices of one record at non-zero offsets, instead of
// splitting. The partitioned path (cfg.partitionedAgg) stays the oracle:
// output rows in order, progress and every state version, partition by
// partition, with restarts that change path, over batches that commit the
// whole state and batches that commit a delta. Then what the pieces reach:
// the stateless steps after the aggregation and real sinks (Parquet files,
// foreachBatch, Kafka); the allocator's balance on success and error
// paths; and half-committed versions.

// partsScript makes batches that take turns: most groups plus new ones (a
// whole-state commit), a few groups (a delta), and a mix with nulls in
// every key column, NaN and -0 among the floats, records of one row and
// empty records.
func partsScript(seed uint64, batches int) [][][]revRow {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	strs := []string{"", "a", "zz", "a-much-longer-string-than-inline", "é"}
	groups := 0
	row := func(b, key int) revRow {
		x := revRow{k: fmt.Sprint("g", key), n: int32(key % 5), sec: int64(b*7 + r.IntN(6)), v: r.Int64N(2001) - 1000,
			s: strs[r.IntN(len(strs))], b: key%2 == 0, f: float64(key%7) - 3, u: uint32(key % 40)}
		switch key % 11 {
		case 0:
			x.f = math.NaN()
		case 1:
			x.f = math.Copysign(0, -1)
		}
		if key%17 == 0 {
			x.nulls |= revNullK
		}
		if key%13 == 0 {
			x.nulls |= revNullN
		}
		if key%19 == 0 {
			x.nulls |= revNullB | revNullF
		}
		if r.IntN(6) == 0 {
			x.nulls |= revNullV
		}
		if r.IntN(5) == 0 {
			x.nulls |= revNullS
		}
		return x
	}
	var script [][][]revRow
	for b := range batches {
		var rows []revRow
		switch b % 3 {
		case 0: // most groups, and new ones
			groups += 8 + r.IntN(40)
			for key := range groups {
				if r.IntN(8) != 0 {
					rows = append(rows, row(b, key))
				}
			}
			for range r.IntN(groups) {
				rows = append(rows, row(b, r.IntN(groups)))
			}
		case 1: // a few
			for range 1 + r.IntN(12) {
				rows = append(rows, row(b, r.IntN(max(1, groups/5))))
			}
		default:
			for range 5 + r.IntN(30) {
				rows = append(rows, row(b, r.IntN(groups+5)))
			}
			groups += 5
		}
		r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		var recs [][]revRow
		for len(rows) > 0 {
			n := min(len(rows), []int{1, 0, 7, 40, 1000}[r.IntN(5)])
			recs = append(recs, rows[:n])
			rows = rows[n:]
		}
		script = append(script, recs)
	}
	return script
}

var partsProgressRE = regexp.MustCompile(`; (\w+) \(\w+\) total (\d+) updated (\d+)`)

// partsCommits counts op's batches that commit the whole state (at least
// half the groups changed) and those that commit a delta, from progress
// lines.
func partsCommits(progress []string, op string) (whole, delta int) {
	for _, line := range progress {
		for _, m := range partsProgressRE.FindAllStringSubmatch(line, -1) {
			if m[1] != op {
				continue
			}
			total, _ := strconv.Atoi(m[2])
			updated, _ := strconv.Atoi(m[3])
			switch {
			case updated == 0:
			case 2*updated >= total:
				whole++
			default:
				delta++
			}
		}
	}
	return whole, delta
}

// partsCompare is wholeCompare that checks, when both, that the oracle
// commits op whole and as a delta.
func partsCompare(t *testing.T, stream func([]Source) *Stream, scripts [][][][]revRow, c wholeCfg, op string, both bool) {
	t.Helper()
	want := wholeRun(t, stream, scripts, c, wholeOracle)
	if len(want.out) == 0 {
		t.Fatal("the oracle has no output")
	}
	if w, d := partsCommits(want.progress, op); both && (w == 0 || d == 0) {
		t.Fatalf("the script commits the whole state %d times and a delta %d times; it must do both:\n%s", w, d, strings.Join(want.progress, "\n"))
	}
	for _, paths := range wholeVaries {
		got := wholeRun(t, stream, scripts, c, paths)
		for _, cmp := range []struct {
			what     string
			got, exp []string
		}{{"errors", got.errs, want.errs}, {"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
			if !slices.Equal(cmp.got, cmp.exp) {
				t.Errorf("%s: %s differs from the partitioned path:\n%s", paths.name, cmp.what, firstDiff(cmp.got, cmp.exp))
			}
		}
	}
}

// partsPerBatch are aggregates over the batch's rows only: no state
// column, a result built apart from the state's.
func partsPerBatch() []batch.Agg {
	c := batch.Col
	return []batch.Agg{batch.CountRows().PerBatch().As("batch_rows"), batch.Sum(c("v")).PerBatch().As("batch_sum"),
		batch.Last(c("s")).PerBatch().As("batch_last_s"), batch.Avg(c("v")).PerBatch().As("batch_avg")}
}

// TestReviewPartsUpdateEquivalence: update mode without eviction (the
// split commit) over string, integer, unsigned, float (NaN, -0), boolean
// and multi-column nullable keys, windows without a watermark, and a
// watermark that is not a key; every aggregate (averages, whose result is
// not their state; per-batch ones; distinct counts) at 1, 3 and 8
// partitions: output, progress and every state version are the
// partitioned path's, restarted between batches on alternating paths.
func TestReviewPartsUpdateEquivalence(t *testing.T) {
	c := batch.Col
	cases := []struct {
		name  string
		parts int
		op    string
		// both: the script must commit op whole and as a delta (low
		// cardinality keys make every batch change most groups).
		both   bool
		stream func([]Source) *Stream
	}{
		{"k/8 partitions", 8, "g", true, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(append(revAggs(), partsPerBatch()...)...)
		}},
		{"n,k nullable/3 partitions", 3, "g", true, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("n", "k").ID("g").Agg(batch.Avg(c("v")).As("av"), batch.CountDistinct(c("s")).As("ds"),
				batch.Avg(c("f")).As("af"), batch.Last(c("s")).As("ls"), batch.CountRows().PerBatch().As("batch_rows"))
		}},
		{"f,b (NaN, -0, nulls)/1 partition", 1, "g", false, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("f", "b").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Avg(c("v")).As("av"),
				batch.First(c("k")).As("fk"), batch.Last(c("k")).As("lk"), batch.Sum(c("f")).PerBatch().As("batch_sf"))
		}},
		{"u,k/5 partitions", 5, "g", true, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("u", "k").ID("g").Agg(batch.Min(c("s")).As("mins"), batch.Max(c("ts")).As("maxts"),
				batch.CountDistinct(c("v")).As("dv"), batch.Avg(c("u")).As("au"))
		}},
		{"tumbling window, no watermark/8 partitions", 8, "w", true, func(s []Source) *Stream {
			return ReadStream(s...).GroupByWindow(TumblingWindow("ts", 10*time.Second), "k").ID("w").Agg(append(revAggs()[:8], partsPerBatch()...)...)
		}},
		{"sliding window, no watermark/3 partitions", 3, "w", false, func(s []Source) *Stream {
			return ReadStream(s...).GroupByWindow(SlidingWindow("ts", 12*time.Second, 4*time.Second), "n").ID("w").Agg(batch.Sum(c("v")).As("sv"),
				batch.Avg(c("v")).As("av"), batch.First(c("k")).As("fk"), batch.Last(c("s")).As("ls"))
		}},
		{"watermark not among the keys/8 partitions", 8, "g", true, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupBy("k", "b").ID("g").Agg(batch.Sum(c("v")).As("sv"),
				batch.Avg(c("v")).As("av"), batch.Max(c("ts")).As("maxts"), batch.CountRows().PerBatch().As("batch_rows"))
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := wholeCfg{mode: Update, ops: []string{tc.op}, parts: tc.parts}
			partsCompare(t, tc.stream, [][][][]revRow{partsScript(uint64(i)+1, 7)}, cfg, tc.op, tc.both)
		})
	}
}

// TestReviewPartsStepsAfter: the pieces go through the stateless steps
// after the aggregation (projections over every column type: arithmetic
// on an average, strings cut and joined, conditions, casts, null tests;
// then a filter) before the sink; each piece is a slice at its offset, so
// every kernel must read it there.
func TestReviewPartsStepsAfter(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).GroupBy("k", "n").ID("g").
			Agg(batch.Sum(c("v")).As("sv"), batch.Avg(c("v")).As("av"), batch.Last(c("s")).As("ls"), batch.First(c("b")).As("fb"),
				batch.Max(c("f")).As("mf"), batch.CountDistinct(c("s")).As("ds"), batch.CountRows().PerBatch().As("br"), batch.Max(c("ts")).As("mts")).
			Select(
				batch.As(c("k"), "k"), batch.As(c("n"), "n"),
				batch.As(batch.Mul(c("av"), batch.Lit(2.5)), "av2"),
				batch.As(batch.Add(c("sv"), batch.Cast(c("n"), arrow.PrimitiveTypes.Int64)), "svn"),
				batch.As(batch.Concat(batch.Upper(batch.Coalesce(c("k"), batch.Lit("none"))), batch.Lit("/"), batch.Coalesce(c("ls"), batch.Lit("-"))), "label"),
				batch.As(batch.Substr(c("ls"), 1, 3), "head"),
				batch.As(batch.Length(c("ls")), "len"),
				batch.As(batch.If(c("fb"), c("sv"), batch.Neg(c("sv"))), "signed"),
				batch.As(batch.IsNull(c("mf")), "nomf"),
				batch.As(batch.Coalesce(c("mf"), batch.Lit(-1.0)), "mf"),
				batch.As(batch.Cast(c("av"), arrow.BinaryTypes.String), "avs"),
				batch.As(c("ds"), "ds"), batch.As(c("br"), "br"),
				batch.As(batch.Hour(c("mts")), "hour"),
				batch.As(batch.Contains(c("ls"), "a"), "hasa"),
			).
			Where(batch.Or(batch.Gt(c("br"), batch.Lit(int64(1))), batch.Or(batch.IsNull(c("n")), batch.Eq(c("hasa"), batch.Lit(true)))))
	}
	partsCompare(t, stream, [][][][]revRow{partsScript(48, 7)}, wholeCfg{mode: Update, ops: []string{"g"}, parts: 8}, "g", true)
}

// partsSinkRun runs stream over script, one batch a run (a restart
// between batches), on one path, into sinks.
func partsSinkRun(t *testing.T, stream func(Source) *Stream, script [][][]revRow, parts int, partitioned bool, mem memory.Allocator, sinks ...Sink) error {
	t.Helper()
	cp := localStore(t)
	for i := range len(script) + 1 {
		trig := Once()
		if i == len(script) {
			trig = AvailableNow()
		}
		opts := []Option{WithCheckpoint(cp), WithTrigger(trig), WithOutputMode(Update), WithStatePartitions(parts)}
		for _, s := range sinks {
			opts = append(opts, WithSink(s))
		}
		if mem != nil {
			opts = append(opts, WithAllocator(mem))
		}
		q, err := NewQuery(stream(&revScript{batches: script}), opts...)
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.partitionedAgg = partitioned
		q.cfg.combine = combineKnobs{mode: combineOff}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = q.Run(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// partsLake reads a file sink's table: each live file's name, row count
// and rows, in file order.
func partsLake(t *testing.T, table storage.Store) []string {
	t.Helper()
	var out []string
	last := ""
	err := filesink.ReadRows(context.Background(), table, func(f filesink.File, _ []string, row []any) error {
		if f.Path != last {
			out = append(out, fmt.Sprintf("file %s rows %d", f.Path, f.Rows))
			last = f.Path
		}
		out = append(out, fmt.Sprint(row))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// partsOffsets is a foreachBatch function that keeps each batch's rows and
// counts the records whose columns start at a non-zero offset.
type partsOffsets struct {
	mu     sync.Mutex
	rows   []string
	sliced int
}

func (p *partsOffsets) fn(_ context.Context, id int64, _ *arrow.Schema, recs []arrow.RecordBatch) error {
	rows, err := memsink.Rows(recs)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range recs {
		if r.NumCols() > 0 && r.Column(0).Data().Offset() > 0 {
			p.sliced++
		}
	}
	for _, r := range rows {
		p.rows = append(p.rows, fmt.Sprint(id, r))
	}
	return nil
}

// partsSinkStream is a group-by whose output columns every sink encodes.
func partsSinkStream(src Source) *Stream {
	c := batch.Col
	return ReadStream(src).GroupBy("k", "n").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Avg(c("v")).As("av"), batch.Count(c("s")).As("cs"),
		batch.Last(c("s")).As("ls"), batch.First(c("b")).As("fb"), batch.Max(c("ts")).As("mts"), batch.CountRows().PerBatch().As("br"))
}

// TestReviewPartsReachSinks: the split output, slices at non-zero
// offsets, written by a Parquet file sink, a foreachBatch function and a
// Kafka sink (kfake), reads back as the partitioned path's: the same
// files holding the same rows, the same rows per batch, the same Kafka
// records (key and JSON value) in the same order.
func TestReviewPartsReachSinks(t *testing.T) {
	script := partsScript(77, 7)
	const parts = 8
	k := testenv.Kafka(t, map[string]int32{"whole": 3, "partitioned": 3})
	type result struct {
		lake, each, kafka []string
		sliced            int
	}
	run := func(partitioned bool) result {
		root := localStore(t)
		lake, err := filesink.New(storage.Sub(root, "lake"))
		if err != nil {
			t.Fatal(err)
		}
		each := &partsOffsets{}
		topic := "whole"
		if partitioned {
			topic = "partitioned"
		}
		ks, err := kafkasink.New(kafkasink.WithBrokers(k.Addrs()...), kafkasink.WithTopic(topic), kafkasink.WithKeyColumn("k"), kafkasink.WithName("parts-"+topic))
		if err != nil {
			t.Fatal(err)
		}
		defer ks.Close()
		if err := partsSinkRun(t, partsSinkStream, script, parts, partitioned, nil, lake, foreachbatch.New(each.fn, foreachbatch.WithIdempotent()), ks); err != nil {
			t.Fatal(err)
		}
		// A null key (a null k) has no partition of its own: the
		// producer picks one, so those records are compared as a set.
		var kafka, unkeyed []string
		for _, r := range testenv.KafkaReadCommitted(t, k, topic, 0) {
			if r.Key == nil {
				unkeyed = append(unkeyed, fmt.Sprintf("no key value %s", r.Value))
				continue
			}
			kafka = append(kafka, fmt.Sprintf("partition %d key %q value %s", r.Partition, r.Key, r.Value))
		}
		slices.Sort(unkeyed)
		kafka = append(kafka, unkeyed...)
		return result{lake: partsLake(t, storage.Sub(root, "lake")), each: each.rows, kafka: kafka, sliced: each.sliced}
	}
	want, got := run(true), run(false)
	if got.sliced == 0 {
		t.Fatal("the one working table handed the sinks no record at a non-zero offset: the test does not reach the split output")
	}
	if len(want.lake) == 0 || len(want.kafka) == 0 || len(want.each) == 0 {
		t.Fatalf("the oracle wrote %d lake lines, %d Kafka records and %d rows", len(want.lake), len(want.kafka), len(want.each))
	}
	for _, cmp := range []struct {
		what      string
		got, want []string
	}{{"Parquet table", got.lake, want.lake}, {"foreachBatch rows", got.each, want.each}, {"Kafka records", got.kafka, want.kafka}} {
		if !slices.Equal(cmp.got, cmp.want) {
			t.Errorf("%s differ from the partitioned path's:\n%s", cmp.what, firstDiff(cmp.got, cmp.want))
		}
	}
}

// TestReviewPartsFileSinkRolls: a file sink that rolls files at a small
// target size cuts a batch's output into files by its rows' size
// (filesink chunkRows): the split output must roll into the same files as
// the partitioned path's output, which the file sink's log records and
// readers see. A piece is a slice of buffers that hold every partition's
// rows (and, in a whole-state commit, every group's keys and sums), so a
// size read from its buffers is the whole's.
func TestReviewPartsFileSinkRolls(t *testing.T) {
	var script [][][]revRow
	for b := range 3 {
		var rows []revRow
		for key := range 3000 + b*500 {
			r := revRow{k: fmt.Sprintf("merchant-%05d", key), n: int32(key % 7), sec: int64(b), v: int64(key*b + 1), s: "s", b: key%2 == 0}
			if key%1000 == 3 {
				// A few nulls: some pieces' columns hold one, the others
				// share their bitmap.
				r.nulls = revNullN | revNullS
			}
			rows = append(rows, r)
		}
		script = append(script, [][]revRow{rows[:1000], rows[1000:]})
	}
	run := func(partitioned bool) []string {
		root := localStore(t)
		lake, err := filesink.New(storage.Sub(root, "lake"), filesink.WithTargetFileSize(16<<10), filesink.WithCompression(filesink.Uncompressed))
		if err != nil {
			t.Fatal(err)
		}
		if err := partsSinkRun(t, partsSinkStream, script, 8, partitioned, nil, lake); err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, l := range partsLake(t, storage.Sub(root, "lake")) {
			if strings.HasPrefix(l, "file ") {
				files = append(files, l)
			}
		}
		return files
	}
	want, got := run(true), run(false)
	if len(want) <= 3*8 {
		t.Fatalf("the oracle wrote %d files: the target size rolls none", len(want))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the one working table rolls its output into other files than the partitioned path (%d files, want %d):\n%s", len(got), len(want), firstDiff(got, want))
	}
}

// partsFailSink is a foreachBatch function that fails batch failAt once.
type partsFailSink struct {
	failAt int64
	failed bool
}

func (p *partsFailSink) fn(_ context.Context, id int64, _ *arrow.Schema, _ []arrow.RecordBatch) error {
	if id == p.failAt && !p.failed {
		p.failed = true
		return errors.New("injected: sink down")
	}
	return nil
}

// TestReviewPartsNoLeak: the split commit releases every buffer it takes
// from the query's allocator: on success (both paths in turn), when a
// partition's commit fails after the others committed (a whole-state
// version and a delta), when the sink fails after the pieces were built,
// and when a batch's rows take a sum past int64 and back (the table is
// rebuilt from the committed state, mergeNet, and then commits split).
func TestReviewPartsNoLeak(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).GroupBy("k", "n").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Avg(c("v")).As("av"),
			batch.CountDistinct(c("s")).As("ds"), batch.Last(c("s")).As("ls"), batch.CountRows().PerBatch().As("br"))
	}
	scripts := [][][][]revRow{partsScript(5, 7)}
	oracle := wholeRun(t, stream, scripts, wholeCfg{mode: Update, ops: []string{"g"}, parts: 8}, wholeOracle)
	var wholeV, deltaV int
	for v, line := range oracle.progress {
		if w, d := partsCommits([]string{line}, "g"); w > 0 && wholeV == 0 && v > 0 {
			wholeV = v
		} else if d > 0 && deltaV == 0 {
			deltaV = v
		}
	}
	if wholeV == 0 || deltaV == 0 {
		t.Fatalf("no whole-state (%d) or delta (%d) version:\n%s", wholeV, deltaV, strings.Join(oracle.progress, "\n"))
	}
	for _, paths := range wholeVaries[:2] {
		t.Run(paths.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			wholeRun(t, stream, scripts, wholeCfg{mode: Update, ops: []string{"g"}, mem: mem, parts: 8}, paths)
			mem.AssertSize(t, 0)
		})
	}
	for _, v := range []int{wholeV, deltaV} {
		t.Run(fmt.Sprint("commit of version ", v, " fails in one partition"), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			failAt := fmt.Sprintf("state/g/deltas/%020d.delta", v) // the bundle of every partition
			res := wholeRun(t, stream, scripts, wholeCfg{mode: Update, ops: []string{"g"}, mem: mem, keepGoing: true, parts: 8,
				store: func(s storage.Store) storage.Store {
					return &wholeFailStore{Store: s, fail: map[string]bool{failAt: true}}
				}}, wholeVaries[0])
			if len(res.errs) != 1 || !strings.Contains(res.errs[0], "injected") {
				t.Errorf("errors %v, want the injected one", res.errs)
			}
			mem.AssertSize(t, 0)
			for _, cmp := range []struct {
				what      string
				got, want []string
			}{{"output", res.out, oracle.out}, {"state", res.state, oracle.state}} {
				if !slices.Equal(cmp.got, cmp.want) {
					t.Errorf("%s differs from a run without the failure:\n%s", cmp.what, firstDiff(cmp.got, cmp.want))
				}
			}
		})
	}
	t.Run("sink fails", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		fail := &partsFailSink{failAt: int64(wholeV)}
		err := partsSinkRun(t, func(s Source) *Stream { return stream([]Source{s}) }, scripts[0], 8, false, mem, foreachbatch.New(fail.fn, foreachbatch.WithIdempotent()))
		if err == nil || !strings.Contains(err.Error(), "injected") {
			t.Errorf("run: %v, want the injected failure", err)
		}
		mem.AssertSize(t, 0)
	})
	t.Run("sum past int64 and back", func(t *testing.T) {
		// Batch 1 takes m past int64 and back, and changes two groups of
		// three: the rebuilt table commits the whole state, split.
		script := [][]payRow{
			{{id: "a", merchant: "m", sec: 1, amount: 100}, {id: "b", merchant: "n", sec: 1, amount: 1}, {id: "c", merchant: "o", sec: 1, amount: 2}},
			{{id: "d", merchant: "m", sec: 2, amount: math.MaxInt64 - 50}, {id: "e", merchant: "m", sec: 2, amount: -100}, {id: "f", merchant: "m", sec: 2, amount: 0}, {id: "g", merchant: "n", sec: 2, amount: 5}},
			{{id: "h", merchant: "m", sec: 3, amount: 1}},
		}
		stream := func(src Source) *Stream {
			return ReadStream(src).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.Count(batch.Col("id")).As("payments"))
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		sink := memsink.New("out")
		cp := localStore(t)
		for i := range len(script) {
			q, err := NewQuery(stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(sink), WithTrigger(Once()), WithStatePartitions(3), WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Run(context.Background()); err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
		}
		mem.AssertSize(t, 0)
		var got []string
		for _, id := range sink.BatchIDs() {
			var rows []string
			for _, r := range sink.Batch(id) {
				rows = append(rows, fmt.Sprint(id, r))
			}
			slices.Sort(rows)
			got = append(got, rows...)
		}
		want := []string{"0 [m 100 1]", "0 [n 1 1]", "0 [o 2 1]",
			fmt.Sprintf("1 [m %d 4]", int64(math.MaxInt64-50)), "1 [n 6 2]",
			fmt.Sprintf("2 [m %d 5]", int64(math.MaxInt64-49))}
		if !slices.Equal(got, want) {
			t.Errorf("output\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestReviewPartsHalfCommitted: a version some partitions committed and
// one did not (its file failed after the others were durable), a
// whole-state version or a delta, re-run after a restart on either path,
// at 8 partitions with per-batch aggregates and distinct counts: output
// and every state version are those of a run without the failure.
func TestReviewPartsHalfCommitted(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Sum(c("v")).As("sv"), batch.Avg(c("v")).As("av"),
			batch.CountDistinct(c("n")).As("dn"), batch.CountRows().PerBatch().As("br"))
	}
	scripts := [][][][]revRow{partsScript(9, 5)}
	base := wholeCfg{mode: Update, ops: []string{"g"}, keepGoing: true, runs: 7, parts: 8}
	want := wholeRun(t, stream, scripts, base, wholeOracle)
	var fails []string
	for v, line := range want.progress {
		w, d := partsCommits([]string{line}, "g")
		if (w > 0 && v > 0 && len(fails) == 0) || (d > 0 && len(fails) == 1) {
			fails = append(fails, fmt.Sprintf("state/g/deltas/%020d.delta", v))
		}
	}
	if len(fails) != 2 {
		t.Fatalf("no whole-state version after 0 followed by a delta:\n%s", strings.Join(want.progress, "\n"))
	}
	for _, failAt := range fails {
		for _, paths := range wholeVaries {
			cfg := base
			cfg.store = func(s storage.Store) storage.Store {
				return &wholeFailStore{Store: s, fail: map[string]bool{failAt: true}}
			}
			got := wholeRun(t, stream, scripts, cfg, paths)
			if len(got.errs) != 1 || !strings.Contains(got.errs[0], "injected") {
				t.Errorf("%s, failing %s: errors %v, want the injected one once", paths.name, failAt, got.errs)
			}
			for _, cmp := range []struct {
				what     string
				got, exp []string
			}{{"output", got.out, want.out}, {"state", got.state, want.state}} {
				if !slices.Equal(cmp.got, cmp.exp) {
					t.Errorf("%s, failing %s: %s differs from a run without the failure:\n%s", paths.name, failAt, cmp.what, firstDiff(cmp.got, cmp.exp))
				}
			}
		}
	}
}
