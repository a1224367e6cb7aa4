package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

func TestFromAgg(t *testing.T) {
	for _, tc := range []struct {
		agg  batch.Agg
		want Agg
		ok   bool
	}{
		{batch.Sum(batch.Col("amount")), Agg{Func: batch.AggSum, Column: "amount", Name: "sum(amount)"}, true},
		{batch.CountRows().As("n").PerBatch(), Agg{Func: batch.AggCount, Name: "n", PerBatch: true}, true},
		{batch.Max(batch.Col("ts")).As("latest"), Agg{Func: batch.AggMax, Column: "ts", Name: "latest"}, true},
		{batch.Sum(batch.Mul(batch.Col("price"), batch.Col("qty"))), Agg{}, false},
	} {
		got, ok := FromAgg(tc.agg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("FromAgg(%s) = %+v, %v; want %+v, %v", tc.agg.Name(), got, ok, tc.want, tc.ok)
		}
	}
}

func TestGroupByAggregateWithoutInput(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	_, err := NewGroupBy(memory.NewGoAllocator(), sch, []string{"k"}, []Agg{{Func: batch.AggSum, Name: "total"}})
	if !errors.Is(err, batch.ErrAggSchema) || !strings.Contains(err.Error(), `"total" has no input column`) {
		t.Errorf("error %v, want one naming the aggregate without an input", err)
	}
}
