package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// Review of issue 21's finish pass: update-mode output built with the
// state (kernel StateOutput/ChangesOutput, aggPart.finishUpdate) and the
// Shared partitioning of a hash aggregation's input. A sink keeps every
// output record it is handed (retained) across later batches, restarts
// and the end of the query, and checks at the end that none changed; the
// output is compared batch by batch with a Go map; the query's allocator
// must end empty once the sink lets go.

// finCell renders one value (timestamps as their integer).
func finCell(c arrow.Array, i int) string {
	if c.IsNull(i) {
		return "(null)"
	}
	if ts, ok := c.(*array.Timestamp); ok {
		return fmt.Sprint(int64(ts.Value(i)))
	}
	return c.ValueStr(i)
}

func finRows(rec arrow.RecordBatch) []string {
	var out []string
	for r := range int(rec.NumRows()) {
		var b strings.Builder
		for c := range int(rec.NumCols()) {
			if c > 0 {
				b.WriteByte('|')
			}
			b.WriteString(finCell(rec.Column(c), r))
		}
		out = append(out, b.String())
	}
	return out
}

// finHoldSink retains every record it is handed and remembers its rows.
type finHoldSink struct {
	mu    sync.Mutex
	recs  []arrow.RecordBatch
	snaps [][]string
	ids   []int64
	byID  map[int64][][]string // per batch: the rows of each record
}

func (s *finHoldSink) AddBatch(_ context.Context, id int64, _ *arrow.Schema, recs []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[int64][][]string{}
	}
	if _, dup := s.byID[id]; dup {
		return nil
	}
	s.byID[id] = [][]string{}
	s.ids = append(s.ids, id)
	for _, r := range recs {
		r.Retain()
		rows := finRows(r)
		s.recs = append(s.recs, r)
		s.snaps = append(s.snaps, rows)
		s.byID[id] = append(s.byID[id], rows)
	}
	return nil
}

// checkAndRelease fails if a held record changed since it was handed
// over, then releases them all.
func (s *finHoldSink) checkAndRelease(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.recs {
		if got := finRows(r); fmt.Sprint(got) != fmt.Sprint(s.snaps[i]) {
			t.Errorf("output record %d changed after it was handed to the sink:\nthen %v\nnow  %v", i, s.snaps[i], got)
		}
		r.Release()
	}
	s.recs = nil
}

// finRef is the reference of one group.
type finRef struct {
	n, nv, sum, sumU int64
	hasV             bool
	mins, maxs       *string
	first, last      *string
	minv, lastv      *int64
	lastb            *bool
}

func (x *finRef) add(r revRow) {
	x.n++
	x.sumU += int64(r.u)
	if r.nulls&revNullV == 0 {
		v := r.v
		x.nv++
		x.sum += v
		x.hasV = true
		if x.minv == nil || v < *x.minv {
			x.minv = &v
		}
		x.lastv = &v
	}
	if r.nulls&revNullS == 0 {
		s := r.s
		if x.mins == nil || s < *x.mins {
			x.mins = &s
		}
		if x.maxs == nil || s > *x.maxs {
			x.maxs = &s
		}
		if x.first == nil {
			x.first = &s
		}
		x.last = &s
	}
	if r.nulls&revNullB == 0 {
		b := r.b
		x.lastb = &b
	}
}

func (x *finRef) row(key string) string {
	ps := func(p *string) string {
		if p == nil {
			return "(null)"
		}
		return *p
	}
	pn := func(p *int64) string {
		if p == nil {
			return "(null)"
		}
		return fmt.Sprint(*p)
	}
	sum, avg, lastb := "(null)", "(null)", "(null)"
	if x.hasV {
		sum = fmt.Sprint(x.sum)
		avg = fmt.Sprint(float64(x.sum) / float64(x.nv))
	}
	if x.lastb != nil {
		lastb = fmt.Sprint(*x.lastb)
	}
	return fmt.Sprintf("%s|%d|%d|%s|%s|%d|%s|%s|%s|%s|%s|%s|%s", key, x.n, x.nv, sum, avg, x.sumU, ps(x.mins), ps(x.maxs), ps(x.first), ps(x.last), pn(x.minv), pn(x.lastv), lastb)
}

func finAggs() []batch.Agg {
	return []batch.Agg{
		batch.CountRows().As("n"), batch.Count(batch.Col("v")).As("nv"), batch.Sum(batch.Col("v")).As("sum"),
		batch.Avg(batch.Col("v")).As("avg"), batch.Sum(batch.Col("u")).As("sum_u"),
		batch.Min(batch.Col("s")).As("min_s"), batch.Max(batch.Col("s")).As("max_s"),
		batch.First(batch.Col("s")).As("first_s"), batch.Last(batch.Col("s")).As("last_s"),
		batch.Min(batch.Col("v")).As("min_v"), batch.Last(batch.Col("v")).As("last_v"),
		batch.Last(batch.Col("b")).As("last_b"),
	}
}

// finScript makes batches over groups g0..g39 (and a null key and an
// "allnull" group whose values are all null): every group, exactly half,
// one fewer than half, new groups only, a large batch of new groups past
// the kernel's chunked size (big), then every group again.
func finScript(seed uint64, big int) [][][]revRow {
	r := rand.New(rand.NewPCG(seed, 7))
	strs := []string{"", "a", "zz", "a-much-longer-string-than-inline", "é", "A"}
	row := func(b int, key string) revRow {
		x := revRow{k: key, sec: int64(b*7) + r.Int64N(12), v: r.Int64N(2001) - 1000, s: strs[r.IntN(len(strs))],
			b: r.IntN(2) == 0, u: uint32(r.IntN(1 << 31))}
		if key == "" {
			x.nulls |= revNullK
		}
		if key == "allnull" {
			x.nulls |= revNullV | revNullS | revNullB
			return x
		}
		if r.IntN(5) == 0 {
			x.nulls |= revNullV
		}
		if r.IntN(4) == 0 {
			x.nulls |= revNullS
		}
		if r.IntN(4) == 0 {
			x.nulls |= revNullB
		}
		return x
	}
	keys := func(b int, names []string, per int) [][]revRow {
		var rows []revRow
		for i := range per {
			for j, k := range names {
				if (i+j)%3 == 0 || i == 0 {
					rows = append(rows, row(b, k))
				}
			}
		}
		r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		var recs [][]revRow
		for len(rows) > 0 {
			k := min(len(rows), 1+r.IntN(50))
			recs = append(recs, rows[:k])
			rows = rows[k:]
		}
		return recs
	}
	g := func(from, to int) []string {
		var s []string
		for i := from; i < to; i++ {
			s = append(s, fmt.Sprintf("g%d", i))
		}
		return s
	}
	base := append(g(0, 38), "", "allnull") // 40 groups
	var script [][][]revRow
	script = append(script, keys(0, base, 3))
	script = append(script, keys(1, base[:20], 2))         // exactly half
	script = append(script, keys(2, base[20:39], 2))       // one fewer than half
	script = append(script, keys(3, g(100, 140), 1))       // new groups only: 40 of 80
	script = append(script, keys(4, g(1000, 1000+big), 1)) // past the chunked size
	script = append(script, keys(5, append(base[5:7], g(1000, 1010)...), 2))
	script = append(script, keys(6, base, 1))
	return script
}

// finRunUpdate runs stream over script in update mode, restarted before
// every batch but the last three, with a checked allocator and a sink
// that holds what it gets; it checks every batch against the reference
// (rows per batch as a set, each record in first-touch order) and that
// nothing held changed and nothing leaked.
func finRunUpdate(t *testing.T, stream func(Source) *Stream, window bool, script [][][]revRow, parts int, knobs combineKnobs) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cp := localStore(t)
	sink := &finHoldSink{}
	refs := map[string]*finRef{}
	var want [][]string // per batch id: rows in first-touch order
	var wantOrder []map[string]int
	var wantState []map[string]int64 // per version: each group's row count
	keyOf := func(r revRow) string {
		k := r.k
		if r.nulls&revNullK != 0 {
			k = "(null)"
		}
		if window {
			ws := r.sec * 1000 / 10000 * 10000
			return fmt.Sprintf("%d|%d|%s", ws, ws+10000, k)
		}
		return k
	}
	for _, recs := range script {
		var order []string
		seen := map[string]int{}
		for _, rows := range recs {
			for _, r := range rows {
				k := keyOf(r)
				if refs[k] == nil {
					refs[k] = &finRef{}
				}
				refs[k].add(r)
				if _, ok := seen[k]; !ok {
					seen[k] = len(order)
					order = append(order, k)
				}
			}
		}
		var rows []string
		for _, k := range order {
			rows = append(rows, refs[k].row(k))
		}
		want = append(want, rows)
		wantOrder = append(wantOrder, seen)
		counts := map[string]int64{}
		for k, x := range refs {
			counts[k] = x.n
		}
		wantState = append(wantState, counts)
	}
	run := func(trig Trigger) {
		src := &revScript{name: "fin", batches: script}
		q, err := NewQuery(stream(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(trig), WithOutputMode(Update),
			WithStatePartitions(parts), WithSnapshotEvery(2), WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := q.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range len(script) - 3 {
		run(Once())
	}
	run(AvailableNow())
	if len(sink.ids) != len(script) {
		t.Fatalf("%d batches reached the sink, want %d", len(sink.ids), len(script))
	}
	for _, id := range sink.ids {
		var got []string
		for ri, rows := range sink.byID[id] {
			last := -1
			for _, row := range rows {
				k := row
				if n := strings.Count(keyOf(revRow{}), "|"); n >= 0 {
					parts := strings.SplitN(row, "|", n+2)
					k = strings.Join(parts[:n+1], "|")
				}
				pos, ok := wantOrder[id][k]
				if !ok {
					t.Fatalf("batch %d: group %q is not among the batch's groups", id, k)
				}
				if pos < last {
					t.Fatalf("batch %d record %d: group %q out of first-touch order: %v", id, ri, k, rows)
				}
				last = pos
			}
			got = append(got, rows...)
		}
		w := append([]string(nil), want[id]...)
		sort.Strings(got)
		sort.Strings(w)
		if len(got) != len(w) {
			t.Fatalf("batch %d: %d rows, want %d", id, len(got), len(w))
		}
		for i := range got {
			if got[i] != w[i] {
				t.Fatalf("batch %d: row %q, want %q", id, got[i], w[i])
			}
		}
	}
	finCheckState(t, cp, stream(&revScript{name: "fin", batches: script}), window, parts, wantState)
	var counts []int
	for _, w := range want {
		counts = append(counts, len(w))
	}
	t.Logf("rows a batch %v, %d groups", counts, len(refs))
	sink.checkAndRelease(t)
	mem.AssertSize(t, 0)
}

// finCheckState loads every state version of every partition of the
// query's one operator and checks that, all partitions together, it holds
// exactly the reference's groups with their row counts (the state's first
// column after the keys is CountRows' count): whole-state deltas in
// touched-first order and the changes after them load back to the state.
func finCheckState(t *testing.T, cp storage.Store, stream *Stream, window bool, parts int, want []map[string]int64) {
	t.Helper()
	ctx := context.Background()
	cfg := defaultConfig()
	cfg.mode = Update
	ex, err := bindStream(stream, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.release()
	c := ex.ops[0]
	spec := c.specs[0]
	nk := spec.key.NumFields()
	for v, w := range want {
		got := map[string]int64{}
		for p := range parts {
			st, err := statestore.Open(ctx, StateFolder(cp, c.op.id(), p, ""), statestore.Options{KeySchema: spec.key, ValueSchema: spec.value})
			if err != nil {
				t.Fatal(err)
			}
			recs, err := st.Load(ctx, int64(v))
			if err != nil {
				t.Fatalf("partition %d version %d: %v", p, v, err)
			}
			for _, r := range recs {
				for i := range int(r.NumRows()) {
					var ks []string
					for k := range nk {
						ks = append(ks, finCell(r.Column(k), i))
					}
					key := strings.Join(ks, "|")
					if _, dup := got[key]; dup {
						t.Fatalf("version %d: group %q twice in the state", v, key)
					}
					got[key] = r.Column(nk).(*array.Int64).Value(i)
				}
				r.Release()
			}
		}
		if len(got) != len(w) {
			t.Fatalf("version %d: %d groups in the state, want %d", v, len(got), len(w))
		}
		for k, n := range w {
			if got[k] != n {
				t.Fatalf("version %d: group %q has count %d in the state, want %d", v, k, got[k], n)
			}
		}
	}
}

// TestReviewFinUpdateHeldBySink: a group-by in update mode (whole-state
// and changes-only commits, exactly half the groups changed, a batch past
// the chunked size, null keys, all-null groups, restarts that load the
// whole-state deltas back) over 1 and 3 partitions, the combiner off, on
// and adaptive.
func TestReviewFinUpdateHeldBySink(t *testing.T) {
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("k").ID("agg").Agg(finAggs()...)
	}
	for _, parts := range []int{1, 3} {
		// One partition's GroupBy passes the chunked size (65536 groups)
		// in batch 4; over 3 partitions none would, so that batch is small.
		script := finScript(1, 66000)
		if parts > 1 {
			script = finScript(1, 3000)
		}
		for _, knobs := range []combineKnobs{{mode: combineOff}, {mode: combineOn}, {mode: combineAdaptive, probeRows: 16}} {
			t.Run(fmt.Sprintf("parts %d combine %d", parts, knobs.mode), func(t *testing.T) {
				finRunUpdate(t, stream, false, script, parts, knobs)
			})
		}
	}
}

// TestReviewFinWindowUpdateHeldBySink: the same with a tumbling window
// (no watermark: nothing evicted, the output built with the state).
func TestReviewFinWindowUpdateHeldBySink(t *testing.T) {
	script := finScript(2, 3000)
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupByWindow(TumblingWindow("ts", 10*time.Second), "k").ID("win").Agg(finAggs()...)
	}
	for _, parts := range []int{1, 3} {
		for _, knobs := range []combineKnobs{{mode: combineOff}, {mode: combineOn}} {
			t.Run(fmt.Sprintf("parts %d combine %d", parts, knobs.mode), func(t *testing.T) {
				finRunUpdate(t, stream, true, script, parts, knobs)
			})
		}
	}
}

// TestReviewFinChainsHeldBySink: the three-operator chains (aggregations
// fed by an aggregation, a Top, dedup and sessions: the second and third
// take Shared partitions of the first's output) restarted before every
// batch over 4 partitions, with a checked allocator and a sink that holds
// every record: the rows of each batch (sorted) equal one run over one
// partition, nothing held changes, nothing leaks.
func TestReviewFinChainsHeldBySink(t *testing.T) {
	for _, tc := range threeOpStreams {
		t.Run(tc.name, func(t *testing.T) {
			script := randomPayments(3, 12)
			run := func(parts int, restart bool, mem memory.Allocator) *finHoldSink {
				sink := &finHoldSink{}
				cp := localStore(t)
				runs, trig := 1, AvailableNow()
				if restart {
					runs, trig = len(script)+3, Once()
				}
				for range runs {
					if _, err := runQuery(t, tc.stream(&payScript{batches: script}), WithCheckpoint(cp), WithSink(sink),
						WithTrigger(trig), WithStatePartitions(parts), WithSnapshotEvery(2), WithAllocator(mem)); err != nil {
						t.Fatal(err)
					}
				}
				return sink
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			one := run(1, false, memory.NewGoAllocator())
			four := run(4, true, mem)
			rows := func(s *finHoldSink) string {
				var b strings.Builder
				for _, id := range s.ids {
					var all []string
					for _, r := range s.byID[id] {
						all = append(all, r...)
					}
					if len(all) == 0 {
						continue
					}
					sort.Strings(all)
					fmt.Fprintf(&b, "%d: %v\n", id, all)
				}
				return b.String()
			}
			a, b := rows(one), rows(four)
			if b == "" {
				t.Fatal("no output")
			}
			if a != b && !tc.orderDependent {
				t.Fatalf("1 partition in one run\n%s4 partitions restarted every batch\n%s", a, b)
			}
			one.checkAndRelease(t)
			four.checkAndRelease(t)
			mem.AssertSize(t, 0)
		})
	}
}

// TestReviewFinOperatorsAroundHeldBySink: aggregations in update mode
// around other operators (a join and a dedup feeding a group-by: the
// group-by's Shared partitions are cut from their output; sliding and
// tumbling windows; a union) with every aggregate type, restarted before
// every batch over 3 partitions with a checked allocator and a sink that
// holds every record, the combiner off and on: each batch's rows equal
// one run's over 3 partitions (in order), and one run's over one
// partition (sorted) where no first/last sees the rows of several
// partitions; nothing held changes, nothing leaks.
func TestReviewFinOperatorsAroundHeldBySink(t *testing.T) {
	cases := []struct {
		name     string
		sources  int
		orderDep bool // first/last over rows from several partitions
		stream   func([]Source) *Stream
	}{
		{"join then group by", 2, true, func(s []Source) *Stream {
			right := ReadStream(s[1]).Select(batch.As(batch.Col("k"), "rk"), batch.As(batch.Col("s"), "rs"), batch.As(batch.Col("v"), "rv"))
			return ReadStream(s[0]).Join(right, Inner, On("k", "rk")).ID("j").
				GroupBy("n", "rs").ID("g").Agg(batch.Sum(batch.Col("rv")).As("srv"), batch.Count(batch.Col("v")).As("cv"), batch.Max(batch.Col("s")).As("ms"), batch.First(batch.Col("rk")).As("fk"), batch.Last(batch.Col("u")).As("lu"))
		}},
		{"dedup then group by", 1, true, func(s []Source) *Stream {
			return ReadStream(s...).DropDuplicates("k", "s").ID("d").GroupBy("n").ID("g").Agg(revAggs()...)
		}},
		{"group by", 1, false, func(s []Source) *Stream {
			return ReadStream(s...).GroupBy("k", "n").ID("g").Agg(revAggs()...)
		}},
		{"tumbling window, union, no watermark", 2, false, func(s []Source) *Stream {
			return ReadStream(s...).GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("w").Agg(revAggs()...)
		}},
		{"group by under a watermark (no event-time key), then steps", 1, false, func(s []Source) *Stream {
			c := batch.Col
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupBy("k").ID("g").Agg(revAggs()...).
				Where(batch.Gt(c("rows"), batch.Lit(int64(1)))).
				WithColumn("x", batch.Concat(c("min_s"), c("max_s"), c("k"))).
				WithColumn("y", batch.Add(c("sum_v"), c("count_v"))).
				WithColumn("z", batch.Not(c("min_b")))
		}},
		{"sliding window under a watermark", 1, false, func(s []Source) *Stream {
			return ReadStream(s...).WithWatermark("ts", 5*time.Second).GroupByWindow(SlidingWindow("ts", 15*time.Second, 5*time.Second), "k").ID("w").Agg(revAggs()...)
		}},
	}
	for _, tc := range cases {
		for _, knobs := range []combineKnobs{{mode: combineOff}, {mode: combineOn}} {
			t.Run(fmt.Sprintf("%s/combine %d", tc.name, knobs.mode), func(t *testing.T) {
				var scripts [][][][]revRow
				for i := range tc.sources {
					scripts = append(scripts, revGen(uint64(11+i), 10))
				}
				mk := func() []Source {
					var srcs []Source
					for i, s := range scripts {
						srcs = append(srcs, &revScript{name: fmt.Sprint(i), batches: s})
					}
					return srcs
				}
				run := func(parts int, restart bool, mem memory.Allocator) *finHoldSink {
					sink := &finHoldSink{}
					cp := localStore(t)
					runs, trig := 1, AvailableNow()
					if restart {
						runs, trig = 13, Once()
					}
					for range runs {
						q, err := NewQuery(tc.stream(mk()), WithCheckpoint(cp), WithSink(sink), WithTrigger(trig), WithOutputMode(Update),
							WithStatePartitions(parts), WithSnapshotEvery(2), WithAllocator(mem))
						if err != nil {
							t.Fatal(err)
						}
						q.cfg.combine, q.cfg.partitionedAgg = knobs, !knobs.whole
						ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
						err = q.Run(ctx)
						cancel()
						if err != nil {
							t.Fatal(err)
						}
					}
					return sink
				}
				rows := func(s *finHoldSink, sorted bool) string {
					var b strings.Builder
					for _, id := range s.ids {
						var all []string
						for _, r := range s.byID[id] {
							all = append(all, r...)
						}
						if sorted {
							sort.Strings(all)
						}
						fmt.Fprintf(&b, "%d: %v\n", id, all)
					}
					return b.String()
				}
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				one := run(1, false, memory.NewGoAllocator())
				three := run(3, false, mem)
				restarted := run(3, true, mem)
				if a, b := rows(three, false), rows(restarted, false); a != b {
					t.Fatalf("3 partitions in one run\n%s3 partitions restarted every batch\n%s", a, b)
				}
				if a, b := rows(one, true), rows(three, true); a != b && !tc.orderDep {
					t.Fatalf("1 partition\n%s3 partitions\n%s", a, b)
				}
				if len(one.recs) == 0 {
					t.Fatal("no output")
				}
				one.checkAndRelease(t)
				three.checkAndRelease(t)
				restarted.checkAndRelease(t)
				mem.AssertSize(t, 0)
			})
		}
	}
}
