package batch

import "testing"

// The default name of an aggregate is its state column's name in existing
// checkpoints: over a bare column it must stay Func(column), as it was when
// aggregates took column names.
func TestAggNames(t *testing.T) {
	price, qty := Col("price"), Col("qty")
	for _, tc := range []struct {
		agg  Agg
		want string
	}{
		{CountRows(), "count(*)"},
		{Count(Col("amount")), "count(amount)"},
		{Sum(Col("amount")), "sum(amount)"},
		{Min(Col("ts")), "min(ts)"},
		{Max(Col("key")), "max(key)"},
		{Avg(Col("amount")), "avg(amount)"},
		{First(Col("key")), "first(key)"},
		{Last(Col("amount")), "last(amount)"},
		{CountDistinct(Col("key")), "count_distinct(key)"},
		{Sum(Col("amount")).PerBatch(), "sum(amount)"},
		{Sum(Mul(price, qty)), "sum(Mul(price, qty))"},
		{Count(If(Gt(qty, Lit(0)), price, Lit(nil))), "count(If(Gt(qty, 0), price, null))"},
		{Sum(Lit(1)), "sum(1)"},
		{Sum(Mul(price, qty)).As("revenue"), "revenue"},
		{CountRows().As("n").PerBatch(), "n"},
	} {
		if got := tc.agg.Name(); got != tc.want {
			t.Errorf("Name() = %q, want %q", got, tc.want)
		}
	}
}

func TestAggAccessors(t *testing.T) {
	a := Sum(Mul(Col("price"), Col("qty")))
	if a.Func() != AggSum || a.Input().String() != "Mul(price, qty)" || a.IsPerBatch() {
		t.Errorf("Sum(Mul(price, qty)) = %v %v %v", a.Func(), a.Input(), a.IsPerBatch())
	}
	b := a.PerBatch().As("x")
	if !b.IsPerBatch() || b.Name() != "x" || a.IsPerBatch() || a.Name() != "sum(Mul(price, qty))" {
		t.Errorf("PerBatch and As changed the original or missed the copy: %v %q, %v %q", b.IsPerBatch(), b.Name(), a.IsPerBatch(), a.Name())
	}
	if CountRows().Input() != nil || CountRows().Func() != AggCount {
		t.Errorf("CountRows has input %v, func %v", CountRows().Input(), CountRows().Func())
	}
	for _, tc := range []struct {
		e    Expr
		name string
		ok   bool
	}{
		{Col("amount"), "amount", true},
		{Mul(Col("a"), Lit(2)), "", false},
		{Lit("amount"), "", false},
		{nil, "", false},
	} {
		if name, ok := ColumnOf(tc.e); name != tc.name || ok != tc.ok {
			t.Errorf("ColumnOf(%v) = %q, %v; want %q, %v", tc.e, name, ok, tc.name, tc.ok)
		}
	}
}
