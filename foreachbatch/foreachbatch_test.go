package foreachbatch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/foreachbatch"
)

// TestGuardPattern is the pattern the package documentation asks for: the
// function remembers the last batch id it applied and skips repeats.
func TestGuardPattern(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "amount", Type: arrow.PrimitiveTypes.Int64}}, nil)

	var ledger int64
	lastApplied := int64(-1) // in real code: stored atomically with ledger
	calls := 0
	s := foreachbatch.New(func(ctx context.Context, batchID int64, schema *arrow.Schema, recs []arrow.RecordBatch) error {
		calls++
		if batchID <= lastApplied {
			return nil
		}
		for _, r := range recs {
			for _, v := range r.Column(0).(*array.Int64).Int64Values() {
				ledger += v
			}
		}
		lastApplied = batchID
		return nil
	}, foreachbatch.WithIdempotent())

	b := array.NewInt64Builder(mem)
	b.AppendValues([]int64{5, 7}, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	col.Release()
	defer rec.Release()

	for _, id := range []int64{0, 0, 1, 1, 1, 2} {
		if err := s.AddBatch(context.Background(), id, schema, []arrow.RecordBatch{rec}); err != nil {
			t.Fatal(err)
		}
	}
	if ledger != 36 || calls != 6 {
		t.Fatalf("ledger %d after %d calls, want 36 after 6", ledger, calls)
	}
	if s.Guarantee() != contract.ExactlyOnce {
		t.Errorf("guarantee %q", s.Guarantee())
	}
}

func TestOptionsAndErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		opts      []foreachbatch.Option
		fnErr     error
		wantG     contract.Guarantee
		wantStart error
		wantCheck error
	}{
		{"defaults", nil, nil, contract.AtLeastOnce, nil, nil},
		{"function error wrapped", nil, boom, contract.AtLeastOnce, nil, nil},
		{"start and check", []foreachbatch.Option{
			foreachbatch.WithStart(func(context.Context, string) error { return boom }),
			foreachbatch.WithSchemaCheck(func(*arrow.Schema) error { return boom }),
			foreachbatch.WithIdempotent(),
		}, nil, contract.ExactlyOnce, boom, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := foreachbatch.New(func(context.Context, int64, *arrow.Schema, []arrow.RecordBatch) error { return tc.fnErr }, tc.opts...)
			err := s.AddBatch(context.Background(), 3, nil, nil)
			if !errors.Is(err, tc.fnErr) || (tc.fnErr != nil && err.Error() != "foreachbatch: batch 3: boom") {
				t.Errorf("AddBatch err = %v", err)
			}
			if g := s.Guarantee(); g != tc.wantG {
				t.Errorf("guarantee %q, want %q", g, tc.wantG)
			}
			if err := s.Start(context.Background(), "q"); !errors.Is(err, tc.wantStart) {
				t.Errorf("Start err = %v", err)
			}
			if err := s.ValidateSchema(nil); !errors.Is(err, tc.wantCheck) {
				t.Errorf("ValidateSchema err = %v", err)
			}
		})
	}
}
