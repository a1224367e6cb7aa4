package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A key's first row is emitted once, in the batch that first sees it, with
// the input's columns in order; repeats in that batch and later are not.
func TestDedupFirstSeen(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "id", Type: arrow.BinaryTypes.String},
	}, nil)
	d, err := NewDedup(sch, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroupBy(mem, sch, []string{"id"}, d.Aggs())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if err := d.Bind(g.OutputSchema()); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		ids  []string
		want []string
	}{
		{[]string{"a", "b", "a"}, []string{"0 a", "1 b"}},
		{[]string{"b", "c", "c", "a"}, []string{"1 c"}},
		{[]string{"a"}, nil},
	} {
		b := array.NewRecordBuilder(mem, sch)
		for j, id := range tc.ids {
			b.Field(0).(*array.Int64Builder).Append(int64(j))
			b.Field(1).(*array.StringBuilder).Append(id)
		}
		rec := b.NewRecordBatch()
		b.Release()
		if err := g.Merge(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		o := g.Output(true)
		f, err := d.FirstSeen(context.Background(), mem, o)
		o.Release()
		if err != nil {
			t.Fatal(err)
		}
		if !f.Schema().Equal(sch) {
			t.Errorf("batch %d: schema %s, want the input's %s", i, f.Schema(), sch)
		}
		var got []string
		for r := range int(f.NumRows()) {
			got = append(got, fmt.Sprintf("%d %s", f.Column(0).(*array.Int64).Value(r), f.Column(1).(*array.String).Value(r)))
		}
		f.Release()
		if slices.Sort(got); !slices.Equal(got, tc.want) {
			t.Errorf("batch %d: first seen %v, want %v", i, got, tc.want)
		}
		g.ClearChanges()
	}
	if _, err := NewDedup(sch, nil); err == nil || !strings.Contains(err.Error(), "at least one key") {
		t.Errorf("no keys: %v", err)
	}
}
