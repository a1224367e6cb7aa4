package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// op is a stateless step bound to its input schema: batch.Projection and
// batch.Filter.
type op interface {
	Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)
}

// batchIDOp appends the batch id as a constant column.
type batchIDOp struct {
	ex  *executor
	out *arrow.Schema
}

func (b *batchIDOp) Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	ib := array.NewInt64Builder(b.ex.mem)
	defer ib.Release()
	n := int(rec.NumRows())
	ib.Reserve(n)
	for i := 0; i < n; i++ {
		ib.UnsafeAppend(b.ex.batchID)
	}
	col := ib.NewArray()
	defer col.Release()
	cols := append(append([]arrow.Array(nil), rec.Columns()...), col)
	return array.NewRecordBatch(b.out, cols, rec.NumRows()), nil
}

// keptColumns is the projection of a WithColumn or Drop step over schema:
// every column of schema as it is, but for the one WithColumn sets (in
// place, or appended) and the ones Drop removes.
func keptColumns(schema *arrow.Schema, st step) ([]batch.Named, error) {
	drop := map[string]bool{}
	switch st.kind {
	case stepWithColumn:
		if st.name == "" {
			return nil, fmt.Errorf("withColumn: the column needs a name")
		}
		if n := len(schema.FieldIndices(st.name)); n > 1 {
			return nil, fmt.Errorf("withColumn(%s): %d columns of that name in %s; replace one of them with Select", st.name, n, schema)
		}
	case stepDrop:
		for _, c := range st.names {
			if len(schema.FieldIndices(c)) == 0 {
				return nil, fmt.Errorf("drop(%s): column %q is not in %s", strings.Join(st.names, ", "), c, schema)
			}
			drop[c] = true
		}
	}
	var cols []batch.Named
	set := false
	for _, f := range schema.Fields() {
		switch {
		case drop[f.Name]:
		case st.kind == stepWithColumn && f.Name == st.name:
			cols = append(cols, batch.As(st.pred, st.name))
			set = true
		default:
			cols = append(cols, batch.As(batch.Col(f.Name), f.Name))
		}
	}
	if st.kind == stepWithColumn && !set {
		cols = append(cols, batch.As(st.pred, st.name))
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("drop(%s) leaves no column", strings.Join(st.names, ", "))
	}
	return cols, nil
}

func checkTimestampCol(s *arrow.Schema, col string) error {
	idx := s.FieldIndices(col)
	if len(idx) != 1 {
		return fmt.Errorf("column %q is not in %s", col, s)
	}
	if _, ok := s.Field(idx[0]).Type.(*arrow.TimestampType); !ok {
		return fmt.Errorf("column %q is %s, not a timestamp", col, s.Field(idx[0]).Type)
	}
	return nil
}

// bindAggs compiles the user's aggregates into the kernel's, which read
// columns. An aggregate over a bare column reads it; one over another
// expression reads a column that the returned projection appends to in,
// named after the expression (so the kernel's errors name it) and shared by
// the aggregates over the same expression. The projection is nil when every
// aggregate reads a bare column. An aggregate's name, and so its state
// column, is the user's either way.
func bindAggs(mem memory.Allocator, in *arrow.Schema, aggs []batch.Agg) (*batch.Projection, []kernel.Agg, error) {
	out := make([]kernel.Agg, len(aggs))
	var extra []batch.Named
	byExpr := map[string]string{}
	taken := map[string]bool{}
	for _, f := range in.Fields() {
		taken[f.Name] = true
	}
	for i, a := range aggs {
		if k, ok := kernel.FromAgg(a); ok {
			out[i] = k
			continue
		}
		e := a.Input()
		text := e.String()
		col, ok := byExpr[text]
		if !ok {
			col = text
			for n := 2; taken[col]; n++ {
				col = fmt.Sprintf("%s#%d", text, n)
			}
			taken[col] = true
			byExpr[text] = col
			extra = append(extra, batch.As(e, col))
		}
		out[i] = kernel.Agg{Func: a.Func(), Column: col, Name: a.Name(), PerBatch: a.IsPerBatch()}
	}
	if len(extra) == 0 {
		return nil, out, nil
	}
	cols := make([]batch.Named, 0, in.NumFields()+len(extra))
	for _, f := range in.Fields() {
		cols = append(cols, batch.As(batch.Col(f.Name), f.Name))
	}
	p, err := batch.NewProjection(mem, in, append(cols, extra...))
	if err != nil {
		return nil, nil, fmt.Errorf("aggregate input: %w", err)
	}
	return p, out, nil
}

func describe(v any) string {
	if d, ok := v.(Describer); ok {
		return d.Description()
	}
	return fmt.Sprintf("%T", v)
}
