package iceberg

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// widen appends null columns for the fields of sc that rec lacks.
func widen(t testing.TB, rec arrow.RecordBatch, sc *arrow.Schema) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		if idx := rec.Schema().FieldIndices(f.Name); len(idx) > 0 {
			cols[i] = rec.Column(idx[0])
			continue
		}
		n := array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows()))
		defer n.Release()
		cols[i] = n
	}
	return array.NewRecordBatch(sc, cols, rec.NumRows())
}
