package kernel

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/onceflow/onceflow/batch"
)

// stateMerger is an aggAccumulator whose state rows combine exactly: folding
// the state of a group built from rows r1..rk into a group gives the same
// state as folding r1..rk themselves, in that order (integer sums up to
// overflow, see MergeState).
type stateMerger interface {
	// mergeState folds the state columns cols (stateFields' columns, as
	// state returns them) into the groups m.gids of their rows.
	mergeState(m *aggMergeCtx, cols []arrow.Array) error
}

// Combinable reports whether a GroupBy of these aggregates can be fed
// partial states with MergeState instead of the rows they came from, with
// the same result bit for bit: every aggregate is count, count(*), an
// integer sum or average (state: sum and count), or min, max, first or
// last (the engine folds a batch's rows into a combiner in their order, so
// first and last stay those of the rows), and none is PerBatch (its
// partial has no state column). Float sums and averages are not (adding
// in another order changes the bits), nor are distinct counts.
func (g *GroupBy) Combinable() bool {
	for i, acc := range g.accs {
		if g.aggs[i].PerBatch {
			return false
		}
		if _, ok := acc.(stateMerger); !ok {
			return false
		}
	}
	return true
}

// MergeState folds partial states into the groups: rec has the schema
// KeySchema joined with StateSchema (what Changes and State return, here of
// another GroupBy of the same aggregates that merged some rows). Unlike
// Load it combines into existing groups and touches them as Merge does
// (Changes, Changed and Output(true) list them, in rec's order where they
// are new to this batch), so that merging the partial states of rows is
// merging the rows. It needs Combinable.
//
// An integer sum that overflows fails naming the column and group, as in
// Merge, with the group's sum and the partial sum added to it. The check is
// on the partial sums: a batch whose rows take a group's running sum past
// int64 and back (a large positive then a large negative value) fails row
// by row but not here, where only the batch's net change is added; a sum
// whose final value overflows fails both ways.
func (g *GroupBy) MergeState(rec arrow.RecordBatch) error {
	if !g.Combinable() {
		return fmt.Errorf("%w: merge state: the aggregates do not combine partial states", batch.ErrAggUnsupported)
	}
	if err := g.checkState("merge state", rec); err != nil {
		return err
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	nk := len(g.keyIdx)
	g.m.gids = aggGrow(g.m.gids[:0], n)
	seq := uint32(0)
	if g.track {
		seq = g.nextSeq()
	}
	g.m.groups = g.keys.find(rec.Columns()[:nk], g.m.gids, seq, g.m.groups[:0])
	g.grow()
	if g.track {
		g.touch()
	} else {
		g.touchRows()
	}
	c := nk
	for i, acc := range g.accs {
		k := len(acc.stateFields(g.aggs[i].Name))
		g.m.column = g.aggs[i].Column
		if err := acc.(stateMerger).mergeState(&g.m, rec.Columns()[c:c+k]); err != nil {
			return fmt.Errorf("merge state %s: %w", g.aggs[i].Name, err)
		}
		c += k
	}
	return nil
}

// checkState checks that rec has the state schema (KeySchema joined with
// StateSchema).
func (g *GroupBy) checkState(op string, rec arrow.RecordBatch) error {
	want := arrow.NewSchema(append(g.keySch.Fields(), g.stateSch.Fields()...), nil)
	sch := rec.Schema()
	if len(sch.Fields()) != len(want.Fields()) {
		return fmt.Errorf("%w: %s: state schema %s, want %s", batch.ErrAggSchema, op, sch, want)
	}
	for i, f := range want.Fields() {
		if got := sch.Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			return fmt.Errorf("%w: %s: state column %d is %q of type %s, want %q of type %s", batch.ErrAggSchema, op, i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	return nil
}

// Reset drops every group and starts a new batch, keeping the memory of the
// key table and the accumulators for the groups to come (a combiner reused
// batch after batch).
func (g *GroupBy) Reset() {
	n := g.keys.len()
	g.keys.reset()
	if cap(g.resetKeep) < n {
		g.resetKeep = make([]bool, n)
	}
	none := g.resetKeep[:n] // all false: nothing is written to it
	for _, acc := range g.accs {
		acc.compact(none)
	}
	clear(g.touchBits)
	g.touchBits = g.touchBits[:0]
	g.touched = g.touched[:0]
	if g.needCand {
		g.m.cand = g.m.cand[:0]
	}
	g.parts = g.parts[:0]
}

func (a *countAcc) mergeState(m *aggMergeCtx, cols []arrow.Array) error {
	v := cols[0].(*array.Int64).Int64Values()
	if !a.counts.chunked {
		counts := a.counts.flat
		for i, g := range m.gids[:len(v)] {
			counts[g] += v[i]
		}
		return nil
	}
	for i, g := range m.gids[:len(v)] {
		*a.counts.at(g) += v[i]
	}
	return nil
}

// mergeState adds the partial sums (and, for avg, counts). A sum's state
// is null where its rows had no value; its count is then not advanced,
// since for sum the count only says whether there is a value.
func (a *sumIntAcc[T]) mergeState(m *aggMergeCtx, cols []arrow.Array) error {
	sums := gbValues[int64](cols[0])
	bm, off := gbBitmap(cols[0])
	var counts []int64
	if a.avg {
		counts = cols[1].(*array.Int64).Int64Values()
	}
	for i, s := range sums {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		n := int64(1)
		if counts != nil {
			if n = counts[i]; n == 0 {
				continue
			}
		}
		g := m.gids[i]
		p := a.sc.at(g)
		r := p.sum + s
		if (p.sum^r)&(s^r) < 0 {
			return a.overflow(m, g, p.sum, s)
		}
		p.sum = r
		p.n += n
	}
	return nil
}

// mergeState: a min, max, first or last state column is the column's type
// with null for no value, so it folds in as a column of rows would.
func (a *pickAcc[T]) mergeState(m *aggMergeCtx, cols []arrow.Array) error {
	return a.merge(m, cols[0])
}

func (a *pickStrAcc) mergeState(m *aggMergeCtx, cols []arrow.Array) error {
	return a.merge(m, cols[0])
}
