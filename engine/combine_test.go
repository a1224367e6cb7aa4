package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// splitScript is payScript with each batch read as several records, so a
// combiner folds more than one record a batch and flushes between them.
type splitScript struct {
	*payScript
	parts int
}

func (s *splitScript) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	return s.payScript.Read(ctx, start, end, func(rec arrow.RecordBatch) error {
		n := rec.NumRows()
		step := max(1, n/int64(s.parts))
		for i := int64(0); i < n; i += step {
			sl := rec.NewSlice(i, min(n, i+step))
			err := emit(sl)
			sl.Release()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// combineScript is a script of batches of 10 to 70 payments over 6
// merchants (every fourth batch a merchant per row: a batch the combiner
// does not reduce), event times drifting forward, some far behind (late),
// amounts of either sign.
func combineScript(seed uint64, batches int) [][]payRow {
	r := rand.New(rand.NewPCG(seed, seed*3+7))
	var script [][]payRow
	next := 0
	for b := range batches {
		var bt []payRow
		base := int64(b * 7)
		for range 10 + r.IntN(60) {
			sec := base + r.Int64N(12)
			if r.IntN(10) == 0 {
				sec = max(0, base-15-r.Int64N(20))
			}
			m := fmt.Sprintf("m%d", r.IntN(6))
			if b%4 == 3 {
				m = fmt.Sprintf("u%d", next)
			}
			bt = append(bt, payRow{id: fmt.Sprintf("p%d", next), merchant: m, sec: sec, amount: r.Int64N(2001) - 1000})
			next++
		}
		script = append(script, bt)
	}
	return script
}

// combineRun is what a run leaves to compare: the rows of each batch in
// their order, each batch's progress figures that do not depend on the
// path, every state version of every partition, and the rows the
// combiner took.
type combineRun struct {
	out      []string
	progress []string
	state    []string
	combined int64
}

func runCombine(t *testing.T, stream func(Source) *Stream, script [][]payRow, mode OutputMode, knobs combineKnobs, ops []string) combineRun {
	t.Helper()
	cp := localStore(t)
	sink := memsink.New("out")
	var res combineRun
	listen := WithProgressListener(func(p Progress) {
		var b strings.Builder
		fmt.Fprintf(&b, "batch %d in %d", p.BatchID, p.NumInputRows)
		for _, s := range p.Sinks {
			fmt.Fprintf(&b, " out %d", s.NumOutputRows)
		}
		for _, op := range p.StateOperators {
			fmt.Fprintf(&b, "; %s total %d updated %d removed %d late %d", op.OperatorID, op.NumRowsTotal, op.NumRowsUpdated, op.NumRowsRemoved, op.NumRowsDroppedByWatermark)
			res.combined += op.CustomMetrics["numRowsCombined"]
		}
		res.progress = append(res.progress, b.String())
	})
	src := &splitScript{payScript: &payScript{batches: script}, parts: 3}
	// Half the batches one run each (a restart from the checkpoint
	// between batches), then the rest in one run.
	for i := 0; i <= len(script)/2; i++ {
		trig := Once()
		if i == len(script)/2 {
			trig = AvailableNow()
		}
		q, err := NewQuery(stream(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(trig), WithOutputMode(mode),
			WithStatePartitions(3), WithSnapshotEvery(3), listen)
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = q.Run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range sink.BatchIDs() {
		for _, r := range sink.Batch(id) {
			res.out = append(res.out, fmt.Sprint(id, r))
		}
	}
	res.state = stateVersions(t, cp, stream(src), mode, ops, 3, int64(len(script)))
	return res
}

// stateVersions reads every committed version [0, versions) of the state
// of operators ops (partitions [0, parts)) of the query stream describes,
// one line per partition and version.
func stateVersions(t *testing.T, cp storage.Store, stream *Stream, mode OutputMode, ops []string, parts int, versions int64) []string {
	t.Helper()
	return wholeStateVersions(t, cp, stream, mode, ops, parts, 0, versions)
}

func combineGroupBy(src Source) *Stream {
	return ReadStream(src).GroupBy("merchant").ID("totals").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Count(batch.Col("amount")).As("amounts"),
			batch.Min(batch.Col("amount")).As("lo"), batch.Max(batch.Col("amount")).As("hi"), batch.Avg(batch.Col("amount")).As("avg"),
			batch.First(batch.Col("id")).As("first"), batch.Last(batch.Col("id")).As("last"), batch.Max(batch.Col("ts")).As("latest"))
}

func combineWindows(src Source) *Stream {
	return ReadStream(src).WithWatermark("ts", 5*time.Second).
		GroupByWindow(TumblingWindow("ts", 10*time.Second), "merchant").ID("windows").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Min(batch.Col("id")).As("lo"))
}

// TestCombinerMatchesRowByRow runs the same input, restarted from its
// checkpoint in the middle, with the partial aggregation before the hash
// partitioning forced off, forced on, forced on and flushed after every
// record (the memory bound), and adaptive with a small probe (so it gives
// up on the batches of distinct merchants): the output of every batch,
// row order included, the progress figures and every committed state
// version must be those of the row-by-row path.
func TestCombinerMatchesRowByRow(t *testing.T) {
	cases := []struct {
		name   string
		stream func(Source) *Stream
		mode   OutputMode
		ops    []string
	}{
		{"group by/update", combineGroupBy, Update, []string{"totals"}},
		{"group by/complete", combineGroupBy, Complete, []string{"totals"}},
		{"tumbling window/append", combineWindows, Append, []string{"windows"}},
		{"tumbling window/update", combineWindows, Update, []string{"windows"}},
		{"chain: windows then windows/append", rollupStream, Append, []string{"per-merchant", "per-30s"}},
	}
	variants := []struct {
		name  string
		knobs combineKnobs
	}{
		{"on", combineKnobs{mode: combineOn}},
		{"on, flushed every record", combineKnobs{mode: combineOn, maxGroups: 1}},
		{"adaptive", combineKnobs{mode: combineAdaptive, probeRows: 16}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := combineScript(uint64(len(tc.name)), 12)
			want := runCombine(t, tc.stream, script, tc.mode, combineKnobs{mode: combineOff}, tc.ops)
			if want.combined != 0 {
				t.Fatalf("combiner off: %d rows combined", want.combined)
			}
			if len(want.out) == 0 {
				t.Fatal("no output")
			}
			var onCombined int64
			for _, v := range variants {
				got := runCombine(t, tc.stream, script, tc.mode, v.knobs, tc.ops)
				if got.combined == 0 {
					t.Errorf("%s: no row went through the combiner", v.name)
				}
				if v.knobs.mode == combineOn && v.knobs.maxGroups == 0 {
					onCombined = got.combined
				}
				if v.knobs.mode == combineAdaptive && got.combined >= onCombined {
					t.Errorf("%s: %d rows combined, as many as forced on: it never gave up", v.name, got.combined)
				}
				for _, cmp := range []struct {
					what     string
					got, exp []string
				}{{"output", got.out, want.out}, {"progress", got.progress, want.progress}, {"state", got.state, want.state}} {
					if a, b := strings.Join(cmp.got, "\n"), strings.Join(cmp.exp, "\n"); a != b {
						t.Fatalf("%s: %s\n%s\nwant (row by row)\n%s", v.name, cmp.what, a, b)
					}
				}
			}
		})
	}
}

// TestCombinerOverflowFallsBackToRows: a batch whose rows of one group sum
// past int64 by themselves, while the group's running sum plus those rows
// one by one never leaves it, succeeds as row by row does (the combiner
// hands those rows over as they are).
func TestCombinerOverflowFallsBackToRows(t *testing.T) {
	script := [][]payRow{
		{{id: "a", merchant: "m", sec: 1, amount: -9e18}},
		{{id: "b", merchant: "m", sec: 2, amount: 5e18}, {id: "c", merchant: "m", sec: 3, amount: 5e18}, {id: "d", merchant: "n", sec: 3, amount: 1}},
		{{id: "e", merchant: "m", sec: 4, amount: math.MaxInt64 - 5e17}},
	}
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("merchant").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	var outs [2][]string
	for i, knobs := range []combineKnobs{{mode: combineOff}, {mode: combineOn}} {
		sink := memsink.New("out")
		q, err := NewQuery(stream(&payScript{batches: script}), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
		err = q.Run(context.Background())
		if !errors.Is(err, batch.ErrSumOverflow) || !strings.Contains(err.Error(), "merchant=m") {
			t.Fatalf("%v: the last batch's sum overflows for m: error %v", knobs, err)
		}
		for _, id := range sink.BatchIDs() {
			outs[i] = append(outs[i], fmt.Sprint(id, sink.Batch(id)))
		}
	}
	if fmt.Sprint(outs[0]) != fmt.Sprint(outs[1]) || len(outs[0]) != 2 {
		t.Fatalf("combiner on %v, off %v", outs[1], outs[0])
	}
}
