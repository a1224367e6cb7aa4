package statestore

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestApproxSizeOfSlices: the encoder's buffer is sized by a piece's own
// rows, so the eight pieces of a record split by partition (slices of
// one record) together estimate about the whole record, not eight times
// it, and the estimate of a whole array is at least its data.
func TestApproxSizeOfSlices(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "lk", Type: arrow.BinaryTypes.LargeString},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	const rows = 80000
	for i := range rows {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("merchant-%06d", i))
		b.Field(1).(*array.LargeStringBuilder).Append(fmt.Sprintf("m-%d", i))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
		b.Field(3).(*array.BooleanBuilder).Append(i%2 == 0)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	size := func(r arrow.RecordBatch) int {
		n := 0
		for _, c := range r.Columns() {
			n += approxSize(c.Data())
		}
		return n
	}
	whole := size(rec)
	data := rows*(15+4) + rows*(8+3) + rows*8 + rows/8 // strings of 15 and at least 3 bytes
	if whole < data {
		t.Fatalf("whole record estimated at %d bytes, its data is at least %d", whole, data)
	}
	pieces := 0
	for p := range 8 {
		s := rec.NewSlice(int64(p*rows/8), int64((p+1)*rows/8))
		pieces += size(s)
		s.Release()
	}
	if pieces > whole+whole/8 {
		t.Fatalf("eight slices estimated at %d bytes in all, the whole record at %d", pieces, whole)
	}
}
