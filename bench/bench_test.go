package main

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
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
	c, err := parseFlags([]string{"-events", "60000", "-rows", "60000", "-merchants", "997", "-preload=" + preload,
		"-batch-events", "15000", "-batch-rows", "15000", "-duckdb-threads", "1", "-isolate=false", "-dir", t.TempDir()})
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
	c := &config{events: 20000, rows: 20000, merchants: 50, batchEvents: 5000, batchRows: 5000}
	ctx := context.Background()
	for _, w := range workloads() {
		if w.name != "q0" && w.name != "agg" {
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
			if w.name == "agg" {
				// The aggregation sink takes the engine's output columns.
				recs = renameForTotals(t, recs)
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
			if d := twice.answer().diff(once.answer()); d != "" {
				t.Fatalf("repeated batches changed the answer: %s", d)
			}
		})
	}
}

func renameForTotals(t *testing.T, recs []arrow.RecordBatch) []arrow.RecordBatch {
	t.Helper()
	out := make([]arrow.RecordBatch, 0, len(recs))
	for _, rec := range recs {
		// key, total_cents (amount), payments (value as a stand-in count).
		p := project(rec, []int{3, 4, 1})
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
