package statestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestValueTypesSnapshotOrRefuse checks that a value type the store
// accepts at Open survives commits, snapshots and loads: a type it cannot
// merge (arrow-go concatenates no unions) must be refused at Open, not
// after K batches, when Maintain and every later Load fail and the query
// can neither go on nor restart.
func TestValueTypesSnapshotOrRefuse(t *testing.T) {
	union := arrow.DenseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, []arrow.UnionTypeCode{0})
	sparse := arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, []arrow.UnionTypeCode{0})
	for _, tc := range []struct {
		vt     arrow.DataType
		refuse bool // Open may refuse it, naming the column
	}{
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, false},
		{arrow.BinaryTypes.StringView, false},
		{arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String), false},
		{arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), false},
		{union, true},
		{sparse, true},
		{arrow.ListOf(union), true},
		{arrow.StructOf(arrow.Field{Name: "u", Type: sparse, Nullable: true}), true},
	} {
		t.Run(tc.vt.String(), func(t *testing.T) {
			mem := newMem(t)
			ctx := context.Background()
			ks := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
			vs := arrow.NewSchema([]arrow.Field{{Name: "v", Type: tc.vt, Nullable: true}}, nil)
			s, err := Open(ctx, newLocal(t, t.TempDir()), Options{KeySchema: ks, ValueSchema: vs, SnapshotEvery: 2, SnapshotDeltaRatio: 1e-9, Allocator: mem})
			if err != nil {
				if !tc.refuse || !strings.Contains(err.Error(), `value column "v"`) || !strings.Contains(err.Error(), "union") {
					t.Fatalf("Open with value type %s: %v", tc.vt, err)
				}
				return
			}
			s.snapshotRows = 3
			want := map[int64]string{}
			for v := int64(0); v < 6; v++ {
				b := array.NewRecordBuilder(mem, Join(ks, vs))
				for i := int64(0); i < 4; i++ {
					k := i*3 + v%3
					b.Field(0).(*array.Int64Builder).Append(k)
					b.Field(1).AppendNull()
					want[k] = "(null)"
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
				got := map[int64]string{}
				for _, r := range recs {
					for i := 0; i < int(r.NumRows()); i++ {
						got[r.Column(0).(*array.Int64).Value(i)] = r.Column(1).ValueStr(i)
					}
				}
				releaseAll(recs)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("version %d: got %v, want %v", v, got, want)
				}
			}
		})
	}
}
