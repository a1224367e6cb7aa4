package statestore

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// keyColumn is a key column type and a small domain of its values (index 0
// is null when the column is nullable).
type keyColumn struct {
	field  arrow.Field
	n      int
	append func(b array.Builder, v int)
}

var keyColumns = []keyColumn{
	{arrow.Field{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}, 3, func(b array.Builder, v int) {
		if v == 0 {
			b.AppendNull()
			return
		}
		b.(*array.BooleanBuilder).Append(v == 2)
	}},
	{arrow.Field{Name: "s1", Type: arrow.BinaryTypes.LargeString, Nullable: true}, 4, func(b array.Builder, v int) {
		if v == 0 {
			b.AppendNull()
			return
		}
		b.(*array.LargeStringBuilder).Append([]string{"", "", "a", "ab"}[v])
	}},
	{arrow.Field{Name: "s2", Type: arrow.BinaryTypes.String}, 3, func(b array.Builder, v int) {
		b.(*array.StringBuilder).Append([]string{"", "bc", "c"}[v]) // "a"+"bc" vs "ab"+"c"
	}},
	{arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64}, 3, func(b array.Builder, v int) {
		b.(*array.Float64Builder).Append([]float64{0, 1.5, -2}[v])
	}},
	{arrow.Field{Name: "st", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "z", Type: arrow.BinaryTypes.Binary, Nullable: true}), Nullable: true}, 4, func(b array.Builder, v int) {
		sb := b.(*array.StructBuilder)
		if v == 0 {
			sb.AppendNull()
			return
		}
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(v % 2))
		if v == 3 {
			sb.FieldBuilder(1).AppendNull()
		} else {
			sb.FieldBuilder(1).(*array.BinaryBuilder).Append([]byte{byte(v)})
		}
	}},
	{arrow.Field{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}}, 2, func(b array.Builder, v int) {
		b.(*array.FixedSizeBinaryBuilder).Append([]byte{1, 2, byte(v)})
	}},
	{arrow.Field{Name: "d", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true}, 3, func(b array.Builder, v int) {
		if v == 0 {
			b.AppendNull()
			return
		}
		b.(*array.Decimal128Builder).Append(decimal128.FromI64(int64(v) * 100))
	}},
}

// TestKeyTypes stores keys of every supported kind, with nulls and values
// that a naive concatenation would confuse, and checks that distinct keys
// stay distinct through deltas and snapshots.
func TestKeyTypes(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	var fields []arrow.Field
	for _, c := range keyColumns {
		fields = append(fields, c.field)
	}
	key := arrow.NewSchema(fields, nil)
	value := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s, err := Open(ctx, newLocal(t, t.TempDir()), Options{KeySchema: key, ValueSchema: value, SnapshotEvery: 2, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	type tuple [7]int
	build := func(schema *arrow.Schema, keys []tuple, vals []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i, k := range keys {
			for c, kc := range keyColumns {
				kc.append(b.Field(c), k[c])
			}
			if vals != nil {
				b.Field(len(keyColumns)).(*array.Int64Builder).Append(vals[i])
			}
		}
		return b.NewRecordBatch()
	}
	// asMap renders rows as formatted key → value.
	asMap := func(recs []arrow.RecordBatch) map[string]int64 {
		out := map[string]int64{}
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				k := formatKey(r, len(keyColumns), i)
				if _, dup := out[k]; dup {
					t.Fatalf("key %s twice in Load output", k)
				}
				out[k] = r.Column(len(keyColumns)).(*array.Int64).Value(i)
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(11, 11))
	model := map[tuple]int64{}
	for v := int64(0); v < 7; v++ {
		var ups, dels []tuple
		var vals []int64
		seen := map[tuple]bool{}
		for i := 0; i < 200; i++ {
			var k tuple
			for c, kc := range keyColumns {
				k[c] = rng.IntN(kc.n)
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			if _, ok := model[k]; ok && rng.IntN(3) == 0 {
				dels = append(dels, k)
				delete(model, k)
				continue
			}
			ups = append(ups, k)
			vals = append(vals, v*1000+int64(i))
			model[k] = v*1000 + int64(i)
		}
		u, d := build(s.Schema(), ups, vals), build(key, dels, nil)
		err := s.Commit(ctx, v, u, d)
		u.Release()
		d.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Load(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		checkKeyOrder(t, recs, len(keyColumns))
		got := asMap(recs)
		releaseAll(recs)
		keys := make([]tuple, 0, len(model))
		var mvals []int64
		for k, val := range model {
			keys = append(keys, k)
			mvals = append(mvals, val)
		}
		m := build(s.Schema(), keys, mvals)
		want := asMap([]arrow.RecordBatch{m})
		m.Release()
		if len(want) != len(model) {
			t.Fatalf("test bug: formatted keys collide (%d of %d)", len(want), len(model))
		}
		if !maps.Equal(got, want) {
			t.Fatalf("version %d: got %d rows, want %d", v, len(got), len(want))
		}
	}
}

func TestKeyEncodingDistinguishesNullAndSlices(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"x", "ab", "a", ""}, nil)
	sb.AppendNull()
	arr := sb.NewArray()
	sb.Release()
	defer arr.Release()
	sl := array.NewSlice(arr, 1, 5) // offsets must be honoured
	defer sl.Release()
	enc := newColEncoder(sl)
	seen := map[string]int{}
	for i := 0; i < sl.Len(); i++ {
		k := string(enc(nil, i))
		if j, dup := seen[k]; dup {
			t.Fatalf("rows %d and %d encode alike: %q", i, j, k)
		}
		seen[k] = i
	}
	if got := fmt.Sprintf("%q", enc(nil, 0)); got != `"\x01ab\x00\x01"` {
		t.Fatalf("encoding of \"ab\" = %s", got)
	}
}

// TestKeyEncodingExample pins the example in docs/format/state.md.
func TestKeyEncodingExample(t *testing.T) {
	mem := newMem(t)
	u := buildUpserts(mem, []row{{user: "ab", shard: 1}})
	defer u.Release()
	if got := fmt.Sprintf("% x", newKeyEncoder(u, 2).encode(nil, 0)); got != "01 61 62 00 01 01 80 00 00 00 00 00 00 01" {
		t.Fatalf("encoding of (\"ab\", 1) = %s", got)
	}
}

// TestViewTypes stores view-typed keys and values, which the gather path
// handles without the take kernels.
func TestViewTypes(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	key := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.StringView}}, nil)
	value := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.BinaryView}}, nil)
	s, err := Open(ctx, newLocal(t, t.TempDir()), Options{KeySchema: key, ValueSchema: value, SnapshotEvery: 3, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for v := int64(0); v < 5; v++ {
		b := array.NewRecordBuilder(mem, s.Schema())
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("key-%03d-a-long-enough-string-to-leave-the-view-inline-part", i*5+int(v))
			val := fmt.Sprintf("value %d of version %d", i, v)
			if i%7 == 0 {
				k = fmt.Sprintf("key-%03d", i) // short, inline, and upserted again by every version
			}
			b.Field(0).(*array.StringViewBuilder).Append(k)
			b.Field(1).(*array.BinaryViewBuilder).Append([]byte(val))
			want[k] = val
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := s.Commit(ctx, v, rec, nil)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Load(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		checkKeyOrder(t, recs, 1)
		got := map[string]string{}
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				got[r.Column(0).(*array.StringView).Value(i)] = string(r.Column(1).(*array.BinaryView).Value(i))
			}
		}
		releaseAll(recs)
		if !maps.Equal(got, want) {
			t.Fatalf("version %d: got %d rows, want %d", v, len(got), len(want))
		}
	}
}
