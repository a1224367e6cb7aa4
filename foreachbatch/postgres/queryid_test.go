package postgres

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/internal/testenv"
)

// Regression: the progress row was keyed by the job name only, so a new
// query on the same job (a new checkpoint, batch ids from 0 again) had its
// batches at or below the old progress skipped and acknowledged, and their
// payments never reached the table; now the other query is refused (at
// Start or at a batch, ErrOtherQuery) or all its batches are applied (k=2
// totals 23).
//
// Before the fix: the progress row is keyed by the user's job name only; Start
// ignores the query id. A query with a new checkpoint (lost or deleted
// checkpoint, or a second query given the same job) starts again at batch
// 0, and every batch id at or below the old progress is reported Skipped
// and acknowledged: the engine commits those batches and their payments
// never reach the table. The guard should record the query id in the
// progress row and refuse (at Start, or per batch) a query id that is not
// the row's owner.
func TestNewQueryOnSameJobSkipsNoBatch(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	write := func(query string, batches [][2][]int64) error {
		s, err := NewOffsetsInSink(pool, "job1", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx, query); err != nil {
			return err
		}
		if err := s.ValidateSchema(kvSchema); err != nil {
			t.Fatal(err)
		}
		for id, b := range batches {
			vals := make([]*int64, len(b[1]))
			for i, v := range b[1] {
				vals[i] = i64(v)
			}
			rec := kvRecord(t, mem, kvSchema, b[0], vals)
			err := s.AddBatch(ctx, int64(id), kvSchema, []arrow.RecordBatch{rec})
			rec.Release()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := write("query-A", [][2][]int64{{{1}, {10}}, {{1}, {10}}}); err != nil {
		t.Fatal(err)
	}
	// A new checkpoint: query-B, batch ids from 0 again.
	if err := write("query-B", [][2][]int64{{{2}, {5}}, {{2}, {7}}, {{2}, {11}}}); err != nil {
		return // refusing another query's job is a fix
	}
	got := totals(t, pool, "totals")
	if got[2] == nil || *got[2] != 23 {
		t.Fatalf("query-B's three batches were all acknowledged, but k=2 totals %v, want 23: batches 0 and 1 were skipped as query-A's", fmtTotal(got[2]))
	}
}

func fmtTotal(v *int64) any {
	if v == nil {
		return "missing"
	}
	return *v
}
