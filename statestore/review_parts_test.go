package statestore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Review of the stores' side of one working table's split commit
// (kernel.GroupBy.StateOutputParts): each partition's store now encodes a
// slice of one record (rows at a non-zero offset of buffers shared with
// the other partitions) where it encoded a record of its own. A file
// written from a piece must decode to the piece's rows, whatever the
// offset (bitmaps cut mid-byte, string offsets that do not start at 0,
// lists whose values start mid-array), and approxSize must size the
// encoder by the piece's rows, not by the record it is cut from.

// rpKey and rpValue are a state of the shape a group-by commits: nullable
// keys, then the aggregates' state columns (sums, an average's sum and
// count, picks of every type, a count distinct's list).
var (
	rpKey = arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	rpValue = arrow.NewSchema([]arrow.Field{
		{Name: "sv", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "av.sum", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "av.count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "fb", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ll", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "lbin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "mts", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 3}, Nullable: true},
		{Name: "ds", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "dv", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
)

// rpRecord is rows state rows, key i at row i.
func rpRecord(mem memory.Allocator, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Join(rpKey, rpValue))
	defer b.Release()
	for i := range rows {
		null := func(m int) bool { return i%m == m-1 }
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("key-%05d", i))
		if null(9) {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(int32(i % 5))
		}
		if null(3) {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(int64(i) * 1001)
		}
		switch {
		case null(4):
			b.Field(3).AppendNull()
		case i%7 == 1:
			b.Field(3).(*array.Float64Builder).Append(math.NaN())
		default:
			b.Field(3).(*array.Float64Builder).Append(float64(i) / 3)
		}
		b.Field(4).(*array.Int64Builder).Append(int64(i % 11))
		if null(5) {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.BooleanBuilder).Append(i%3 == 0)
		}
		if null(6) {
			b.Field(6).AppendNull()
		} else {
			b.Field(6).(*array.StringBuilder).Append(fmt.Sprintf("last-%d-%s", i, string(rune('a'+i%26))))
		}
		if null(7) {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.LargeStringBuilder).Append(fmt.Sprintf("large-%d", i*i))
		}
		if null(8) {
			b.Field(8).AppendNull()
		} else {
			b.Field(8).(*array.BinaryBuilder).Append([]byte{byte(i), 0, byte(i >> 8)})
		}
		if null(10) {
			b.Field(9).AppendNull()
		} else {
			b.Field(9).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i) * 1000))
		}
		if null(11) {
			b.Field(10).AppendNull()
		} else {
			b.Field(10).(*array.Decimal128Builder).Append(decimal128.New(int64(-i), uint64(i)*7))
		}
		ds := b.Field(11).(*array.ListBuilder)
		if null(12) {
			ds.AppendNull()
		} else {
			ds.Append(true)
			for j := range i % 4 {
				ds.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("d%d", i+j))
			}
		}
		dv := b.Field(12).(*array.ListBuilder)
		if null(13) {
			dv.AppendNull()
		} else {
			dv.Append(true)
			for j := range i % 3 {
				dv.ValueBuilder().(*array.Int64Builder).Append(int64(i * j))
			}
		}
	}
	return b.NewRecordBatch()
}

// rpRows renders rec's rows, one string each.
func rpRows(rec arrow.RecordBatch) []string {
	rows := make([]string, rec.NumRows())
	for i := range rows {
		for _, c := range rec.Columns() {
			rows[i] += c.ValueStr(i) + "|"
		}
	}
	return rows
}

// rpCopy is rec with buffers of its own (offset 0): the rows a piece holds,
// as the partitioned path gave them.
func rpCopy(t *testing.T, mem memory.Allocator, rec arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		cp, err := array.Concatenate([]arrow.Array{c}, mem)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = cp
	}
	out := array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// rpCuts are the pieces' bounds: empty, one row, bitmaps cut mid-byte, a
// piece at the end.
var rpCuts = []int{0, 0, 1, 3, 10, 17, 64, 65, 130, 131, 200, 257, 300}

// TestReviewPartsSlicedPiecesRoundTrip: each piece of a record (a slice at
// its offset) committed to its own store, as an ordinary delta, as a full
// delta, and with deletes that are slices too, loads back as its rows; the
// file holds the rows the piece's copy would (the same rows decode from
// either), and a snapshot over them too.
func TestReviewPartsSlicedPiecesRoundTrip(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	rec := rpRecord(mem, rpCuts[len(rpCuts)-1])
	defer rec.Release()
	keys := array.NewRecordBatch(rpKey, rec.Columns()[:2], rec.NumRows())
	defer keys.Release()
	for i := 1; i < len(rpCuts); i++ {
		lo, hi := int64(rpCuts[i-1]), int64(rpCuts[i])
		t.Run(fmt.Sprintf("rows %d-%d", lo, hi), func(t *testing.T) {
			piece := rec.NewSlice(lo, hi)
			defer piece.Release()
			cp := rpCopy(t, mem, piece)
			defer cp.Release()
			want := rpRows(cp)
			if got := rpRows(piece); !slices.Equal(got, want) {
				t.Fatalf("the piece reads %v, its copy %v", got, want)
			}
			for _, full := range []bool{false, true} {
				s, err := Open(ctx, newLocal(t, t.TempDir()), Options{KeySchema: rpKey, ValueSchema: rpValue, Allocator: mem, SnapshotEvery: 2})
				if err != nil {
					t.Fatal(err)
				}
				commit := s.Commit
				if full {
					commit = func(ctx context.Context, v int64, ups, _ arrow.RecordBatch) error { return s.CommitFull(ctx, v, ups) }
				}
				if err := commit(ctx, 0, piece, nil); err != nil {
					t.Fatal(err)
				}
				load := func(v int64) []string {
					t.Helper()
					recs, err := s.Load(ctx, v)
					if err != nil {
						t.Fatal(err)
					}
					var rows []string
					for _, r := range recs {
						rows = append(rows, rpRows(r)...)
						r.Release()
					}
					slices.Sort(rows)
					return rows
				}
				sorted := slices.Sorted(slices.Values(want))
				if got := load(0); !slices.Equal(got, sorted) {
					t.Fatalf("full=%v: version 0 loads\n%v\nwant\n%v", full, got, sorted)
				}
				// Version 1 deletes every other key of the piece, given as
				// slices of the keys too.
				var kept []string
				for j := lo; j < hi; j += 2 {
					del := keys.NewSlice(j, j+1)
					err := s.Commit(ctx, 1+(j-lo)/2, nil, del)
					del.Release()
					if err != nil {
						t.Fatal(err)
					}
				}
				for j := lo + 1; j < hi; j += 2 {
					kept = append(kept, want[j-lo])
				}
				last := (hi - lo + 1) / 2
				if err := s.Maintain(ctx, last); err != nil {
					t.Fatal(err)
				}
				slices.Sort(kept)
				if got := load(last); !slices.Equal(got, kept) {
					t.Fatalf("full=%v: after the deletes, version %d loads\n%v\nwant\n%v", full, last, got, kept)
				}
			}
		})
	}
}

// TestReviewPartsSlicedFileIsCopysFile: the file encoded from a piece
// decodes to exactly the records the file of its copy decodes to, column
// by column (not only value by value: the same null counts, the same
// lengths).
func TestReviewPartsSlicedFileIsCopysFile(t *testing.T) {
	mem := newMem(t)
	rec := rpRecord(mem, 300)
	defer rec.Release()
	sch := Join(rpKey, rpValue)
	for i := 1; i < len(rpCuts); i++ {
		lo, hi := int64(rpCuts[i-1]), int64(rpCuts[i])
		if lo == hi {
			continue
		}
		piece := rec.NewSlice(lo, hi)
		cp := rpCopy(t, mem, piece)
		decode := func(r arrow.RecordBatch) []arrow.RecordBatch {
			t.Helper()
			data, err := encodeFile(kindDelta, 7, []section{{schema: sch, recs: []arrow.RecordBatch{r}}, {schema: rpKey}}, mem)
			if err != nil {
				t.Fatal(err)
			}
			f, err := decodeFile("test", data, mem)
			if err != nil {
				t.Fatal(err)
			}
			recs := f.sections[0].recs
			f.sections[0].recs = nil
			f.release()
			return recs
		}
		got, want := decode(piece), decode(cp)
		if len(got) != 1 || len(want) != 1 {
			t.Fatalf("rows %d-%d: %d and %d records", lo, hi, len(got), len(want))
		}
		if !array.RecordApproxEqual(got[0], want[0], array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Errorf("rows %d-%d: the piece's file decodes to\n%v\nits copy's to\n%v", lo, hi, got[0], want[0])
		}
		for c := range got[0].Columns() {
			if g, w := got[0].Column(c).NullN(), want[0].Column(c).NullN(); g != w {
				t.Errorf("rows %d-%d column %s: %d nulls decoded from the piece, %d from its copy", lo, hi, sch.Field(c).Name, g, w)
			}
		}
		for _, r := range append(got, want...) {
			r.Release()
		}
		piece.Release()
		cp.Release()
	}
}

// TestReviewPartsApproxSizeOfSlicedState: the eight pieces of a state
// record split by partition (slices of one record) are estimated at about
// the whole record, for every column of a group-by's state: a count
// distinct keeps a list per group, and a slice of a list array shares the
// whole values array.
func TestReviewPartsApproxSizeOfSlicedState(t *testing.T) {
	mem := newMem(t)
	const rows = 4000
	rec := rpRecord(mem, rows)
	defer rec.Release()
	for c, f := range rec.Schema().Fields() {
		col := rec.Column(c)
		whole := approxSize(col.Data())
		pieces := 0
		for p := range 8 {
			s := array.NewSlice(col, int64(p*rows/8), int64((p+1)*rows/8))
			pieces += approxSize(s.Data())
			s.Release()
		}
		if pieces > whole+whole/8+8*64 {
			t.Errorf("column %s (%s): eight slices estimated at %d bytes in all, the whole column at %d", f.Name, f.Type, pieces, whole)
		}
	}
}
