package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/onceflow/onceflow/storage"
)

// payRow is a payment of the chain tests: an id that an at-least-once
// upstream may repeat, a merchant, an event time and an amount.
type payRow struct {
	id       string
	merchant string
	sec      int64
	amount   int64
}

var paySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "merchant", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// payScript replays fixed batches of payments: offset k is "the first k
// script batches", one script batch per trigger.
type payScript struct{ batches [][]payRow }

func (s *payScript) Schema() *arrow.Schema { return paySchema }
func (s *payScript) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *payScript) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *payScript) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	mem := memory.DefaultAllocator
	ib := array.NewStringBuilder(mem)
	mb := array.NewStringBuilder(mem)
	tb := array.NewTimestampBuilder(mem, paySchema.Field(2).Type.(*arrow.TimestampType))
	ab := array.NewInt64Builder(mem)
	defer ib.Release()
	defer mb.Release()
	defer tb.Release()
	defer ab.Release()
	n := 0
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			ib.Append(r.id)
			mb.Append(r.merchant)
			tb.Append(arrow.Timestamp(r.sec * 1000))
			ab.Append(r.amount)
			n++
		}
	}
	cols := []arrow.Array{ib.NewArray(), mb.NewArray(), tb.NewArray(), ab.NewArray()}
	rec := array.NewRecordBatch(paySchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// randomPayments makes a script of batches whose event times drift
// forward with jitter, some rows far behind (late) and some ids repeated
// in later batches (duplicates).
func randomPayments(seed uint64, batches int) [][]payRow {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	var script [][]payRow
	var seen []payRow
	next := 0
	for b := 0; b < batches; b++ {
		var bt []payRow
		base := int64(b * 7)
		for j, n := 0, 3+r.IntN(8); j < n; j++ {
			sec := base + r.Int64N(12)
			if r.IntN(8) == 0 {
				sec = max(0, base-15-r.Int64N(20)) // late
			}
			p := payRow{id: fmt.Sprintf("p%d", next), merchant: fmt.Sprintf("m%d", r.IntN(3)), sec: sec, amount: 1 + r.Int64N(100)}
			next++
			bt = append(bt, p)
			seen = append(seen, p)
		}
		for j := r.IntN(3); j > 0 && len(seen) > 0; j-- {
			dup := seen[r.IntN(len(seen))]
			dup.sec += r.Int64N(3) // an at-least-once repeat, maybe re-stamped
			bt = append(bt, dup)
		}
		script = append(script, bt)
	}
	return script
}

// sinkRows renders every non-empty batch of a sink as sorted strings.
func sinkRows(s *memsink.Sink, render func([]any) string) map[int64][]string {
	out := map[int64][]string{}
	for _, id := range s.BatchIDs() {
		for _, r := range s.Batch(id) {
			out[id] = append(out[id], render(r))
		}
		sort.Strings(out[id])
	}
	return out
}

func secs(v any) int64 { return v.(time.Time).Unix() }

// rollupStream counts per merchant per 10 s window, then sums those
// windows per 30 s slot across merchants: two event-time aggregations,
// with a projection between them that renames the event-time column.
func rollupStream(src Source) *Stream {
	return ReadStream(src).
		WithWatermark("ts", 5*time.Second).
		GroupByWindow(TumblingWindow("ts", 10*time.Second), "merchant").ID("per-merchant").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")).
		Select(batch.As(batch.Col("window_start"), "slot"), batch.As(batch.Col("window_end"), "slot_end"),
			batch.As(batch.Col("merchant"), "merchant"), batch.As(batch.Col("total"), "total"), batch.As(batch.Col("n"), "n")).
		GroupByWindow(TumblingWindow("slot", 30*time.Second)).ID("per-30s").
		Agg(batch.Sum(batch.Col("total")).As("total"), batch.Sum(batch.Col("n")).As("n"), batch.CountRows().As("slots"))
}

// rollupModel computes the rollup row by row: per batch b the watermark
// W(b) (max event time of the batches before, minus 5 s), rows below W(b)
// dropped by the first operator, 10 s windows emitted when W(b) passes
// their end, fed to the 30 s windows, which drop what is below W(b-1) and
// emit when W(b) passes their end. It returns the emitted rows per batch
// and the rows each operator dropped as late.
func rollupModel(script [][]payRow) (map[int64][]string, [2]int64) {
	type acc struct{ total, n, slots int64 }
	first := map[[2]any]*acc{} // (window start, merchant)
	second := map[int64]*acc{} // slot start
	out := map[int64][]string{}
	var late [2]int64
	wm, prevWM, maxT := int64(0), int64(0), int64(0)
	step := func(b int64, rows []payRow) {
		for _, r := range rows {
			ms := r.sec * 1000
			maxT = max(maxT, ms)
			if ms < wm {
				late[0]++
				continue
			}
			k := [2]any{(r.sec / 10) * 10, r.merchant}
			if first[k] == nil {
				first[k] = &acc{}
			}
			first[k].total += r.amount
			first[k].n++
		}
		var closed [][2]any
		for k := range first {
			if wm > 0 && (k[0].(int64)+10)*1000 <= wm {
				closed = append(closed, k)
			}
		}
		for _, k := range closed {
			a := first[k]
			delete(first, k)
			end := k[0].(int64) + 10
			if prevWM > 0 && end*1000-1 < prevWM {
				late[1]++
				continue
			}
			slot := (k[0].(int64) / 30) * 30
			if wm > 0 && (slot+30)*1000 <= prevWM {
				late[1]++
				continue
			}
			if second[slot] == nil {
				second[slot] = &acc{}
			}
			second[slot].total += a.total
			second[slot].n += a.n
			second[slot].slots++
		}
		for slot, a := range second {
			if wm > 0 && (slot+30)*1000 <= wm {
				out[b] = append(out[b], fmt.Sprintf("%d-%d %d %d %d", slot, slot+30, a.total, a.n, a.slots))
				delete(second, slot)
			}
		}
		sort.Strings(out[b])
		if len(out[b]) == 0 {
			delete(out, b)
		}
		prevWM = wm
		wm = max(wm, max(maxT-5000, 1))
	}
	b := int64(0)
	for _, rows := range script {
		step(b, rows)
		b++
	}
	// Batches without data run while the watermark moves (it moves once
	// after the last data batch) and emit what it closes.
	step(b, nil)
	return out, late
}

func renderRollup(r []any) string {
	return fmt.Sprintf("%d-%d %v %v %v", secs(r[0]), secs(r[1]), r[2], r[3], r[4])
}

func TestChainTwoLevelRollupMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			script := randomPayments(seed, 14)
			sink := memsink.New("out")
			var progress []Progress
			_, err := runQuery(t, rollupStream(&payScript{batches: script}),
				WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithOutputMode(Append), WithStatePartitions(3),
				WithProgressListener(func(p Progress) { progress = append(progress, p) }))
			if err != nil {
				t.Fatal(err)
			}
			want, late := rollupModel(script)
			if got := sinkRows(sink, renderRollup); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("emitted\n got %v\nwant %v", got, want)
			}
			var dropped [2]int64
			for _, p := range progress {
				if len(p.StateOperators) != 2 {
					t.Fatalf("batch %d reports %d operators, want 2", p.BatchID, len(p.StateOperators))
				}
				for i := range dropped {
					dropped[i] += p.StateOperators[i].NumRowsDroppedByWatermark
				}
			}
			if dropped != late {
				t.Errorf("late rows per operator %v, want %v", dropped, late)
			}
			if last := progress[len(progress)-1]; last.StateOperators[0].NumRowsTotal+last.StateOperators[1].NumRowsTotal > 8 {
				t.Errorf("state not evicted: %+v", last.StateOperators)
			}
		})
	}
}

// dedupAggStream drops repeated payment ids within the watermark, then
// totals per merchant.
func dedupAggStream(src Source) *Stream {
	return ReadStream(src).
		WithWatermark("ts", 5*time.Second).
		DropDuplicatesWithinWatermark("id").ID("ids").
		GroupBy("merchant").ID("totals").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
}

// dedupAggModel: rows below W(b) are late; an id is kept until its first
// row's event time plus the delay falls below W(b); a repeat while kept is
// dropped; the totals per merchant change by the first rows. complete
// gives every merchant each batch, update the ones the batch changed.
func dedupAggModel(script [][]payRow, mode OutputMode) map[int64][]string {
	kept := map[string]int64{}
	type acc struct{ total, n int64 }
	totals := map[string]*acc{}
	out := map[int64][]string{}
	wm, maxT := int64(0), int64(0)
	step := func(b int64, rows []payRow) {
		touched := map[string]bool{}
		for _, r := range rows {
			ms := r.sec * 1000
			maxT = max(maxT, ms)
			if ms < wm {
				continue
			}
			if _, dup := kept[r.id]; dup {
				continue
			}
			kept[r.id] = ms
			if totals[r.merchant] == nil {
				totals[r.merchant] = &acc{}
			}
			totals[r.merchant].total += r.amount
			totals[r.merchant].n++
			touched[r.merchant] = true
		}
		for id, t := range kept {
			if wm > 0 && t+5000 < wm {
				delete(kept, id)
			}
		}
		for m, a := range totals {
			if mode == Complete || touched[m] {
				out[b] = append(out[b], fmt.Sprintf("%s %d %d", m, a.total, a.n))
			}
		}
		sort.Strings(out[b])
		if len(out[b]) == 0 {
			delete(out, b)
		}
		wm = max(wm, max(maxT-5000, 1))
	}
	b := int64(0)
	for _, rows := range script {
		step(b, rows)
		b++
	}
	step(b, nil)
	return out
}

func TestChainDedupThenAggregateMatchesModel(t *testing.T) {
	for _, mode := range []OutputMode{Update, Complete} {
		for seed := uint64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", mode, seed), func(t *testing.T) {
				script := randomPayments(seed, 12)
				sink := memsink.New("out")
				if _, err := runQuery(t, dedupAggStream(&payScript{batches: script}),
					WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithOutputMode(mode), WithStatePartitions(3)); err != nil {
					t.Fatal(err)
				}
				want := dedupAggModel(script, mode)
				got := sinkRows(sink, func(r []any) string { return fmt.Sprintf("%v %v %v", r[0], r[1], r[2]) })
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("emitted\n got %v\nwant %v", got, want)
				}
			})
		}
	}
}

// TestChainAcceptedAndRefusedCombinations pins which chains NewQuery takes
// in which output mode (Spark's rules), each accepted one with its output
// on a small script worked out by hand.
func TestChainAcceptedAndRefusedCombinations(t *testing.T) {
	// Watermark 5 s; batch 0 sees t=1,2,12 (W(1)=7), batch 1 sees t=13
	// and a repeat of p1 (W(2)=8), batch 2 sees t=31 (W(3)=26).
	script := [][]payRow{
		{{"p1", "a", 1, 10}, {"p2", "b", 2, 20}, {"p3", "a", 12, 30}},
		{{"p4", "a", 13, 40}, {"p1", "a", 1, 10}},
		{{"p5", "b", 31, 50}},
	}
	wm := func() *Stream { return ReadStream(&payScript{batches: script}).WithWatermark("ts", 5*time.Second) }
	win := func(s *Stream) *Stream {
		return s.GroupByWindow(TumblingWindow("ts", 10*time.Second), "merchant").ID("win").Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	render := func(r []any) string {
		var parts []string
		for _, v := range r {
			if tm, ok := v.(time.Time); ok {
				v = tm.Unix()
			}
			parts = append(parts, fmt.Sprint(v))
		}
		return strings.Join(parts, " ")
	}
	accepted := []struct {
		name   string
		stream *Stream
		mode   OutputMode
		want   string
	}{
		// Windows [0,10) a=10 b=20 close at W=26 (batch 3, no data), as
		// does [10,20) a=70; their per-window totals follow in the same
		// batch (the window's time is window_end - 1 ms, not late).
		{"window then per-window total", win(wm()).GroupBy("window_start", "window_end").ID("per-window").Agg(batch.Sum(batch.Col("total")).As("all")), Append,
			"map[3:[0 10 30 10 20 70]]"},
		// p1's repeat is dropped; totals change by first rows only.
		{"dedup then total (update)", wm().DropDuplicates("id").ID("ids").GroupBy("merchant").ID("t").Agg(batch.Sum(batch.Col("amount")).As("total")), Update,
			"map[0:[a 40 b 20] 1:[a 80] 2:[b 70]]"},
		{"dedup then total (complete)", wm().DropDuplicates("id").ID("ids").GroupBy("merchant").ID("t").Agg(batch.Sum(batch.Col("amount")).As("total")), Complete,
			"map[0:[a 40 b 20] 1:[a 80 b 20] 2:[a 80 b 70]]"},
		// Windows emitted once, then deduplicated by merchant: only the
		// first window of each merchant passes.
		{"window then dedup", win(wm()).DropDuplicates("merchant").ID("first"), Append,
			"map[3:[0 10 a 10 0 10 b 20]]"},
		// Dedup within the watermark, then windows.
		{"dedup then window", win(wm().DropDuplicatesWithinWatermark("id").ID("ids")), Append,
			"map[3:[0 10 a 10 0 10 b 20 10 20 a 70]]"},
		// Default mode of a chain of aggregations is append.
		{"window then window, default mode", win(wm()).Select(batch.As(batch.Col("window_start"), "s"), batch.As(batch.Col("window_end"), "e"), batch.As(batch.Col("total"), "total")).
			GroupByWindow(TumblingWindow("s", 20*time.Second)).ID("w20").Agg(batch.Sum(batch.Col("total")).As("total")), 0,
			"map[3:[0 20 100]]"},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			sink := memsink.New("out")
			opts := []Option{WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)}
			if tc.mode != 0 {
				opts = append(opts, WithOutputMode(tc.mode))
			}
			if _, err := runQuery(t, tc.stream, opts...); err != nil {
				t.Fatal(err)
			}
			if got := sinkRows(sink, render); fmt.Sprint(got) != tc.want {
				t.Fatalf("emitted %v, want %s", got, tc.want)
			}
		})
	}
	refused := []struct {
		name   string
		stream *Stream
		mode   OutputMode
		want   string
	}{
		{"update below a second aggregation", win(wm()).GroupBy("window_start", "window_end").ID("pw").Agg(batch.CountRows()), Update, "update output mode below a second aggregation"},
		{"complete below a second aggregation", win(wm()).GroupBy("window_start", "window_end").ID("pw").Agg(batch.CountRows()), Complete, "complete output mode below a second aggregation"},
		{"aggregation that never closes feeds another", wm().GroupBy("merchant").ID("m").Agg(batch.CountRows().As("n")).GroupBy("n").ID("by-n").Agg(batch.CountRows()), Append, `aggregation "m" feeds the stateful step "by-n"`},
		{"aggregation without event time feeds a dedup", wm().GroupBy("merchant").ID("m").Agg(batch.CountRows().As("n")).DropDuplicates("merchant").ID("d"), Update, `aggregation "m" feeds the stateful step "d"`},
		{"update of a dedup below a window", win(wm()).DropDuplicates("merchant").ID("first"), Update, `update output mode below a second aggregation: "win" feeds "first"`},
		{"duplicate operator ids", wm().DropDuplicates("id").ID("x").DropDuplicates("merchant").ID("x"), Append, `operator id "x" is used by step 2 too`},
		{"complete without an aggregation last", win(wm()).DropDuplicates("merchant").ID("first"), Complete, "complete output mode"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewQuery(tc.stream, WithCheckpoint(localStore(t)), WithSink(memsink.New("out")), WithOutputMode(tc.mode))
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrInvalidQuery containing %q", err, tc.want)
			}
		})
	}
}

// TestChainRestartEveryBatchMatchesOneRun runs chains one batch per Run
// (a restart before every batch, state loaded from the checkpoint) and
// compares every batch with a single run.
func TestChainRestartEveryBatchMatchesOneRun(t *testing.T) {
	cases := []struct {
		name   string
		stream func(Source) *Stream
		mode   OutputMode
	}{
		{"rollup", rollupStream, Append},
		{"dedup then aggregate", dedupAggStream, Update},
		{"windows then top", topStream(1), Append},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := randomPayments(42, 10)
			once := memsink.New("once")
			if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(once),
				WithTrigger(AvailableNow()), WithOutputMode(tc.mode), WithStatePartitions(3), WithSnapshotEvery(2)); err != nil {
				t.Fatal(err)
			}
			cp := localStore(t)
			restarted := memsink.New("restarted")
			for i := 0; i < len(script)+3; i++ {
				if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(restarted),
					WithTrigger(Once()), WithOutputMode(tc.mode), WithStatePartitions(3), WithSnapshotEvery(2)); err != nil {
					t.Fatal(err)
				}
			}
			raw := func(r []any) string { return fmt.Sprint(r...) }
			if a, b := sinkRows(once, raw), sinkRows(restarted, raw); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("one run\n %v\nrestarted every batch\n %v", a, b)
			}
		})
	}
}

// TestChainRestartCompatibility lists an added, a removed and a reordered
// operator in the refusal, and lets a stateless step be added anywhere.
func TestChainRestartCompatibility(t *testing.T) {
	script := randomPayments(3, 3)
	src := func() *Stream { return ReadStream(&payScript{batches: script}).WithWatermark("ts", 5*time.Second) }
	ids := func(s *Stream) *Stream { return s.DropDuplicates("id").ID("ids") }
	pairs := func(s *Stream) *Stream { return s.DropDuplicates("id", "merchant").ID("pairs") }
	totals := func(s *Stream) *Stream {
		return s.GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	run := func(t *testing.T, cp storage.Store, s *Stream) error {
		q, err := NewQuery(s, WithCheckpoint(cp), WithSink(memsink.New("out")), WithTrigger(Once()), WithOutputMode(Update))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return q.Run(ctx)
	}
	cases := []struct {
		name string
		next *Stream
		want []string // "" for accepted
	}{
		{"stateless steps added between and after", totals(pairs(ids(src()).Where(batch.Gt(batch.Col("amount"), batch.Lit(int64(0))))).WithColumn("x", batch.Lit(int64(1)))), nil},
		{"added", totals(pairs(ids(src()).DropDuplicates("merchant").ID("merchants"))), []string{`"merchants" is new`}},
		{"removed", totals(ids(src())), []string{`"pairs" was removed`}},
		{"reordered", totals(ids(pairs(src()))), []string{"reordered: the checkpoint runs ids → pairs → totals, the query pairs → ids → totals"}},
		{"aggregate changed", pairs(ids(src())).GroupBy("merchant").ID("totals").Agg(batch.Max(batch.Col("amount")).As("total")), []string{`operator "totals" settings changed`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := localStore(t)
			if err := run(t, cp, totals(pairs(ids(src())))); err != nil {
				t.Fatal(err)
			}
			err := run(t, cp, tc.next)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrIncompatibleRestart) {
				t.Fatalf("err %v, want ErrIncompatibleRestart", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestDescribeListsTheChain(t *testing.T) {
	q, err := NewQuery(rollupStream(&payScript{}), WithCheckpoint(localStore(t)), WithSink(memsink.New("out")), WithName("rollup"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Describe()
	if err != nil {
		t.Fatal(err)
	}
	got := p.String()
	for _, want := range []string{
		"query rollup",
		"watermark: ts - 5s",
		"operator per-merchant: windowAggregate by (merchant), emits append, event time window_end -1ms",
		"operator per-30s: windowAggregate, emits append, event time window_end -1ms",
		"output mode: append",
		"sink 0: memory[out] (exactly-once)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan lacks %q:\n%s", want, got)
		}
	}
}

// topStream counts payments per merchant per sliding window (10 s every
// 5 s), then keeps the n busiest merchants of each window (ties kept):
// Nexmark q5's shape.
func topStream(n int) func(Source) *Stream {
	return func(src Source) *Stream {
		return ReadStream(src).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(SlidingWindow("ts", 10*time.Second, 5*time.Second), "merchant").ID("counts").
			Agg(batch.CountRows().As("n")).
			GroupBy("window_start", "window_end").ID("top").Top(n, "n", Desc)
	}
}

// topModel: sliding windows counted per merchant as rollupModel counts
// tumbling ones; when W(b) closes a window, its merchants with RANK ≤ n by
// count are emitted.
func topModel(script [][]payRow, n int) map[int64][]string {
	counts := map[int64]map[string]int64{} // window start → merchant → count
	out := map[int64][]string{}
	wm, maxT := int64(0), int64(0)
	step := func(b int64, rows []payRow) {
		for _, r := range rows {
			ms := r.sec * 1000
			maxT = max(maxT, ms)
			if ms < wm {
				continue
			}
			for st := (r.sec / 5) * 5; st > r.sec-10; st -= 5 {
				if (st+10)*1000 <= wm {
					continue
				}
				if counts[st] == nil {
					counts[st] = map[string]int64{}
				}
				counts[st][r.merchant]++
			}
		}
		for st, m := range counts {
			if wm <= 0 || (st+10)*1000 > wm {
				continue
			}
			delete(counts, st)
			for merchant, c := range m {
				better := 0
				for _, c2 := range m {
					if c2 > c {
						better++
					}
				}
				if better+1 <= n {
					out[b] = append(out[b], fmt.Sprintf("%d-%d %s %d", st, st+10, merchant, c))
				}
			}
		}
		sort.Strings(out[b])
		if len(out[b]) == 0 {
			delete(out, b)
		}
		wm = max(wm, max(maxT-5000, 1))
	}
	b := int64(0)
	for _, rows := range script {
		step(b, rows)
		b++
	}
	step(b, nil)
	return out
}

func TestChainTopPerWindowMatchesModel(t *testing.T) {
	for _, n := range []int{1, 2} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("top%d/seed%d", n, seed), func(t *testing.T) {
				script := randomPayments(seed, 12)
				sink := memsink.New("out")
				if _, err := runQuery(t, topStream(n)(&payScript{batches: script}),
					WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
					t.Fatal(err)
				}
				want := topModel(script, n)
				got := sinkRows(sink, func(r []any) string { return fmt.Sprintf("%d-%d %v %v", secs(r[0]), secs(r[1]), r[2], r[3]) })
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("emitted\n got %v\nwant %v", got, want)
				}
			})
		}
	}
}

func TestTopRefusesGroupsThatNeverClose(t *testing.T) {
	s := ReadStream(&payScript{}).WithWatermark("ts", time.Second).GroupBy("merchant").Top(1, "amount", Desc)
	_, err := NewQuery(s, WithCheckpoint(localStore(t)), WithSink(memsink.New("out")))
	if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), "must include the event-time column") {
		t.Fatalf("err %v", err)
	}
}

// TestTopHoldsOpenGroupsAcrossBatches ranks payments per exact event time
// (the watermark's own column as the group key), so groups stay open
// across batches and their best rows live in state, through restarts.
func TestTopHoldsOpenGroupsAcrossBatches(t *testing.T) {
	stream := func(src Source) *Stream {
		return ReadStream(src).WithWatermark("ts", 5*time.Second).GroupBy("ts").ID("best").Top(2, "amount", Desc)
	}
	model := func(script [][]payRow) map[int64][]string {
		open := map[int64][]payRow{}
		out := map[int64][]string{}
		wm, maxT := int64(0), int64(0)
		step := func(b int64, rows []payRow) {
			for _, r := range rows {
				maxT = max(maxT, r.sec*1000)
				if r.sec*1000 < wm {
					continue
				}
				open[r.sec] = append(open[r.sec], r)
			}
			for sec, rs := range open {
				if wm <= 0 || sec*1000 >= wm {
					continue
				}
				delete(open, sec)
				for _, r := range rs {
					better := 0
					for _, r2 := range rs {
						if r2.amount > r.amount {
							better++
						}
					}
					if better < 2 {
						out[b] = append(out[b], fmt.Sprintf("%s %s %d %d", r.id, r.merchant, sec, r.amount))
					}
				}
			}
			sort.Strings(out[b])
			if len(out[b]) == 0 {
				delete(out, b)
			}
			wm = max(wm, max(maxT-5000, 1))
		}
		b := int64(0)
		for _, rows := range script {
			step(b, rows)
			b++
		}
		step(b, nil)
		return out
	}
	render := func(r []any) string { return fmt.Sprintf("%v %v %d %v", r[0], r[1], secs(r[2]), r[3]) }
	for seed := uint64(1); seed <= 4; seed++ {
		script := randomPayments(seed, 10)
		for i := range script {
			for j := range script[i] {
				script[i][j].sec /= 3 // more rows per second, across batches
			}
		}
		cp := localStore(t)
		sink := memsink.New("out")
		for i := 0; i < len(script)+3; i++ {
			if _, err := runQuery(t, stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(sink),
				WithTrigger(Once()), WithStatePartitions(2), WithSnapshotEvery(2)); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := sinkRows(sink, render), model(script); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d: emitted\n got %v\nwant %v", seed, got, want)
		}
	}
}

// slidingStream aggregates per merchant over sliding windows with every
// aggregate that combines across panes.
func slidingStream(src Source) *Stream {
	return ReadStream(src).
		WithWatermark("ts", 5*time.Second).
		GroupByWindow(SlidingWindow("ts", 12*time.Second, 4*time.Second), "merchant").ID("slide").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Count(batch.Col("amount")).As("amounts"),
			batch.Min(batch.Col("amount")).As("lo"), batch.Max(batch.Col("amount")).As("hi"), batch.Avg(batch.Col("amount")).As("avg"))
}

func TestSlidingPanesEqualRowsPerWindow(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		script := randomPayments(seed, 14)
		run := func(rows bool) (*memsink.Sink, []Progress) {
			sink := memsink.New("out")
			var progress []Progress
			q, err := NewQuery(slidingStream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()),
				WithOutputMode(Append), WithStatePartitions(3), WithProgressListener(func(p Progress) { progress = append(progress, p) }))
			if err != nil {
				t.Fatal(err)
			}
			q.cfg.rowWindows = rows
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := q.Run(ctx); err != nil {
				t.Fatal(err)
			}
			return sink, progress
		}
		panes, pp := run(false)
		rows, rp := run(true)
		raw := func(r []any) string { return fmt.Sprint(r...) }
		if a, b := sinkRows(panes, raw), sinkRows(rows, raw); fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seed %d: panes\n %v\nrow per window\n %v", seed, a, b)
		}
		if k := pp[0].StateOperators[0].OperatorName; k != "slidingWindowPanes" {
			t.Fatalf("operator %s, want slidingWindowPanes", k)
		}
		var paneRows, windowRows int64
		for i := range pp {
			paneRows += pp[i].StateOperators[0].NumRowsTotal
			windowRows += rp[i].StateOperators[0].NumRowsTotal
		}
		if paneRows >= windowRows {
			t.Errorf("seed %d: panes held %d state rows over the run, rows per window %d", seed, paneRows, windowRows)
		}
	}
}

// TestSlidingWindowCheckpointOfRowsKeepsRows restarts a checkpoint that a
// build before panes wrote (a row per window) and finds it carried on in
// that form, with the output of an uninterrupted run.
func TestSlidingWindowCheckpointOfRowsKeepsRows(t *testing.T) {
	script := randomPayments(5, 12)
	want := memsink.New("want")
	if _, err := runQuery(t, slidingStream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(want),
		WithTrigger(AvailableNow()), WithOutputMode(Append), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	cp := localStore(t)
	got := memsink.New("got")
	var kinds []string
	for i := 0; i < len(script)+3; i++ {
		q, err := NewQuery(slidingStream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(got), WithTrigger(Once()),
			WithOutputMode(Append), WithStatePartitions(2), WithProgressListener(func(p Progress) { kinds = append(kinds, p.StateOperators[0].OperatorName) }))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.rowWindows = i < 4 // the old build ran the first batches
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = q.Run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range kinds {
		if k != "windowAggregate" {
			t.Fatalf("operator kinds over the run %v: a checkpoint of rows must keep rows", kinds)
		}
	}
	raw := func(r []any) string { return fmt.Sprint(r...) }
	if a, b := sinkRows(want, raw), sinkRows(got, raw); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("restarted\n %v\nwant\n %v", b, a)
	}
}

// TestChainReleasesEveryBuffer runs each chain under a checked allocator,
// restarting mid-way, and finds every Arrow buffer released once the
// query is done.
func TestChainReleasesEveryBuffer(t *testing.T) {
	cases := []struct {
		name   string
		stream func(Source) *Stream
		mode   OutputMode
	}{
		{"rollup", rollupStream, Append},
		{"dedup then aggregate", dedupAggStream, Update},
		{"windows then top", topStream(2), Append},
		{"sliding by panes", slidingStream, Append},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			script := randomPayments(9, 8)
			cp := localStore(t)
			for i := 0; i < 2; i++ {
				trig := Once()
				if i == 1 {
					trig = AvailableNow()
				}
				if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(memsink.New("out")),
					WithTrigger(trig), WithOutputMode(tc.mode), WithStatePartitions(2), WithAllocator(mem)); err != nil {
					t.Fatal(err)
				}
			}
			mem.AssertSize(t, 0)
		})
	}
}
