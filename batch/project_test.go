package batch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/compute/exec"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var moneySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "fee", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func moneyRecord(t testing.TB, mem memory.Allocator, js string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, moneySchema, strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func recordJSON(t testing.TB, rec arrow.RecordBatch) string {
	t.Helper()
	var sb strings.Builder
	for i, c := range rec.Columns() {
		js, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		sb.WriteString(rec.ColumnName(i) + "=" + string(js) + " ")
	}
	return strings.TrimSpace(sb.String())
}

func TestProjection(t *testing.T) {
	const rows = `[{"id":0,"amount":1,"fee":1,"name":"x"},{"id":1,"amount":150,"fee":2,"name":"alice"},
		{"id":2,"amount":null,"fee":3,"name":"bob"},{"id":3,"amount":-20,"fee":null,"name":null}]`
	cols := []Named{
		{Name: "id", Expr: Col("id")},
		As(Add(Mul(Col("amount"), Lit(100)), Col("fee")), "cents"),
		As(Upper(Col("name")), "who"),
		{Expr: Gt(Col("amount"), Lit(0))},
		As(Lit("eur"), "currency"),
	}
	cases := []struct {
		name     string
		from, to int64
		want     string
	}{
		{"whole", 0, 4, `id=[0,1,2,3] cents=[101,15002,null,null] who=["X","ALICE","BOB",null] Gt(amount, 0)=[true,true,null,false] currency=["eur","eur","eur","eur"]`},
		{"sliced", 1, 4, `id=[1,2,3] cents=[15002,null,null] who=["ALICE","BOB",null] Gt(amount, 0)=[true,null,false] currency=["eur","eur","eur"]`},
		{"one row at offset 3", 3, 4, `id=[3] cents=[null] who=[null] Gt(amount, 0)=[false] currency=["eur"]`},
		{"zero rows", 0, 0, `id=[] cents=[] who=[] Gt(amount, 0)=[] currency=[]`},
		{"zero rows at offset 2", 2, 2, `id=[] cents=[] who=[] Gt(amount, 0)=[] currency=[]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := exprMem(t)
			defer mem.AssertSize(t, 0)
			p, err := NewProjection(mem, moneySchema, cols)
			if err != nil {
				t.Fatal(err)
			}
			full := moneyRecord(t, mem, rows)
			defer full.Release()
			rec := full.NewSlice(c.from, c.to)
			defer rec.Release()
			out, err := p.Apply(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if got := recordJSON(t, out); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
			if !out.Schema().Equal(p.Schema()) {
				t.Errorf("schema %s, want %s", out.Schema(), p.Schema())
			}
			if out.NumRows() != rec.NumRows() {
				t.Errorf("%d rows, want %d", out.NumRows(), rec.NumRows())
			}
		})
	}
}

func TestProjectionSchema(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	p, err := NewProjection(mem, moneySchema, []Named{
		{Expr: Col("id")},
		As(Div(Col("amount"), Lit(2.0)), "half"),
		As(Col("name"), "label"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "schema:\n  fields: 3\n    - id: type=int64\n    - half: type=float64, nullable\n    - label: type=utf8, nullable"
	if got := p.Schema().String(); got != want {
		t.Errorf("schema\n%s\nwant\n%s", got, want)
	}
	// No columns: the rows remain, counted.
	empty, err := NewProjection(mem, moneySchema, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := moneyRecord(t, mem, `[{"id":1},{"id":2}]`)
	out, err := empty.Apply(context.Background(), rec)
	if err != nil || out.NumCols() != 0 || out.NumRows() != 2 {
		t.Errorf("empty projection: %v %v", out, err)
	}
	out.Release()
	rec.Release()
	_, err = NewProjection(mem, moneySchema, []Named{{Expr: Col("id")}, As(Col("fee"), "id")})
	if err == nil || err.Error() != `batch: projection has two columns named "id"` {
		t.Errorf("duplicate names: %v", err)
	}
}

// A bare column is passed on, not copied.
func TestProjectionReusesColumns(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	rec := moneyRecord(t, mem, `[{"id":1,"amount":5,"fee":1,"name":"a"},{"id":2,"amount":6,"fee":1,"name":"b"}]`)
	defer rec.Release()
	p, err := NewProjection(mem, moneySchema, []Named{As(Col("name"), "n"), As(Col("amount"), "a")})
	if err != nil {
		t.Fatal(err)
	}
	before := mem.CurrentAlloc()
	out, err := p.Apply(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := mem.CurrentAlloc(); got != before {
		t.Errorf("projection of bare columns allocated %d bytes", got-before)
	}
	if out.Column(0).Data() != rec.Column(3).Data() || out.Column(1).Data() != rec.Column(1).Data() {
		t.Errorf("columns were copied")
	}
	out.Release()
	if rec.Column(3).Len() != 2 {
		t.Fatal("input column released by the output")
	}
}

func TestApplyErrors(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	rec := moneyRecord(t, mem, `[{"id":1,"amount":5,"fee":0,"name":"a"}]`)
	defer rec.Release()

	p, err := NewProjection(mem, moneySchema, []Named{As(Div(Col("amount"), Col("fee")), "ratio")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Apply(context.Background(), rec)
	if !errors.Is(err, ErrDivideByZero) {
		t.Fatalf("got %v, want ErrDivideByZero", err)
	}
	var ee *ExprError
	if !errors.As(err, &ee) || ee.Row != 0 || ee.Expr != "Div(amount, fee)" {
		t.Errorf("ExprError %+v", ee)
	}

	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(mem, other)
	b.Field(0).(*array.Int32Builder).Append(1)
	wrong := b.NewRecordBatch()
	b.Release()
	defer wrong.Release()
	if _, err := p.Apply(context.Background(), wrong); !errors.Is(err, ErrSchema) {
		t.Errorf("projection of another schema: %v", err)
	}
	f, err := NewFilter(mem, moneySchema, Gt(Col("amount"), Lit(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(context.Background(), wrong); !errors.Is(err, ErrSchema) {
		t.Errorf("filter of another schema: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Apply(ctx, rec); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled projection: %v", err)
	}
	if _, err := f.Apply(ctx, rec); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled filter: %v", err)
	}
}

func TestFilter(t *testing.T) {
	const rows = `[{"id":0,"amount":1,"fee":1,"name":"x"},{"id":1,"amount":150,"fee":2,"name":"alice"},
		{"id":2,"amount":null,"fee":3,"name":"bob"},{"id":3,"amount":-20,"fee":null,"name":null},
		{"id":4,"amount":70,"fee":1,"name":"carol"}]`
	cases := []struct {
		name     string
		pred     Expr
		from, to int64
		want     string // ids kept
		same     bool   // the input record itself comes back
	}{
		{"positive", Gt(Col("amount"), Lit(0)), 0, 5, `[0,1,4]`, false},
		{"sliced", Gt(Col("amount"), Lit(0)), 1, 5, `[1,4]`, false},
		{"null is false", Gt(Col("fee"), Lit(1)), 0, 5, `[1,2]`, false},
		{"not null", Not(Gt(Col("fee"), Lit(1))), 0, 5, `[0,4]`, false},
		{"or kleene", Or(Gt(Col("amount"), Lit(100)), IsNull(Col("name"))), 0, 5, `[1,3]`, false},
		{"string", StartsWith(Col("name"), "a"), 1, 4, `[1]`, false},
		{"all", IsNotNull(Col("id")), 1, 5, `[1,2,3,4]`, true},
		{"none", Lt(Col("id"), Lit(0)), 0, 5, `[]`, false},
		{"constant true", Lit(true), 1, 3, `[1,2]`, true},
		{"constant false", Lit(false), 0, 5, `[]`, false},
		{"constant null", Lit(nil), 0, 5, `[]`, false},
		{"null and", And(Lit(nil), Gt(Col("amount"), Lit(0))), 0, 5, `[]`, false},
		{"zero rows", Gt(Col("amount"), Lit(0)), 2, 2, `[]`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := exprMem(t)
			defer mem.AssertSize(t, 0)
			f, err := NewFilter(mem, moneySchema, c.pred)
			if err != nil {
				t.Fatal(err)
			}
			full := moneyRecord(t, mem, rows)
			defer full.Release()
			rec := full.NewSlice(c.from, c.to)
			defer rec.Release()
			out, err := f.Apply(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			js, _ := out.Column(0).MarshalJSON()
			if string(js) != c.want {
				t.Errorf("kept %s, want %s", js, c.want)
			}
			if (out == rec) != c.same {
				t.Errorf("returned the input record: %v, want %v", out == rec, c.same)
			}
			if !out.Schema().Equal(moneySchema) {
				t.Errorf("schema changed: %s", out.Schema())
			}
			if c.want == `[1,4]` || c.want == `[0,1,4]` {
				// Every column is filtered alike.
				names, _ := out.Column(3).MarshalJSON()
				if !strings.Contains(string(names), "carol") || out.Column(3).Len() != out.Column(0).Len() {
					t.Errorf("names %s", names)
				}
			}
		})
	}
}

func TestFilterBindErrors(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	cases := []struct {
		pred Expr
		kind error
		msg  string
	}{
		{Add(Col("amount"), Col("fee")), ErrType, "batch: Add(amount, fee): filter predicate is int64, want bool"},
		{Gt(Col("amont"), Lit(0)), ErrUnknownColumn, `batch: unknown column "amont"; the input has id, amount, fee, name`},
		{Add(Col("amount"), Col("name")), ErrType, "batch: Add(amount, name): cannot add int64 and utf8"},
	}
	for _, c := range cases {
		_, err := NewFilter(mem, moneySchema, c.pred)
		if !errors.Is(err, c.kind) || err.Error() != c.msg {
			t.Errorf("%s: got %v, want %s", c.pred, err, c.msg)
		}
	}
}

// Projections and filters are bound once and applied from many goroutines.
func TestConcurrentApply(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	rec := moneyRecord(t, mem, `[{"id":1,"amount":5,"fee":1,"name":"a"},{"id":2,"amount":-6,"fee":2,"name":"b"},{"id":3,"amount":7,"fee":null,"name":null}]`)
	defer rec.Release()
	p, err := NewProjection(mem, moneySchema, []Named{
		As(Add(Mul(Col("amount"), Lit(100)), Col("fee")), "cents"),
		As(Concat(Col("name"), Lit("!")), "shout"),
		As(In(Col("id"), 1, 3), "pick"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFilter(mem, moneySchema, Gt(Col("amount"), Lit(0)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				out, err := p.Apply(context.Background(), rec)
				if err != nil {
					t.Error(err)
					return
				}
				if got := recordJSON(t, out); got != `cents=[501,-598,null] shout=["a!","b!",null] pick=[true,false,true]` {
					t.Errorf("got %s", got)
				}
				out.Release()
				kept, err := f.Apply(context.Background(), rec)
				if err != nil {
					t.Error(err)
					return
				}
				if kept.NumRows() != 2 {
					t.Errorf("kept %d rows", kept.NumRows())
				}
				kept.Release()
			}
		})
	}
	wg.Wait()
}

// Dictionary-encoded columns pass through bare and decode inside functions.
func TestDictionaryColumns(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{{Name: "cat", Type: dt, Nullable: true}}, nil)
	b := array.NewDictionaryBuilder(mem, dt).(*array.BinaryDictionaryBuilder)
	for _, v := range []string{"x", "a", "b", "a", ""} {
		if v == "" {
			b.AppendNull()
			continue
		}
		if err := b.AppendString(v); err != nil {
			t.Fatal(err)
		}
	}
	col := b.NewArray()
	b.Release()
	full := array.NewRecordBatch(schema, []arrow.Array{col}, 5)
	col.Release()
	defer full.Release()
	rec := full.NewSlice(1, 5)
	defer rec.Release()
	p, err := NewProjection(mem, schema, []Named{
		{Expr: Col("cat")},
		As(Eq(Col("cat"), Lit("a")), "is_a"),
		As(Upper(Col("cat")), "up"),
		As(In(Col("cat"), "b"), "in_b"),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	want := `cat=["a","b","a",null] is_a=[true,false,true,null] up=["A","B","A",null] in_b=[false,true,false,null]`
	if got := recordJSON(t, out); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	if !arrow.TypeEqual(out.Column(0).DataType(), dt) {
		t.Errorf("bare column type %s", out.Column(0).DataType())
	}
}

// Filter copies every column type: typed loops for the common ones, arrow's
// take for the rest. arrow's FilterRecordBatch is the oracle.
func TestFilterColumnTypes(t *testing.T) {
	mem := exprMem(t)
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "ts", Type: exprTSUS, Nullable: true},
		{Name: "date", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "nul", Type: arrow.Null, Nullable: true},
	}, nil)
	const rows = `[
	{"k":0,"i8":1,"u16":2,"f32":1.5,"b":true,"ls":"a","bin":"AQI=","dec":"1.25","ts":"2026-11-30T00:00:00Z","date":"2026-11-30","list":[1,2],"nul":null},
	{"k":1,"i8":null,"u16":3,"f32":null,"b":false,"ls":null,"bin":null,"dec":null,"ts":null,"date":null,"list":null,"nul":null},
	{"k":2,"i8":-3,"u16":null,"f32":2.5,"b":null,"ls":"ccc","bin":"","dec":"-7.00","ts":"1969-01-01T00:00:00Z","date":"1969-01-01","list":[],"nul":null},
	{"k":null,"i8":4,"u16":5,"f32":3,"b":true,"ls":"","bin":"/w==","dec":"0.01","ts":"2000-02-29T12:00:00Z","date":"2000-02-29","list":[3],"nul":null},
	{"k":4,"i8":5,"u16":6,"f32":-1,"b":false,"ls":"eeeee","bin":"AA==","dec":"99.99","ts":"2030-01-01T00:00:00Z","date":"2030-01-01","list":[4,5,6],"nul":null}
	]`
	full, _, err := array.RecordFromJSON(mem, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Release()
	for _, c := range []struct {
		name     string
		from, to int64
		pred     Expr
	}{
		{"even k", 0, 5, Eq(Mod(Col("k"), Lit(2)), Lit(0))},
		{"sliced", 1, 5, Ne(Col("k"), Lit(2))},
		{"bool column", 1, 4, Col("b")},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := full.NewSlice(c.from, c.to)
			defer rec.Release()
			f, err := NewFilter(mem, schema, c.pred)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Apply(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			p, err := NewProjection(mem, schema, []Named{As(c.pred, "m")})
			if err != nil {
				t.Fatal(err)
			}
			mask, err := p.Apply(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			defer mask.Release()
			want, err := compute.FilterRecordBatch(exec.WithAllocator(context.Background(), mem), rec, mask.Column(0), compute.DefaultFilterOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer want.Release()
			if !array.RecordEqual(got, want) {
				t.Errorf("\n got %s\nwant %s", recordJSON(t, got), recordJSON(t, want))
			}
		})
	}
}
