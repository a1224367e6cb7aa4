package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestAgreement runs every workload at a small scale through the engine
// and checks its answer against DuckDB (and the Go map for the
// aggregation), as the benchmark does at full scale.
func TestAgreement(t *testing.T) {
	for _, preload := range []string{"true", "false"} {
		t.Run("preload="+preload, func(t *testing.T) { testAgreement(t, preload) })
	}
}

func testAgreement(t *testing.T, preload string) {
	// 20,000 events at 1,000 per second are 20 s of event time: q7's
	// first 10 s window closes under the 1 s watermark, and q4 and q6
	// close auctions of up to 4 s (maxAuctionDuration at that rate).
	c, err := parseFlags([]string{"-events", "20000", "-events-per-second", "1000", "-rows", "60000", "-merchants", "997", "-preload=" + preload,
		"-batch-events", "5000", "-batch-rows", "15000", "-duckdb-threads", "1", "-reps", "2", "-isolate=false", "-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	results, err := runAll(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(workloads()) {
		t.Fatalf("%d results, want %d", len(results), len(workloads()))
	}
	for _, r := range results {
		t.Run(r.Workload, func(t *testing.T) {
			if r.Batches < 4 {
				t.Errorf("%d batches, want at least 4", r.Batches)
			}
			if len(r.References) == 0 {
				t.Fatal("no reference ran")
			}
			for _, ref := range r.References {
				if !ref.Agree {
					t.Errorf("%s disagrees: %s", ref.Name, ref.Diff)
				}
			}
			if !r.Agree {
				t.Error("result not marked as agreeing")
			}
			if strings.HasPrefix(r.Answer, "0 rows") || strings.HasPrefix(r.Answer, "0 groups") {
				t.Errorf("empty answer (%s): the agreement checks nothing", r.Answer)
			}
			t.Logf("%s: %s", r.Workload, r.Answer)
		})
	}
}

// TestDiffDetects checks that each kind of answer notices a difference, so
// the agreement above can fail.
func TestDiffDetects(t *testing.T) {
	cols := []colSum{{"a", kInt}, {"f", kFloat}}
	base := func() checksum {
		c := newChecksum(cols)
		c.rows, c.ints[0], c.floats[1] = 10, 55, 1.5
		return c
	}
	tests := []struct {
		name string
		a, b answer
	}{
		{"checksum rows", base(), func() answer { c := base(); c.rows++; return c }()},
		{"checksum int", base(), func() answer { c := base(); c.ints[0]++; return c }()},
		{"checksum float", base(), func() answer { c := base(); c.floats[1] += 1e-6; return c }()},
		{"totals value", groupTotals{"k": {1, 1}}, groupTotals{"k": {2, 1}}},
		{"totals missing", groupTotals{"k": {1, 1}}, groupTotals{"j": {1, 1}}},
		{"totals extra", groupTotals{"k": {1, 1}}, groupTotals{"k": {1, 1}, "j": {1, 1}}},
		{"int totals sum", keyTotals{-7: {5, 2}}, keyTotals{-7: {6, 2}}},
		{"int totals count", keyTotals{-7: {5, 2}}, keyTotals{-7: {5, 3}}},
		{"int totals key", keyTotals{-7: {5, 2}}, keyTotals{7: {5, 2}}},
		{"int totals missing", keyTotals{1: {5, 2}, 2: {1, 1}}, keyTotals{1: {5, 2}}},
		{"int vs string totals", keyTotals{1: {5, 2}}, groupTotals{"1": {5, 2}}},
		{"hot items", hotItems{0: {3, 1, 1000}}, hotItems{0: {3, 2, 2001}}},
		{"max prices", maxPrices{0: {7}}, maxPrices{0: {8}}},
		{"kind", maxPrices{0: {7}}, hotItems{0: {7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := tt.a.diff(tt.a); d != "" {
				t.Fatalf("an answer differs from itself: %s", d)
			}
			if d := tt.a.diff(tt.b); d == "" {
				t.Fatalf("%s and %s compare equal", tt.a.summary(), tt.b.summary())
			}
		})
	}
}

// TestSinksIgnoreRepeats replays batches into each sink, as the engine does
// after a crash, and checks the answer does not change.
func TestSinksIgnoreRepeats(t *testing.T) {
	c := &config{events: 20000, eventRate: 10000, rows: 20000, merchants: 50, batchEvents: 5000, batchRows: 5000}
	ctx := context.Background()
	for _, w := range workloads() {
		if w.name != "q0" && w.name != "agg" && w.name != "agg-int64" {
			continue
		}
		t.Run(w.name, func(t *testing.T) {
			next, err := inputRecords(ctx, c, w.input)
			if err != nil {
				t.Fatal(err)
			}
			var recs []arrow.RecordBatch
			for rec := next(); rec != nil; rec = next() {
				recs = append(recs, rec)
			}
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			switch w.name {
			case "agg":
				// The aggregation sink takes the engine's output columns:
				// key, total_cents (amount), payments (value as a stand-in).
				recs = renameForTotals(recs, []int{3, 4, 1})
			case "agg-int64":
				recs = renameForTotals(recs, []int{0, 1, 1})
			}
			once, twice := w.sink(c), w.sink(c)
			for i, rec := range recs {
				if err := once.AddBatch(ctx, int64(i), rec.Schema(), []arrow.RecordBatch{rec}); err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if err := twice.AddBatch(ctx, int64(i), rec.Schema(), []arrow.RecordBatch{rec}); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := once.answer()
			if b, ok := want.(badAnswer); ok {
				t.Fatal(b.summary())
			}
			if d := twice.answer().diff(want); d != "" {
				t.Fatalf("repeated batches changed the answer: %s", d)
			}
		})
	}
}

// renameForTotals releases recs and returns their columns cols renamed to
// the aggregation's output: key, total_cents, payments.
func renameForTotals(recs []arrow.RecordBatch, cols []int) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, 0, len(recs))
	for _, rec := range recs {
		p := project(rec, cols)
		rec.Release()
		fields := p.Schema().Fields()
		fields[1].Name, fields[2].Name = "total_cents", "payments"
		out = append(out, renamed(p, fields))
		p.Release()
	}
	return out
}

func renamed(rec arrow.RecordBatch, fields []arrow.Field) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = rec.Column(i)
	}
	return newRec(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

func TestChildArgs(t *testing.T) {
	got := strings.Join(childArgs([]string{"-events", "5", "-queries", "q0,q1", "-json", "--queries=q2"}, "q1"), " ")
	if want := "-child -queries q1 -events 5 -json"; got != want {
		t.Fatalf("childArgs = %q, want %q", got, want)
	}
}

// TestIntPaySource checks the kernel's generator: the same rows whatever
// the reads' split, every row's key one of the merchant ids, keys not
// clustered, amounts in range, and bad offsets refused.
func TestIntPaySource(t *testing.T) {
	ctx := context.Background()
	const rows, merchants = 20000, 300
	readAll := func(t *testing.T, s *intPaySource, a, b int64, step int64) (ks, amts []int64) {
		t.Helper()
		for from := a; from < b; from += step {
			to := min(from+step, b)
			err := s.Read(ctx, rowsOffset(from), rowsOffset(to), func(rec arrow.RecordBatch) error {
				if rec.NumRows() > s.chunk {
					t.Fatalf("record of %d rows, chunk %d", rec.NumRows(), s.chunk)
				}
				ks = append(ks, rec.Column(0).(*array.Int64).Int64Values()...)
				amts = append(amts, rec.Column(1).(*array.Int64).Int64Values()...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return ks, amts
	}
	whole := newIntPaySource(rows, merchants, rows, rows, false)
	wantK, wantA := readAll(t, whole, 0, rows, rows)
	if len(wantK) != rows {
		t.Fatalf("%d rows, want %d", len(wantK), rows)
	}
	for _, tt := range []struct {
		name              string
		chunk, step, from int64
	}{
		{"small chunks", 7, rows, 0},
		{"ragged reads", 1000, 333, 0},
		{"from the middle", 64, 999, 12345},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newIntPaySource(rows, merchants, rows, tt.chunk, false)
			k, a := readAll(t, s, tt.from, rows, tt.step)
			if !slices.Equal(k, wantK[tt.from:]) || !slices.Equal(a, wantA[tt.from:]) {
				t.Fatal("rows differ from a single read of the same range")
			}
		})
	}
	ids := map[int64]int{}
	for _, id := range whole.ids {
		ids[id]++
	}
	if len(ids) != merchants {
		t.Fatalf("%d distinct merchant ids, want %d", len(ids), merchants)
	}
	seen, repeats := map[int64]int{}, 0
	for i, k := range wantK {
		if _, ok := ids[k]; !ok {
			t.Fatalf("row %d: key %d is not a merchant id", i, k)
		}
		if i > 0 && k == wantK[i-1] {
			repeats++
		}
		seen[k]++
		if a := wantA[i]; a < 1 || a > intPayMaxAmount {
			t.Fatalf("row %d: amount %d outside [1, %d]", i, a, intPayMaxAmount)
		}
	}
	// Uniform draws: every merchant about rows/merchants (66) times, and a
	// key repeats its predecessor about rows/merchants times in all.
	if len(seen) != merchants {
		t.Errorf("%d merchants drawn, want all %d", len(seen), merchants)
	}
	for k, n := range seen {
		if n < 20 || n > 140 {
			t.Errorf("merchant %d drawn %d times, want about %d", k, n, rows/merchants)
		}
	}
	if repeats > 4*rows/merchants {
		t.Errorf("%d rows repeat the previous key: clustered", repeats)
	}
	for _, off := range []string{`{"rows":-1}`, `{"rows":20001}`, `{}`, `x`} {
		if err := whole.Read(ctx, json.RawMessage(off), rowsOffset(rows), func(arrow.RecordBatch) error { return nil }); err == nil {
			t.Errorf("Read from %s: no error", off)
		}
	}
	if err := whole.Read(ctx, rowsOffset(10), rowsOffset(5), func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Error("Read of a backwards range: no error")
	}
}

// TestKernelAgreesWithGoMap feeds the kernel and the Go map the same
// records and checks they agree, and that a changed row makes them differ.
func TestKernelAgreesWithGoMap(t *testing.T) {
	for _, dense := range []bool{false, true} {
		t.Run(fmt.Sprintf("dense=%v", dense), func(t *testing.T) { testKernelAgreesWithGoMap(t, dense) })
	}
}

func testKernelAgreesWithGoMap(t *testing.T, dense bool) {
	s := newIntPaySource(30000, 500, 30000, 4096, dense)
	var recs []arrow.RecordBatch
	for a := int64(0); a < s.rows; a += s.chunk {
		recs = append(recs, s.record(a, min(a+s.chunk, s.rows)))
	}
	defer releaseAll(recs)
	answerOf := func(fn refFunc, recs []arrow.RecordBatch) answer {
		t.Helper()
		finish, err := fn(recs)
		if err != nil {
			t.Fatal(err)
		}
		return finish()
	}
	kernel, goMap := answerOf(kernelTotals, recs), answerOf(goMapInt64Totals, recs)
	if d := kernel.diff(goMap); d != "" {
		t.Fatalf("kernel and Go map disagree: %s", d)
	}
	if got := kernel.summary(); !strings.HasPrefix(got, "500 groups, 30000 rows") {
		t.Fatalf("kernel answer %s, want 500 groups over 30000 rows", got)
	}
	// One amount changed by a cent in the last record.
	last := recs[len(recs)-1]
	amts := slices.Clone(last.Column(1).(*array.Int64).Int64Values())
	amts[len(amts)-1]++
	b := array.NewInt64Builder(memory.NewGoAllocator())
	b.AppendValues(amts, nil)
	ac := b.NewArray()
	b.Release()
	changed := newRec(last.Schema(), []arrow.Array{last.Column(0), ac}, last.NumRows())
	ac.Release()
	defer changed.Release()
	other := append(slices.Clone(recs[:len(recs)-1]), changed)
	if d := answerOf(kernelTotals, other).diff(goMap); !strings.Contains(d, "1 groups differ") {
		t.Fatalf("a changed amount: diff %q, want one group differing", d)
	}
}

func TestMedianRun(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		cpus     []time.Duration
		wantCPU  time.Duration
		wantWall time.Duration // wall is 10x the CPU of the same call
	}{
		{"one", []time.Duration{3 * ms}, 3 * ms, 30 * ms},
		{"odd", []time.Duration{9 * ms, 1 * ms, 5 * ms}, 5 * ms, 50 * ms},
		{"even takes the upper", []time.Duration{4 * ms, 1 * ms, 2 * ms, 3 * ms}, 3 * ms, 30 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			wall, cpu, err := medianRun(len(tt.cpus), func() (time.Duration, time.Duration, error) {
				c := tt.cpus[i]
				i++
				return 10 * c, c, nil
			})
			if err != nil || cpu != tt.wantCPU || wall != tt.wantWall || i != len(tt.cpus) {
				t.Fatalf("medianRun = %v, %v, %v after %d calls; want %v, %v", wall, cpu, err, i, tt.wantWall, tt.wantCPU)
			}
		})
	}
	if _, _, err := medianRun(3, func() (time.Duration, time.Duration, error) { return 0, 0, errors.New("boom") }); err == nil {
		t.Fatal("medianRun dropped an error")
	}
}
