// Package batch is the language of a query's computations: expressions
// (Col, Lit, Add, Eq, And, Cast, If, Upper, DateTrunc, FormatTime, …),
// named output columns (As), aggregates as the user names them (Sum,
// Count, Avg, … with their output names), the names of the columns a
// window adds, and the errors all of them can fail with. It also binds and
// evaluates expressions over Arrow record batches (Projection, Filter),
// which is what the engine's stateless steps run.
//
// It knows nothing of sources, sinks, checkpoints or batch ids, nor of how
// aggregates are computed: the engine's kernels (hashing, partitioning,
// group-by tables and accumulators, window assignment, in
// internal/kernel) implement the aggregates and windows this package
// names, and the engine wires the two together.
//
// # Expressions
//
// An Expr is bound once to an input schema by NewProjection or NewFilter,
// which type-check it and report errors naming the expression and the
// column. Apply evaluates a whole column at a time — arrow-go's kernels
// where they are right, typed loops elsewhere — never row by row through
// interfaces. Integer overflow and division by zero are errors naming the
// expression, the row and the operands: arithmetic on money never wraps
// silently. A null predicate row counts as false. Projection and Filter
// are safe for concurrent use.
//
// # Aggregates
//
// An Agg is a function (AggFunc) over an input expression, with an output
// column name: Sum(Col("amount")).As("total"), Sum(Mul(Col("price"),
// Col("qty"))), CountRows(). Its default name, Func(input), e.g.
// "sum(amount)", is also the name of its column in the state store, so it
// is part of a query's checkpoint: a restart with an aggregate renamed is
// refused, as its state schema changed.
// Every aggregate skips null inputs (SQL semantics) and integer sums that
// overflow fail the batch (ErrSumOverflow).
//
// Every function that allocates Arrow memory takes a memory.Allocator and
// returns records the caller releases.
package batch
