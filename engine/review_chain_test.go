package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// rowScript replays fixed batches of rows of any schema: offset k is "the
// first k script batches", one script batch per trigger. A row is one Go
// value per column (nil for null); timestamps are given in Unix ms.
type rowScript struct {
	schema  *arrow.Schema
	batches [][][]any
}

func (s *rowScript) Schema() *arrow.Schema { return s.schema }
func (s *rowScript) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *rowScript) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *rowScript) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, s.schema)
	defer rb.Release()
	for _, bt := range s.batches[a:b] {
		for _, row := range bt {
			for c, v := range row {
				f := rb.Field(c)
				if v == nil {
					f.AppendNull()
					continue
				}
				switch fb := f.(type) {
				case *array.TimestampBuilder:
					fb.Append(arrow.Timestamp(v.(int64)))
				case *array.Int64Builder:
					fb.Append(v.(int64))
				case *array.Uint64Builder:
					fb.Append(v.(uint64))
				case *array.Float64Builder:
					fb.Append(v.(float64))
				case *array.StringBuilder:
					fb.Append(v.(string))
				default:
					return fmt.Errorf("rowScript: column %d is %T", c, f)
				}
			}
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	return emit(rec)
}

var msTS = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}

// runScript runs stream to the end of its script, one batch per trigger,
// and returns the rows of every batch (in sink order) rendered with %v.
func runScript(t *testing.T, stream *Stream, opts ...Option) map[int64][]string {
	t.Helper()
	sink := memsink.New("out")
	opts = append([]Option{WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())}, opts...)
	if _, err := runQuery(t, stream, opts...); err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, id := range sink.BatchIDs() {
		for _, r := range sink.Batch(id) {
			out[id] = append(out[id], fmt.Sprint(r...))
		}
	}
	return out
}

// Regression: Top ranked a uint64 column through int64, so values of 2^63
// and more ranked below small ones; now unsigned values rank as unsigned.
func TestTopRanksLargeUnsigned(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: msTS}, {Name: "v", Type: arrow.PrimitiveTypes.Uint64}}, nil)
	src := &rowScript{schema: schema, batches: [][][]any{
		{{int64(1000), uint64(1)}, {int64(1000), uint64(1) << 63}, {int64(1000), uint64(7)}},
		{{int64(60000), uint64(1)}},
	}}
	got := runScript(t, ReadStream(src).WithWatermark("ts", 0).GroupBy("ts").ID("best").Top(1, "v", Desc))
	var rows []string
	for _, rs := range got {
		rows = append(rows, rs...)
	}
	// memsink renders a uint64 as the int64 of its bits.
	if want := fmt.Sprint(time.UnixMilli(1000).UTC(), " ", int64(math.MinInt64)); len(rows) != 1 || rows[0] != want {
		t.Fatalf("top 1 desc: %q, want [%q]", rows, want)
	}
}

// Regression: Top's ranking treated NaN as tied with every value, which is
// no ordering: with 3, NaN, 5 all three were kept as top 1. Now NaN ranks
// above every number (as in Spark), so it alone is the top 1 in Desc
// order, and 3 alone in Asc order.
func TestTopRanksNaN(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: msTS}, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for _, tc := range []struct {
		order Order
		want  float64
	}{{Desc, math.NaN()}, {Asc, 3}} {
		src := &rowScript{schema: schema, batches: [][][]any{
			{{int64(1000), 3.0}, {int64(1000), math.NaN()}, {int64(1000), 5.0}, {int64(1000), nil}},
			{{int64(60000), 1.0}},
		}}
		got := runScript(t, ReadStream(src).WithWatermark("ts", 0).GroupBy("ts").ID("best").Top(1, "v", tc.order))
		var rows []string
		for _, rs := range got {
			rows = append(rows, rs...)
		}
		if want := fmt.Sprint(time.UnixMilli(1000).UTC(), " ", tc.want); len(rows) != 1 || rows[0] != want {
			t.Fatalf("top 1 %s: %q, want [%q]", tc.order, rows, want)
		}
	}
}

// threeOpStreams are chains of three stateful operators.
var threeOpStreams = []struct {
	name   string
	stream func(Source) *Stream
	// orderDependent: the chain keeps "the first row" of rows that an
	// operator before it emits from several partitions, in partition
	// order, so which row is first depends on the partition count (not on
	// restarts: the count is fixed for a checkpoint).
	orderDependent bool
}{
	{"window, top 2, rollup per window", func(src Source) *Stream {
		return ReadStream(src).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(SlidingWindow("ts", 10*time.Second, 5*time.Second), "merchant").ID("counts").
			Agg(batch.CountRows().As("n"), batch.Sum(batch.Col("amount")).As("total")).
			GroupBy("window_start", "window_end").ID("top").Top(2, "total", Desc).
			GroupBy("window_start", "window_end").ID("rollup").
			Agg(batch.Sum(batch.Col("n")).As("n"), batch.CountRows().As("merchants"), batch.Max(batch.Col("total")).As("best"))
	}, false},
	{"dedup, window, group by window_end", func(src Source) *Stream {
		return ReadStream(src).
			WithWatermark("ts", 5*time.Second).
			DropDuplicatesWithinWatermark("id").ID("ids").
			GroupByWindow(TumblingWindow("ts", 10*time.Second), "merchant").ID("win").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.Avg(batch.Col("amount")).As("avg")).
			GroupBy("window_end").ID("ends").
			Agg(batch.Sum(batch.Col("total")).As("total"), batch.CountRows().As("merchants"), batch.Min(batch.Col("avg")).As("lo"))
	}, false},
	{"sessions, dedup within watermark, group by window_end", func(src Source) *Stream {
		return ReadStream(src).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(SessionWindow("ts", 4*time.Second), "merchant").ID("sessions").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")).
			DropDuplicatesWithinWatermark("window_start").ID("first-per-start").
			GroupBy("window_end").ID("ends").
			Agg(batch.Sum(batch.Col("total")).As("total"), batch.Sum(batch.Col("n")).As("n"), batch.CountRows().As("sessions"))
	}, true},
}

// TestThreeOperatorChainsRestartAndPartitions runs three-operator chains
// once with 4 partitions, restarted before every batch with a snapshot
// at every version, and once with 1 partition: every batch's rows (sorted)
// must agree, and the restarted run must equal the one run row for row.
func TestThreeOperatorChainsRestartAndPartitions(t *testing.T) {
	t.Parallel()
	for _, tc := range threeOpStreams {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 1; seed++ {
				script := randomPayments(seed, 5)
				raw := func(r []any) string { return fmt.Sprint(r...) }
				run := func(p int, restart bool) *memsink.Sink {
					sink := memsink.New("out")
					cp := localStore(t)
					if !restart {
						if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(sink),
							WithTrigger(AvailableNow()), WithStatePartitions(p)); err != nil {
							t.Fatal(err)
						}
						return sink
					}
					for i := 0; i < len(script)+3; i++ {
						if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(sink),
							WithTrigger(Once()), WithStatePartitions(p), WithSnapshotEvery(1)); err != nil {
							t.Fatal(err)
						}
					}
					return sink
				}
				one, four, restarted := run(1, false), run(4, false), run(4, true)
				a, b, c := sinkRows(one, raw), sinkRows(four, raw), sinkRows(restarted, raw)
				if len(b) == 0 {
					t.Fatalf("seed %d: no output", seed)
				}
				if fmt.Sprint(a) != fmt.Sprint(b) && !tc.orderDependent {
					t.Fatalf("seed %d: 1 partition\n %v\n4 partitions\n %v", seed, a, b)
				}
				if fmt.Sprint(b) != fmt.Sprint(c) {
					t.Fatalf("seed %d: one run\n %v\nrestarted every batch\n %v", seed, b, c)
				}
				for _, id := range four.BatchIDs() {
					if x, y := fmt.Sprint(four.Batch(id)), fmt.Sprint(restarted.Batch(id)); x != y {
						t.Fatalf("seed %d batch %d: one run %s, restarted %s", seed, id, x, y)
					}
				}
			}
		})
	}
}

// TestSlidingPanesJumpsAndNulls compares panes with rows per window (and
// panes restarted before every batch) when the watermark jumps over many
// window ends in one batch, batches are empty or watermark-only, times
// start at the epoch and amounts are null.
func TestSlidingPanesJumpsAndNulls(t *testing.T) {
	t.Parallel()
	schema := arrow.NewSchema([]arrow.Field{{Name: "merchant", Type: arrow.BinaryTypes.String}, {Name: "ts", Type: msTS},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	s := func(sec int64) any { return sec * 1000 }
	script := [][][]any{
		{{"a", s(0), int64(5)}, {"a", s(1), nil}, {"b", s(3), nil}, {"a", s(9), int64(-2)}, {"b", int64(1), int64(7)}},
		{{"a", s(13), nil}, {"b", s(11), int64(1)}},
		{},
		{{"a", s(70), int64(3)}, {"b", s(62), nil}, {"a", s(66), int64(4)}}, // the watermark jumps from 8 s to 65 s
		{{"a", s(64), int64(100)}, {"b", s(66), int64(2)}},                  // 64 s is late
		{},
		{{"b", s(200), int64(1)}},
	}
	stream := func(size, slide time.Duration) *Stream {
		return ReadStream(&rowScript{schema: schema, batches: script}).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(SlidingWindow("ts", size, slide), "merchant").ID("slide").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Count(batch.Col("amount")).As("amounts"),
				batch.Min(batch.Col("amount")).As("lo"), batch.Max(batch.Col("amount")).As("hi"), batch.Avg(batch.Col("amount")).As("avg"))
	}
	run := func(size, slide time.Duration, rows, restart bool) (map[int64][]string, string) {
		sink := memsink.New("out")
		cp := localStore(t)
		kind := ""
		runs := 1
		if restart {
			runs = len(script) + 3
		}
		for i := 0; i < runs; i++ {
			trig := AvailableNow()
			if restart {
				trig = Once()
			}
			q, err := NewQuery(stream(size, slide), WithCheckpoint(cp), WithSink(sink), WithTrigger(trig), WithOutputMode(Append),
				WithStatePartitions(2), WithSnapshotEvery(1), WithProgressListener(func(p Progress) { kind = p.StateOperators[0].OperatorName }))
			if err != nil {
				t.Fatal(err)
			}
			q.cfg.rowWindows = rows
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = q.Run(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		out := map[int64][]string{}
		for _, id := range sink.BatchIDs() {
			for _, r := range sink.Batch(id) {
				out[id] = append(out[id], fmt.Sprint(r...))
			}
			sort.Strings(out[id]) // partitions emit in partition order
		}
		return out, kind
	}
	for _, w := range []struct {
		size, slide time.Duration
		kind        string
	}{{12 * time.Second, 4 * time.Second, "slidingWindowPanes"}, {10 * time.Second, 4 * time.Second, "windowAggregate"}} {
		rows, _ := run(w.size, w.slide, true, false)
		panes, kind := run(w.size, w.slide, false, false)
		restarted := panes
		if kind == "slidingWindowPanes" {
			restarted, _ = run(w.size, w.slide, false, true)
		}
		if kind != w.kind {
			t.Errorf("%s/%s: operator %s, want %s", w.size, w.slide, kind, w.kind)
		}
		if len(rows) == 0 {
			t.Fatal("no output")
		}
		if fmt.Sprint(rows) != fmt.Sprint(panes) {
			t.Fatalf("%s/%s: rows per window\n %v\npanes\n %v", w.size, w.slide, rows, panes)
		}
		if fmt.Sprint(panes) != fmt.Sprint(restarted) {
			t.Fatalf("%s/%s: one run\n %v\nrestarted every batch\n %v", w.size, w.slide, panes, restarted)
		}
	}
}

// TestChainSinkFailureThenRestart fails the sink mid-run for chains under
// a checked allocator, restarts, and finds every buffer released and the
// output of a run without the failure.
func TestChainSinkFailureThenRestart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stream func(Source) *Stream
	}{
		{"window, top 2, rollup per window", threeOpStreams[0].stream},
		{"dedup, window, group by window_end", threeOpStreams[1].stream},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := randomPayments(11, 8)
			want := memsink.New("want")
			if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(want),
				WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
				t.Fatal(err)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			cp := localStore(t)
			got := &failingSink{Sink: memsink.New("got"), failAt: 4}
			_, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(got),
				WithTrigger(AvailableNow()), WithStatePartitions(2), WithAllocator(mem))
			if err == nil || !strings.Contains(err.Error(), "injected sink failure") {
				t.Fatalf("want the sink failure, got %v", err)
			}
			mem.AssertSize(t, 0)
			if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(got),
				WithTrigger(AvailableNow()), WithStatePartitions(2), WithAllocator(mem)); err != nil {
				t.Fatal(err)
			}
			mem.AssertSize(t, 0)
			for _, id := range want.BatchIDs() {
				if a, b := fmt.Sprint(want.Batch(id)), fmt.Sprint(got.Batch(id)); a != b {
					t.Fatalf("batch %d: want %s, got %s", id, a, b)
				}
			}
			if a, b := fmt.Sprint(want.BatchIDs()), fmt.Sprint(got.BatchIDs()); a != b {
				t.Fatalf("batches: want %s, got %s", a, b)
			}
		})
	}
}

// TestRestartRefusesChangedSettings changes what a state means without
// changing its schema (a window's size or slide, a session's gap, a top's
// n, column or order): each restart is refused. The same checkpoint with
// the settings taken out of offsets/N (as a build before they were
// recorded wrote it) restarts.
func TestRestartRefusesChangedSettings(t *testing.T) {
	t.Parallel()
	script := randomPayments(4, 3)
	src := func() *Stream { return ReadStream(&payScript{batches: script}).WithWatermark("ts", 5*time.Second) }
	win := func(w Window) *Stream {
		return src().GroupByWindow(w, "merchant").ID("w").Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	top := func(n int, by string, o Order) *Stream {
		return src().GroupByWindow(TumblingWindow("ts", 10*time.Second), "merchant").ID("w").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.Max(batch.Col("amount")).As("best")).
			GroupBy("window_start", "window_end").ID("top").Top(n, by, o)
	}
	run := func(cp storage.Store, s *Stream) error {
		q, err := NewQuery(s, WithCheckpoint(cp), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithOutputMode(Append))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return q.Run(ctx)
	}
	cases := []struct {
		name      string
		old, next *Stream
	}{
		{"tumbling size", win(TumblingWindow("ts", 10*time.Second)), win(TumblingWindow("ts", 20*time.Second))},
		{"sliding slide", win(SlidingWindow("ts", 12*time.Second, 4*time.Second)), win(SlidingWindow("ts", 12*time.Second, 6*time.Second))},
		{"session gap", win(SessionWindow("ts", 5*time.Second)), win(SessionWindow("ts", 8*time.Second))},
		{"top n", top(1, "total", Desc), top(2, "total", Desc)},
		{"top order", top(1, "total", Desc), top(1, "total", Asc)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := localStore(t)
			if err := run(cp, tc.old); err != nil {
				t.Fatal(err)
			}
			err := run(cp, tc.next)
			if !errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), "settings changed") {
				t.Fatalf("err %v, want a refusal naming the settings", err)
			}
			// Forget the settings, as a checkpoint of an older build.
			ctx := context.Background()
			for id := int64(0); ; id++ {
				b, err := cp.Get(ctx, checkpoint.OffsetsFile(id))
				if err != nil {
					break
				}
				lines := strings.SplitN(string(b), "\n", 2)
				var e OffsetsEntry
				if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
					t.Fatal(err)
				}
				for i := range e.Conf.Operators {
					e.Conf.Operators[i].Params = ""
				}
				enc, err := offsetlog.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				if err := cp.Put(ctx, checkpoint.OffsetsFile(id), enc); err != nil {
					t.Fatal(err)
				}
			}
			if err := run(cp, tc.old); err != nil {
				t.Fatalf("a checkpoint without settings: %v", err)
			}
		})
	}
}

// TestSlidingPanesAfterAWindow runs a sliding window over an upstream
// window's start (a slot that can belong to windows the watermark closed
// batches ago) by panes and by rows per window: the same output.
func TestSlidingPanesAfterAWindow(t *testing.T) {
	t.Parallel()
	stream := func(src Source) *Stream {
		return ReadStream(src).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(TumblingWindow("ts", 5*time.Second), "merchant").ID("per-5s").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")).
			Select(batch.As(batch.Col("window_start"), "slot"), batch.As(batch.Col("window_end"), "slot_end"),
				batch.As(batch.Col("merchant"), "merchant"), batch.As(batch.Col("total"), "total"), batch.As(batch.Col("n"), "n")).
			GroupByWindow(SlidingWindow("slot", 20*time.Second, 5*time.Second), "merchant").ID("slide").
			Agg(batch.Sum(batch.Col("total")).As("total"), batch.Max(batch.Col("n")).As("most"), batch.Avg(batch.Col("total")).As("avg"))
	}
	for seed := uint64(1); seed <= 1; seed++ {
		script := randomPayments(seed, 12)
		run := func(rows bool) (map[int64][]string, string) {
			sink := memsink.New("out")
			kind := ""
			q, err := NewQuery(stream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()),
				WithStatePartitions(3), WithProgressListener(func(p Progress) { kind = p.StateOperators[1].OperatorName }))
			if err != nil {
				t.Fatal(err)
			}
			q.cfg.rowWindows = rows
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := q.Run(ctx); err != nil {
				t.Fatal(err)
			}
			return sinkRows(sink, func(r []any) string { return fmt.Sprint(r...) }), kind
		}
		panes, kind := run(false)
		rows, _ := run(true)
		if kind != "slidingWindowPanes" {
			t.Fatalf("operator %s", kind)
		}
		if len(rows) == 0 {
			t.Fatal("no output")
		}
		if fmt.Sprint(panes) != fmt.Sprint(rows) {
			t.Fatalf("seed %d: panes\n %v\nrows per window\n %v", seed, panes, rows)
		}
	}
}

// TestChainTimestampUnits runs a chain (sliding windows by panes, a top
// per window, a rollup per window end) over event times in seconds and
// microseconds: the same rows in both units.
func TestChainTimestampUnits(t *testing.T) {
	t.Parallel()
	script := randomPayments(8, 10)
	var out []string
	for _, unit := range []arrow.TimeUnit{arrow.Second, arrow.Microsecond} {
		schema := arrow.NewSchema([]arrow.Field{{Name: "merchant", Type: arrow.BinaryTypes.String},
			{Name: "ts", Type: &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}}, {Name: "amount", Type: arrow.PrimitiveTypes.Int64}}, nil)
		src := &rowScript{schema: schema}
		per := int64(time.Second) / int64(unit.Multiplier())
		for _, bt := range script {
			var rows [][]any
			for _, r := range bt {
				rows = append(rows, []any{r.merchant, r.sec * per, r.amount})
			}
			src.batches = append(src.batches, rows)
		}
		s := ReadStream(src).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(SlidingWindow("ts", 10*time.Second, 5*time.Second), "merchant").ID("counts").
			Agg(batch.CountRows().As("n"), batch.Sum(batch.Col("amount")).As("total")).
			GroupBy("window_start", "window_end").ID("top").Top(2, "total", Desc).
			GroupBy("window_end").ID("rollup").Agg(batch.Sum(batch.Col("n")).As("n"), batch.CountRows().As("merchants"))
		sink := memsink.New("out")
		if _, err := runQuery(t, s, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(sinkRows(sink, func(r []any) string { return fmt.Sprint(r...) }))
		if len(sink.BatchIDs()) == 0 {
			t.Fatalf("%s: no output", unit)
		}
		out = append(out, got)
		if got != out[0] {
			t.Fatalf("%s\n %s\n%s\n %s", arrow.Second, out[0], unit, got)
		}
	}
}

// TestTopAscTiesAndNullsAcrossRestarts ranks one group that receives rows
// over two batches, restarted before every batch: ties at the n-th place
// are all kept, nulls rank last, n larger than the group keeps it all.
func TestTopAscTiesAndNullsAcrossRestarts(t *testing.T) {
	t.Parallel()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "ts", Type: msTS},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	script := [][][]any{
		{{"b0-5", int64(1000), int64(5)}, {"b0-null", int64(1000), nil}, {"b0-3", int64(1000), int64(3)}},
		{{"b1-3", int64(1000), int64(3)}, {"b1-7", int64(1000), int64(7)}, {"b1-1", int64(1000), int64(1)}},
		{{"late", int64(20000), int64(0)}},
	}
	for n, want := range map[int]string{
		1: "[b1-1 1]",
		2: "[b1-1 1 b0-3 3 b1-3 3]",
		3: "[b1-1 1 b0-3 3 b1-3 3]",
		4: "[b1-1 1 b0-3 3 b1-3 3 b0-5 5]",
		6: "[b1-1 1 b0-3 3 b1-3 3 b0-5 5 b1-7 7 b0-null <nil>]",
	} {
		cp := localStore(t)
		sink := memsink.New("out")
		for i := 0; i < len(script)+2; i++ {
			s := ReadStream(&rowScript{schema: schema, batches: script}).WithWatermark("ts", 0).GroupBy("ts").ID("best").Top(n, "v", Asc)
			if _, err := runQuery(t, s, WithCheckpoint(cp), WithSink(sink), WithTrigger(Once()), WithStatePartitions(2), WithSnapshotEvery(1)); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, id := range sink.BatchIDs() {
			for _, r := range sink.Batch(id) {
				if secs(r[1]) != 1 {
					t.Fatalf("n=%d: batch %d emitted %v", n, id, r)
				}
				got = append(got, fmt.Sprint(r[0], " ", r[2]))
			}
		}
		if fmt.Sprint(got) != want {
			t.Errorf("top %d asc: %v, want %s", n, got, want)
		}
	}
}
