package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// Review of the partial aggregation (combine.go): adversarial inputs,
// aggregates at the edge of Combinable, and operators around the
// aggregation, each run with the combiner off and in every mode, compared
// batch for batch (output rows in order, progress, every state version).

// revRow is one input row; nulls has a bit per nullable column.
type revRow struct {
	k     string
	n     int32
	sec   int64
	v     int64
	s     string
	b     bool
	f     float64
	u     uint32
	nulls uint8
}

const (
	revNullK = 1 << iota
	revNullN
	revNullV
	revNullS
	revNullB
	revNullF
)

var revSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "u", Type: arrow.PrimitiveTypes.Uint32},
}, nil)

// revScript is a source of batches, each read as the given records (an
// empty record included).
type revScript struct {
	name    string
	batches [][][]revRow
}

func (s *revScript) Schema() *arrow.Schema { return revSchema }
func (s *revScript) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *revScript) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *revScript) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	for _, bt := range s.batches[a:b] {
		for _, rows := range bt {
			rec := revRecord(rows)
			err := emit(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *revScript) String() string { return "review script " + s.name }

func revRecord(rows []revRow) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	bld := array.NewRecordBuilder(mem, revSchema)
	defer bld.Release()
	kb := bld.Field(0).(*array.StringBuilder)
	nb := bld.Field(1).(*array.Int32Builder)
	tb := bld.Field(2).(*array.TimestampBuilder)
	vb := bld.Field(3).(*array.Int64Builder)
	sb := bld.Field(4).(*array.StringBuilder)
	bb := bld.Field(5).(*array.BooleanBuilder)
	fb := bld.Field(6).(*array.Float64Builder)
	ub := bld.Field(7).(*array.Uint32Builder)
	for _, r := range rows {
		if r.nulls&revNullK != 0 {
			kb.AppendNull()
		} else {
			kb.Append(r.k)
		}
		if r.nulls&revNullN != 0 {
			nb.AppendNull()
		} else {
			nb.Append(r.n)
		}
		tb.Append(arrow.Timestamp(r.sec * 1000))
		if r.nulls&revNullV != 0 {
			vb.AppendNull()
		} else {
			vb.Append(r.v)
		}
		if r.nulls&revNullS != 0 {
			sb.AppendNull()
		} else {
			sb.Append(r.s)
		}
		if r.nulls&revNullB != 0 {
			bb.AppendNull()
		} else {
			bb.Append(r.b)
		}
		if r.nulls&revNullF != 0 {
			fb.AppendNull()
		} else {
			fb.Append(r.f)
		}
		ub.Append(r.u)
	}
	return bld.NewRecordBatch()
}

// revGen makes a script whose batches take turns among shapes that stress
// the combiner: one key for every row, every row its own key, nulls in keys
// and values, records of one row, empty records, many small records, and a
// mix; event times drift forward with some rows far behind (late).
func revGen(seed uint64, batches int) [][][]revRow {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var script [][][]revRow
	next := 0
	strs := []string{"", "a", "b", "zz", "a-much-longer-string-than-inline", "é", "A"}
	row := func(b int, key string, n int32) revRow {
		base := int64(b * 7)
		sec := base + r.Int64N(12)
		if r.IntN(9) == 0 {
			sec = max(0, base-15-r.Int64N(20))
		}
		x := revRow{k: key, n: n, sec: sec, v: r.Int64N(2001) - 1000, s: strs[r.IntN(len(strs))],
			b: r.IntN(2) == 0, f: float64(r.IntN(7)) - 3, u: uint32(r.IntN(1000))}
		switch r.IntN(12) {
		case 0:
			x.f = math.NaN()
		case 1:
			x.f = math.Copysign(0, -1)
		}
		if r.IntN(5) == 0 {
			x.nulls |= revNullV
		}
		if r.IntN(5) == 0 {
			x.nulls |= revNullS
		}
		if r.IntN(4) == 0 {
			x.nulls |= revNullB
		}
		if r.IntN(6) == 0 {
			x.nulls |= revNullF
		}
		next++
		return x
	}
	for b := range batches {
		var rows []revRow
		nrows := 5 + r.IntN(40)
		shape := b % 6
		for range nrows {
			switch shape {
			case 0: // one key
				rows = append(rows, row(b, "one", 1))
			case 1: // every row distinct
				rows = append(rows, row(b, fmt.Sprintf("d%d", next), int32(next)))
			default: // a few keys, nulls among them
				x := row(b, fmt.Sprintf("m%d", r.IntN(4)), int32(r.IntN(3)))
				if r.IntN(6) == 0 {
					x.nulls |= revNullK
				}
				if r.IntN(6) == 0 {
					x.nulls |= revNullN
				}
				rows = append(rows, x)
			}
		}
		var recs [][]revRow
		switch shape {
		case 2: // records of one row, an empty one between
			for i, x := range rows {
				recs = append(recs, []revRow{x})
				if i == 1 {
					recs = append(recs, nil)
				}
			}
		case 3: // empty records around
			recs = [][]revRow{nil, rows, nil}
		default: // records of 1 to 7 rows
			for len(rows) > 0 {
				k := min(len(rows), 1+r.IntN(7))
				recs = append(recs, rows[:k])
				rows = rows[k:]
			}
		}
		script = append(script, recs)
	}
	return script
}

type revRun struct {
	out, progress, state []string
	combined             int64
}

// runReview runs stream over the scripts with the combiner's knobs: the
// first half of the batches one run each (restarted from the checkpoint
// between batches), then the rest in one run.
func runReview(t *testing.T, stream func([]Source) *Stream, scripts [][][][]revRow, mode OutputMode, knobs combineKnobs, ops []string) revRun {
	t.Helper()
	cp := localStore(t)
	sink := memsink.New("out")
	var res revRun
	listen := WithProgressListener(func(p Progress) {
		var b strings.Builder
		fmt.Fprintf(&b, "batch %d in %d", p.BatchID, p.NumInputRows)
		for _, s := range p.Sources {
			fmt.Fprintf(&b, " src %d", s.NumInputRows)
		}
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
			fmt.Fprintf(&b, "; %s total %d updated %d removed %d late %d parts %d", op.OperatorID, op.NumRowsTotal, op.NumRowsUpdated, op.NumRowsRemoved, op.NumRowsDroppedByWatermark, op.NumPartitions)
			var cm []string
			for k, v := range op.CustomMetrics {
				if k == "numRowsCombined" || k == "numPartialGroups" {
					continue
				}
				cm = append(cm, fmt.Sprint(k, "=", v))
			}
			sort.Strings(cm)
			fmt.Fprintf(&b, " %v", cm)
			if op.MemoryUsedBytes < 0 {
				t.Errorf("batch %d operator %s: memory %d", p.BatchID, op.OperatorID, op.MemoryUsedBytes)
			}
			res.combined += op.CustomMetrics["numRowsCombined"]
		}
		res.progress = append(res.progress, b.String())
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
	for i := 0; i <= nb/2; i++ {
		trig := Once()
		if i == nb/2 {
			trig = AvailableNow()
		}
		q, err := NewQuery(stream(mk()), WithCheckpoint(cp), WithSink(sink), WithTrigger(trig), WithOutputMode(mode),
			WithStatePartitions(3), WithSnapshotEvery(3), listen)
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = q.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%+v: %v", knobs, err)
		}
	}
	for _, id := range sink.BatchIDs() {
		for _, r := range sink.Batch(id) {
			res.out = append(res.out, fmt.Sprint(id, r))
		}
	}
	res.state = stateVersions(t, cp, stream(mk()), mode, ops, 3, int64(len(res.progress)))
	return res
}

// revAggs are aggregates that all combine exactly, over every type the
// script has.
func revAggs() []batch.Agg {
	c := batch.Col
	return []batch.Agg{
		batch.Sum(c("v")).As("sum_v"), batch.Count(c("v")).As("count_v"), batch.CountRows().As("rows"),
		batch.Avg(c("v")).As("avg_v"), batch.Min(c("v")).As("min_v"), batch.Max(c("v")).As("max_v"),
		batch.First(c("v")).As("first_v"), batch.Last(c("v")).As("last_v"),
		batch.Min(c("s")).As("min_s"), batch.Max(c("s")).As("max_s"), batch.First(c("s")).As("first_s"), batch.Last(c("s")).As("last_s"),
		batch.Count(c("s")).As("count_s"),
		batch.Min(c("b")).As("min_b"), batch.Max(c("b")).As("max_b"), batch.First(c("b")).As("first_b"), batch.Last(c("b")).As("last_b"),
		batch.Min(c("ts")).As("min_ts"), batch.Max(c("ts")).As("max_ts"),
		batch.Min(c("f")).As("min_f"), batch.Max(c("f")).As("max_f"), batch.First(c("f")).As("first_f"), batch.Last(c("f")).As("last_f"),
		batch.Sum(c("u")).As("sum_u"), batch.Avg(c("u")).As("avg_u"), batch.Min(c("u")).As("min_u"),
	}
}

var revVariants = []struct {
	name  string
	knobs combineKnobs
}{
	{"on", combineKnobs{mode: combineOn}},
	{"on, flushed every record", combineKnobs{mode: combineOn, maxGroups: 1}},
	{"adaptive, probe 3 rows, no skip", combineKnobs{mode: combineAdaptive, probeRows: 3}},
	{"adaptive, probe 8 rows, flushed every record", combineKnobs{mode: combineAdaptive, probeRows: 8, maxGroups: 1}},
	// The default outside these tests (whole.go): one working table, no
	// combiner. Its output (in order), its state, partition by partition,
	// and its progress are the partitioned path's.
	{"one working table", combineKnobs{whole: true}},
}

type revCase struct {
	name    string
	stream  func([]Source) *Stream
	mode    OutputMode
	ops     []string
	sources int
	// noCombine: the combiner must take no row (an aggregate that does
	// not combine exactly, or an operator without the path).
	noCombine bool
}

func revCompare(t *testing.T, tc revCase, batches int) {
	t.Helper()
	var scripts [][][][]revRow
	for i := range max(1, tc.sources) {
		scripts = append(scripts, revGen(uint64(len(tc.name)*31+i), batches))
	}
	want := runReview(t, tc.stream, scripts, tc.mode, combineKnobs{mode: combineOff}, tc.ops)
	if want.combined != 0 {
		t.Fatalf("combiner off: %d rows combined", want.combined)
	}
	if len(want.out) == 0 {
		t.Fatal("no output")
	}
	for _, v := range revVariants {
		got := runReview(t, tc.stream, scripts, tc.mode, v.knobs, tc.ops)
		if tc.noCombine && got.combined != 0 {
			t.Errorf("%s: %d rows combined where the aggregation must not combine", v.name, got.combined)
		}
		if !tc.noCombine && v.knobs.mode == combineOn && got.combined == 0 {
			t.Errorf("%s: no row combined", v.name)
		}
		for _, cmp := range []struct {
			what     string
			got, exp []string
		}{{"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
			if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
				t.Errorf("%s: %s differs from the row-by-row path:\n%s", v.name, cmp.what, firstDiff(cmp.got, cmp.exp))
				break
			}
		}
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("line %d (of %d, want %d)\n got: %s\nwant: %s", i, len(got), len(want), g, w)
		}
	}
	return "same"
}

// TestReviewCombAdversarialEquivalence: group-bys over nullable string and
// int keys with every combinable aggregate over every type (nulls, NaN, -0,
// long strings), windows, the watermark column among the keys, a float sum
// (which must not combine), deduplication before and a union of sources:
// every combiner mode gives the row-by-row path's output, progress and
// state, batch for batch.
func TestReviewCombAdversarialEquivalence(t *testing.T) {
	cases := []revCase{
		{name: "group by two nullable keys/update", mode: Update, ops: []string{"g"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k", "n").ID("g").Agg(revAggs()...)
		}},
		{name: "group by two nullable keys/complete", mode: Complete, ops: []string{"g"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("n", "k").ID("g").Agg(revAggs()...)
		}},
		{name: "group by int key, union of two sources/update", mode: Update, ops: []string{"g"}, sources: 2, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("n").ID("g").Agg(revAggs()...)
		}},
		{name: "float sum among combinable aggregates/update", mode: Update, ops: []string{"g"}, noCombine: true, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(append(revAggs(), batch.Sum(batch.Col("f")).As("sum_f"))...)
		}},
		{name: "float avg alone/update", mode: Update, ops: []string{"g"}, noCombine: true, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Avg(batch.Col("f")).As("avg_f"))
		}},
		{name: "count distinct among combinable/update", mode: Update, ops: []string{"g"}, noCombine: true, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Sum(batch.Col("v")).As("sum_v"), batch.CountDistinct(batch.Col("s")).As("ds"))
		}},
		{name: "per-batch aggregate among combinable/update", mode: Update, ops: []string{"g"}, noCombine: true, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Sum(batch.Col("v")).As("sum_v"), batch.CountRows().PerBatch().As("batch_rows"))
		}},
		{name: "expressions in aggregates/update", mode: Update, ops: []string{"g"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k").ID("g").Agg(batch.Sum(batch.Mul(batch.Col("v"), batch.Lit(int64(3)))).As("triple"), batch.Max(batch.Col("u")).As("max_u"))
		}},
		{name: "watermark column among the keys/update", mode: Update, ops: []string{"g"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupBy("ts", "k").ID("g").Agg(revAggs()...)
		}},
		{name: "watermark column among the keys/append", mode: Append, ops: []string{"g"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupBy("k", "ts").ID("g").Agg(revAggs()...)
		}},
		{name: "tumbling window, nullable keys/append", mode: Append, ops: []string{"w"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupByWindow(TumblingWindow("ts", 10*time.Second), "k", "n").ID("w").Agg(revAggs()...)
		}},
		{name: "tumbling window, union/update", mode: Update, ops: []string{"w"}, sources: 2, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 3*time.Second).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("w").Agg(revAggs()...)
		}},
		{name: "dedup then group by/update", mode: Update, ops: []string{"d", "g"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).DropDuplicates("k", "s").ID("d").GroupBy("n").ID("g").Agg(revAggs()...)
		}},
		{name: "sliding window (a row per window)/update", mode: Update, ops: []string{"w"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupByWindow(SlidingWindow("ts", 15*time.Second, 5*time.Second), "k").ID("w").Agg(revAggs()...)
		}},
		{name: "sliding window (panes where they combine)/append", mode: Append, ops: []string{"w"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupByWindow(SlidingWindow("ts", 15*time.Second, 5*time.Second), "n").ID("w").Agg(revAggs()...)
		}},
		{name: "session window/append", mode: Append, ops: []string{"w"}, noCombine: true, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupByWindow(SessionWindow("ts", 4*time.Second), "k").ID("w").Agg(batch.Sum(batch.Col("v")).As("sv"), batch.CountRows().As("c"))
		}},
		{name: "join then group by/update", mode: Update, ops: []string{"g"}, sources: 2, stream: func(s []Source) *Stream {
			right := ReadStream(s[1]).Select(batch.As(batch.Col("k"), "rk"), batch.As(batch.Col("s"), "rs"), batch.As(batch.Col("v"), "rv"))
			return ReadStream(s[0]).Join(right, Inner, On("k", "rk")).ID("j").
				GroupBy("n", "rs").ID("g").Agg(batch.Sum(batch.Col("rv")).As("srv"), batch.Count(batch.Col("v")).As("cv"), batch.Max(batch.Col("s")).As("ms"), batch.First(batch.Col("rk")).As("fk"))
		}},
		{name: "window then window (chain)/append", mode: Append, ops: []string{"w", "w2"}, stream: func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).
				GroupByWindow(TumblingWindow("ts", 10*time.Second), "k", "n").ID("w").
				Agg(batch.Sum(batch.Col("v")).As("sv"), batch.CountRows().As("c"), batch.Max(batch.Col("s")).As("ms"), batch.Last(batch.Col("b")).As("lb")).
				Select(batch.As(batch.Col("window_start"), "slot"), batch.As(batch.Col("window_end"), "slot_end"), batch.As(batch.Col("n"), "n"), batch.As(batch.Col("k"), "k"),
					batch.As(batch.Col("sv"), "sv"), batch.As(batch.Col("c"), "c"), batch.As(batch.Col("ms"), "ms"), batch.As(batch.Col("lb"), "lb")).
				GroupByWindow(TumblingWindow("slot", 20*time.Second), "n").ID("w2").
				Agg(batch.Sum(batch.Col("sv")).As("total"), batch.Sum(batch.Col("c")).As("rows"), batch.Min(batch.Col("ms")).As("lo"),
					batch.Last(batch.Col("k")).As("lastk"), batch.First(batch.Col("lb")).As("firstb"), batch.Count(batch.Col("k")).As("keys"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			revCompare(t, tc, 10)
		})
	}
}

// TestReviewCombOverflowOutcomeIsAFunctionOfTheInput: a batch whose rows
// take a group's sum past int64 and back (100, then MaxInt64-50, -100) fails row
// by row and succeeds through the combiner (documented). Which of the two
// happens must be a function of the batch and its entry, not of the
// process's history: here batch 0 makes the adaptive combiner give up, and
// batch 1, run by the same process and again from its write-ahead entry by
// a restarted one (a fresh combiner), must end the same way both times.
// (Found failing: the combiner stayed off for 7 batches after a give-up,
// a counter a restart loses.)
func TestReviewCombOverflowOutcomeIsAFunctionOfTheInput(t *testing.T) {
	var distinct []payRow
	for i := range 8 {
		distinct = append(distinct, payRow{id: fmt.Sprint("d", i), merchant: fmt.Sprint("u", i), sec: 1, amount: 1})
	}
	distinct = append(distinct, payRow{id: "m0", merchant: "m", sec: 1, amount: 100})
	script := [][]payRow{
		distinct, // the adaptive combiner gives up here
		{{id: "a", merchant: "m", sec: 2, amount: math.MaxInt64 - 50}, {id: "b", merchant: "m", sec: 2, amount: -100}},
	}
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	knobs := combineKnobs{mode: combineAdaptive, probeRows: 4}
	cp := localStore(t)
	sink := memsink.New("out")
	var errs []error
	for range 2 {
		q, err := NewQuery(stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
		errs = append(errs, q.Run(context.Background()))
	}
	t.Logf("first run: %v; after a restart: %v; output %v", errs[0], errs[1], sink.All())
	if (errs[0] == nil) != (errs[1] == nil) {
		t.Fatalf("batch 1 run twice from the same entry: first %v, after a restart %v (output %v)", errs[0], errs[1], sink.All())
	}
}

// TestReviewCombNoLeak: every combiner mode (flushes, give-ups inside a
// record, the overflow fallback, a batch that fails) releases every
// buffer it takes from the query's allocator.
func TestReviewCombNoLeak(t *testing.T) {
	streams := map[string]func(Source) *Stream{
		"group by": func(s Source) *Stream { return ReadStream(s).GroupBy("k", "n").ID("g").Agg(revAggs()...) },
		"window": func(s Source) *Stream {
			return ReadStream(s).WithWatermark("ts", 5*time.Second).GroupByWindow(TumblingWindow("ts", 10*time.Second), "k").ID("w").Agg(revAggs()...)
		},
	}
	script := revGen(77, 10)
	for name, stream := range streams {
		for _, v := range revVariants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				q, err := NewQuery(stream(&revScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(memsink.New("out")),
					WithTrigger(AvailableNow()), WithOutputMode(Update), WithStatePartitions(3), WithAllocator(mem))
				if err != nil {
					t.Fatal(err)
				}
				q.cfg.combine, q.cfg.partitionedAgg = v.knobs, !v.knobs.whole
				if err := q.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				mem.AssertSize(t, 0)
			})
		}
	}
	// The overflow fallback, then a batch that fails (its sum overflows
	// both ways), with rows held and partial states pending.
	overflow := [][]payRow{
		{{id: "a", merchant: "m", sec: 1, amount: -9e18}, {id: "a2", merchant: "n", sec: 1, amount: 1}},
		{{id: "b", merchant: "m", sec: 2, amount: 5e18}, {id: "c", merchant: "m", sec: 3, amount: 5e18}, {id: "d", merchant: "n", sec: 3, amount: 1}},
		{{id: "e", merchant: "n", sec: 4, amount: 3}, {id: "f", merchant: "m", sec: 4, amount: math.MaxInt64 - 5e17}, {id: "g", merchant: "o", sec: 4, amount: 3}},
	}
	for _, v := range revVariants {
		t.Run("overflow/"+v.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			src := &splitScript{payScript: &payScript{batches: overflow}, parts: 3}
			q, err := NewQuery(ReadStream(src).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.Max(batch.Col("id")).As("id")),
				WithCheckpoint(localStore(t)), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithStatePartitions(2), WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			q.cfg.combine, q.cfg.partitionedAgg = v.knobs, !v.knobs.whole
			if err := q.Run(context.Background()); !errors.Is(err, batch.ErrSumOverflow) {
				t.Fatalf("want the last batch's overflow, got %v", err)
			}
			mem.AssertSize(t, 0)
		})
	}
}

// TestReviewCombAdaptiveDefaults: with the default knobs, a batch of 70000
// distinct keys in one record gives up inside the record after 65536 rows
// (hashed only, those and the rest reach the partitions as rows), and
// the next batches, deciding from their own rows alone, combine; the
// output and progress are those of the combiner off.
func TestReviewCombAdaptiveDefaults(t *testing.T) {
	var script [][]payRow
	var big []payRow
	for i := range 70000 {
		big = append(big, payRow{id: fmt.Sprint("b", i), merchant: fmt.Sprint("u", i), sec: 1, amount: int64(i % 100)})
	}
	script = append(script, big)
	for b := 1; b <= 10; b++ {
		var rows []payRow
		for i := range 20 {
			rows = append(rows, payRow{id: fmt.Sprint("s", b, "-", i), merchant: fmt.Sprint("m", (i*7+b)%3), sec: int64(b), amount: int64(i - 10)})
		}
		script = append(script, rows)
	}
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Max(batch.Col("id")).As("id"))
	}
	run := func(knobs combineKnobs) (out []string, progress []string, combined []int64) {
		sink := memsink.New("out")
		q, err := NewQuery(stream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3),
			WithProgressListener(func(p Progress) {
				for _, op := range p.StateOperators {
					progress = append(progress, fmt.Sprint(p.BatchID, p.NumInputRows, op.NumRowsTotal, op.NumRowsUpdated))
					combined = append(combined, op.CustomMetrics["numRowsCombined"])
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
		if err := q.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, id := range sink.BatchIDs() {
			out = append(out, fmt.Sprint(id, sink.Batch(id)))
		}
		return out, progress, combined
	}
	wantOut, wantProg, _ := run(combineKnobs{mode: combineOff})
	gotOut, gotProg, combined := run(combineKnobs{})
	if strings.Join(gotOut, "\n") != strings.Join(wantOut, "\n") {
		t.Errorf("output differs from the combiner off:\n%s", firstDiff(gotOut, wantOut))
	}
	if strings.Join(gotProg, "\n") != strings.Join(wantProg, "\n") {
		t.Errorf("progress differs from the combiner off:\n%s", firstDiff(gotProg, wantProg))
	}
	want := []int64{0, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20}
	if fmt.Sprint(combined) != fmt.Sprint(want) {
		t.Errorf("rows combined per batch %v, want %v (batch 0's first 65536 rows, only hashed, decide it: row by row; every later batch decides afresh from its own rows)", combined, want)
	}
}

// TestReviewCombOverflowFallbackEveryMode: batches whose rows of one group
// sum past int64 inside the combiner (but not from the group's running
// sum, row by row), read as several records, in every combiner mode
// (flushes between records, give-ups inside a record): the output, the
// progress and the state are the row-by-row path's.
func TestReviewCombOverflowFallbackEveryMode(t *testing.T) {
	script := [][]payRow{
		{{id: "a", merchant: "m", sec: 1, amount: -9e18}, {id: "a2", merchant: "n", sec: 1, amount: 9e18}},
		{{id: "b", merchant: "m", sec: 2, amount: 5e18}, {id: "x", merchant: "o", sec: 2, amount: 1}, {id: "c", merchant: "m", sec: 3, amount: 5e18},
			{id: "d", merchant: "n", sec: 3, amount: -5e18}, {id: "y", merchant: "p", sec: 2, amount: 1}, {id: "e", merchant: "n", sec: 3, amount: -5e18}},
		{{id: "f", merchant: "m", sec: 4, amount: 3}, {id: "g", merchant: "n", sec: 4, amount: -3}, {id: "h", merchant: "m", sec: 4, amount: 3}},
		{{id: "i", merchant: "m", sec: 5, amount: 4e18}, {id: "j", merchant: "m", sec: 5, amount: 4e18}, {id: "k", merchant: "m", sec: 5, amount: -8e18}, {id: "l", merchant: "q", sec: 5, amount: 1}},
	}
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("merchant").ID("totals").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.Avg(batch.Col("amount")).As("avg"), batch.CountRows().As("n"), batch.Last(batch.Col("id")).As("last"))
	}
	want := runCombine(t, stream, script, Update, combineKnobs{mode: combineOff}, []string{"totals"})
	for _, v := range revVariants {
		got := runCombine(t, stream, script, Update, v.knobs, []string{"totals"})
		for _, cmp := range []struct {
			what     string
			got, exp []string
		}{{"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
			if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
				t.Errorf("%s: %s differs from the row-by-row path:\n%s", v.name, cmp.what, firstDiff(cmp.got, cmp.exp))
				break
			}
		}
	}
}
