package batch

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Projection computes new columns from each record batch of one input
// schema. It is bound and type-checked once by NewProjection; Apply may then
// be called from any number of goroutines at once. It holds no allocator
// memory, so it needs no Release.
type Projection struct {
	mem   memory.Allocator
	in    *arrow.Schema
	out   *arrow.Schema
	nodes []node
}

// NewProjection binds cols to the input schema in. A column's name is its
// Named.Name, or the expression's String when that is empty. Errors name the
// expression and the column, as in
// "batch: Add(amount, name): cannot add int64 and utf8", and wrap a sentinel
// of this package (ErrUnknownColumn, ErrType, ErrConvert). mem allocates the
// columns Apply computes.
func NewProjection(mem memory.Allocator, in *arrow.Schema, cols []Named) (*Projection, error) {
	b := newBinder(in)
	p := &Projection{mem: mem, in: in, nodes: make([]node, len(cols))}
	fields := make([]arrow.Field, len(cols))
	seen := make(map[string]bool, len(cols))
	for i, c := range cols {
		if c.Expr == nil {
			return nil, &ExprError{Row: -1, Err: ErrType, msg: fmt.Sprintf("batch: projection column %d (%q) has no expression", i, c.Name)}
		}
		name := c.Name
		if name == "" {
			name = c.Expr.String()
		}
		if seen[name] {
			return nil, &ExprError{Expr: c.Expr.String(), Row: -1, Err: ErrType, msg: fmt.Sprintf("batch: projection has two columns named %q", name)}
		}
		seen[name] = true
		n, err := c.Expr.bind(b)
		if err != nil {
			return nil, err
		}
		p.nodes[i] = n
		fields[i] = arrow.Field{Name: name, Type: n.dtype(), Nullable: true}
		if col, ok := n.(*colNode); ok {
			f := in.Field(col.idx)
			fields[i] = arrow.Field{Name: name, Type: f.Type, Nullable: f.Nullable, Metadata: f.Metadata}
		}
	}
	p.out = arrow.NewSchema(fields, nil)
	return p, nil
}

// Schema is the schema of the records Apply returns.
func (p *Projection) Schema() *arrow.Schema { return p.out }

// Apply computes the projection of rec. The result is a new record the
// caller releases; a bare Col shares the input column (no copy). An error
// found in the data (overflow, division by zero, a value that does not
// convert) names the expression, the row of rec and the value.
func (p *Projection) Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := checkSchema(p.in, rec); err != nil {
		return nil, err
	}
	ec := &evalCtx{ctx: withMem(ctx, p.mem), mem: p.mem, rec: rec, n: int(rec.NumRows())}
	cols := make([]arrow.Array, 0, len(p.nodes))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, n := range p.nodes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := n.eval(ec)
		if err != nil {
			return nil, fmt.Errorf("project %s: %w", p.out.Field(i).Name, err)
		}
		arr, err := v.array(p.mem, ec.n)
		v.release()
		if err != nil {
			return nil, fmt.Errorf("project %s: %w", p.out.Field(i).Name, err)
		}
		cols = append(cols, arr)
	}
	return array.NewRecordBatch(p.out, cols, int64(ec.n)), nil
}

// checkSchema fails unless rec has the fields of in, in order and of the same
// types (names and types only: metadata may differ).
func checkSchema(in *arrow.Schema, rec arrow.RecordBatch) error {
	got := rec.Schema()
	if got.NumFields() != in.NumFields() {
		return fmt.Errorf("%w: record has %d columns, want %d (%s)", ErrSchema, got.NumFields(), in.NumFields(), in)
	}
	for i, f := range in.Fields() {
		g := got.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			return fmt.Errorf("%w: column %d is %s %s, want %s %s", ErrSchema, i, g.Name, g.Type, f.Name, f.Type)
		}
	}
	return nil
}
