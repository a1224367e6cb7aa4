package kernel

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// GroupBy is one partition's state of one group-by aggregation: the groups
// seen so far, in insertion order with dense ids, and one aggAccumulator per
// aggregate held in typed Go slices indexed by group id.
//
// Lifecycle per batch: Merge (once or more), then Changes (the state delta
// to persist) and Output, or the two built together when they list the
// same groups (ChangesOutput, or StateOutput for a batch that commits the
// whole state), then ClearChanges. After a restart, Load the state
// rows back. Remove evicts groups.
//
// A GroupBy is not safe for concurrent use; run one per partition. After a
// Merge error (a sum overflow) it is partly updated and must be released
// and rebuilt from the state store.
//
// State format (part of the checkpoint): Changes returns KeySchema's columns
// then StateSchema's. Per aggregate named N (Agg.Name), PerBatch ones
// excepted:
//
//	count, count(*):        N int64
//	sum:                    N int64 (integers) or float64 (floats), null when no value
//	avg:                    N.sum int64|float64, N.count int64
//	min, max, first, last:  N of the column's type, null when no value
//	count distinct:         N list<column type>, the distinct values in first-seen order
type GroupBy struct {
	mem      memory.Allocator
	in       *arrow.Schema
	keyIdx   []int
	aggs     []Agg
	aggIdx   []int // input column of aggs[i], -1 for count(*)
	accs     []aggAccumulator
	keys     keyTable
	keySch   *arrow.Schema
	stateSch *arrow.Schema
	outSch   *arrow.Schema

	// change tracking: group g is touched when bit g of touchBits is set
	// (one bit a group: at 10M groups 1.25 MB, where a uint32 epoch mark
	// took 40 MB plus its doubling).
	touchBits []uint64
	touched   []uint32
	// needCand: an aggregate uses m.cand (only min/max/first/last of
	// strings), which then grows with the groups.
	needCand bool
	// seq numbers the calls of keys.find (see keyTable.find).
	seq uint32
	// track: Merge asks keys.find for the distinct groups of a record
	// (m.groups), which string pick accumulators need. Otherwise find
	// writes nothing on a hit (no slot's seq: the table's cache lines
	// stay clean), and touchRows marks the changed groups from m.gids:
	// the same groups in the same order.
	track bool

	m       aggMergeCtx
	keyCols []arrow.Array
	// resetKeep is Reset's all-false keep mask, kept between calls.
	resetKeep []bool
	// stateIdx is StateOutput's row order, kept between batches.
	stateIdx []uint32
	// parts[gid] is group gid's partition among partsN (StateOutputParts,
	// groupby_parts.go), for the groups up to len(parts).
	parts  []int32
	partsN int
}

// NewGroupBy builds the empty state of an aggregation of records of schema
// in, grouped by the key columns keys (at least one), computing aggs. A
// missing column, an unsupported type or a duplicate output name fails with
// a message naming the column and type.
func NewGroupBy(mem memory.Allocator, in *arrow.Schema, keys []string, aggs []Agg) (*GroupBy, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: group by needs at least one key column", batch.ErrAggSchema)
	}
	g := &GroupBy{mem: mem, in: in, aggs: append([]Agg(nil), aggs...)}
	names := map[string]bool{}
	var keyFields, outFields, stateFields []arrow.Field
	for _, k := range keys {
		idx := in.FieldIndices(k)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: key column %q: %d columns of that name in %s", batch.ErrAggSchema, k, len(idx), in)
		}
		f := in.Field(idx[0])
		if keyTypeWidth(f.Type) < 0 {
			return nil, fmt.Errorf("%w: key column %q of type %s", batch.ErrAggUnsupported, k, f.Type)
		}
		if names[k] {
			return nil, fmt.Errorf("%w: key column %q twice", batch.ErrAggSchema, k)
		}
		names[k] = true
		g.keyIdx = append(g.keyIdx, idx[0])
		keyFields = append(keyFields, f)
	}
	outFields = append(outFields, keyFields...)
	stateFields = append(stateFields, keyFields...)
	stateNames := map[string]bool{}
	for k := range names {
		stateNames[k] = true
	}
	for _, a := range g.aggs {
		var dt arrow.DataType
		ci := -1
		if !a.countsRows() {
			if a.Column == "" {
				return nil, fmt.Errorf("%w: %s %q has no input column", batch.ErrAggSchema, a.Func, a.Name)
			}
			idx := in.FieldIndices(a.Column)
			if len(idx) != 1 {
				return nil, fmt.Errorf("%w: %s over column %q: %d columns of that name in %s", batch.ErrAggSchema, a.Func, a.Column, len(idx), in)
			}
			ci = idx[0]
			dt = in.Field(ci).Type
		}
		acc, err := newAggAccumulator(a, dt)
		if err != nil {
			return nil, err
		}
		name := a.Name
		if names[name] {
			return nil, fmt.Errorf("%w: output column %q twice", batch.ErrAggSchema, name)
		}
		names[name] = true
		outFields = append(outFields, arrow.Field{Name: name, Type: acc.resultType(), Nullable: a.Func != batch.AggCount && a.Func != batch.AggCountDistinct})
		if !a.PerBatch {
			for _, f := range acc.stateFields(name) {
				if stateNames[f.Name] {
					return nil, fmt.Errorf("%w: state column %q twice", batch.ErrAggSchema, f.Name)
				}
				stateNames[f.Name] = true
				stateFields = append(stateFields, f)
			}
		}
		g.aggIdx = append(g.aggIdx, ci)
		g.accs = append(g.accs, acc)
		if _, ok := acc.(*pickStrAcc); ok {
			g.needCand = true
		}
	}
	g.keySch = arrow.NewSchema(keyFields, nil)
	g.stateSch = arrow.NewSchema(stateFields[len(keyFields):], nil)
	g.outSch = arrow.NewSchema(outFields, nil)
	g.keys = newKeyTable(keyFields)
	g.track = g.needCand
	g.m.describe = g.describe
	return g, nil
}

// KeySchema is the schema of the key columns.
func (g *GroupBy) KeySchema() *arrow.Schema { return g.keySch }

// StateSchema is the schema of the aggAccumulator columns kept in the state
// store (see the state format above).
func (g *GroupBy) StateSchema() *arrow.Schema { return g.stateSch }

// OutputSchema is the key columns then one column per Agg, named Agg.Name.
func (g *GroupBy) OutputSchema() *arrow.Schema { return g.outSch }

// Len is the number of groups.
func (g *GroupBy) Len() int { return g.keys.len() }

// Merge folds the rows of rec (schema in) into the groups.
func (g *GroupBy) Merge(rec arrow.RecordBatch) error {
	if err := g.checkColumns(rec); err != nil {
		return err
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	g.m.gids = aggGrow(g.m.gids[:0], n)
	g.keyCols = g.keyCols[:0]
	for _, ci := range g.keyIdx {
		g.keyCols = append(g.keyCols, rec.Column(ci))
	}
	seq := uint32(0)
	if g.track {
		seq = g.nextSeq()
	}
	g.m.groups = g.keys.find(g.keyCols, g.m.gids, seq, g.m.groups[:0])
	clear(g.keyCols)
	g.grow()
	if g.track {
		g.touch()
	} else {
		g.touchRows()
	}
	for i, acc := range g.accs {
		var col arrow.Array
		if ci := g.aggIdx[i]; ci >= 0 {
			col = rec.Column(ci)
		}
		g.m.column = g.aggs[i].Column
		if err := acc.merge(&g.m, col); err != nil {
			return fmt.Errorf("merge %s: %w", g.aggs[i].Name, err)
		}
	}
	return nil
}

func (g *GroupBy) checkColumns(rec arrow.RecordBatch) error {
	sch := rec.Schema()
	check := func(ci int) error {
		want := g.in.Field(ci)
		if ci >= len(sch.Fields()) || !arrow.TypeEqual(sch.Field(ci).Type, want.Type) || sch.Field(ci).Name != want.Name {
			return fmt.Errorf("%w: merge: column %d of the record is not %q of type %s (record schema %s)", batch.ErrAggSchema, ci, want.Name, want.Type, sch)
		}
		return nil
	}
	for _, ci := range g.keyIdx {
		if err := check(ci); err != nil {
			return err
		}
	}
	for _, ci := range g.aggIdx {
		if ci >= 0 {
			if err := check(ci); err != nil {
				return err
			}
		}
	}
	return nil
}

// grow sizes the per-group slices to the number of groups.
func (g *GroupBy) grow() {
	n := g.keys.len()
	g.touchBits = aggGrow(g.touchBits, (n+63)/64)
	if g.needCand {
		g.m.cand = aggGrow(g.m.cand, n)
	}
	for _, acc := range g.accs {
		acc.grow(n)
	}
}

// nextSeq is the seq of the next keys.find call.
func (g *GroupBy) nextSeq() uint32 {
	g.seq++
	if g.seq == 0 {
		g.keys.clearSeq()
		g.seq = 1
	}
	return g.seq
}

// touch marks this merge's distinct groups changed.
func (g *GroupBy) touch() {
	bits := g.touchBits
	for _, gid := range g.m.groups {
		w, b := gid>>6, uint64(1)<<(gid&63)
		if bits[w]&b == 0 {
			bits[w] |= b
			g.touched = append(g.touched, gid)
		}
	}
}

// touchRows is touch from the rows' groups (m.gids) when find did not
// list the distinct ones: a group is added at its first row, so the order
// is touch's. When every group is touched already (more merges in one
// batch) there is nothing to mark.
func (g *GroupBy) touchRows() {
	if len(g.touched) == g.keys.len() {
		return
	}
	bits := g.touchBits
	for _, gid := range g.m.gids {
		w, b := gid>>6, uint64(1)<<(gid&63)
		if bits[w]&b == 0 {
			bits[w] |= b
			g.touched = append(g.touched, gid)
		}
	}
}

// ClearChanges starts a new batch: no group is touched, PerBatch aggregates
// are empty.
func (g *GroupBy) ClearChanges() {
	for i, acc := range g.accs {
		if g.aggs[i].PerBatch {
			acc.reset(g.touched)
		}
	}
	for _, gid := range g.touched {
		g.touchBits[gid>>6] = 0
	}
	g.touched = g.touched[:0]
}

// Changes returns the keys and state columns (KeySchema then StateSchema)
// of the groups touched since ClearChanges, in order of first touch. The
// caller releases it.
func (g *GroupBy) Changes() arrow.RecordBatch {
	idx := aggNonNil(g.touched)
	cols := g.keys.arrays(g.mem, idx)
	for i, acc := range g.accs {
		if !g.aggs[i].PerBatch {
			cols = append(cols, acc.state(g.mem, idx)...)
		}
	}
	return g.record(arrow.NewSchema(append(g.keySch.Fields(), g.stateSch.Fields()...), nil), cols, len(g.touched))
}

// Output returns the keys and aggregate results (OutputSchema): with
// changedOnly, of the groups touched since ClearChanges in order of first
// touch (update mode); otherwise of all groups in insertion order (complete
// mode). The caller releases it.
func (g *GroupBy) Output(changedOnly bool) arrow.RecordBatch {
	var idx []uint32
	n := g.keys.len()
	if changedOnly {
		idx = aggNonNil(g.touched) // nil would mean all groups
		n = len(idx)
	}
	cols := g.keys.arrays(g.mem, idx)
	for _, acc := range g.accs {
		cols = append(cols, acc.result(g.mem, idx))
	}
	return g.record(g.outSch, cols, n)
}

func (g *GroupBy) record(sch *arrow.Schema, cols []arrow.Array, n int) arrow.RecordBatch {
	rec := array.NewRecordBatch(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// Load restores groups from state rows of schema KeySchema joined with
// StateSchema (as Changes returns them). A loaded group that exists already
// has its state replaced. Loaded groups are not touched.
func (g *GroupBy) Load(rec arrow.RecordBatch) error {
	want := arrow.NewSchema(append(g.keySch.Fields(), g.stateSch.Fields()...), nil)
	sch := rec.Schema()
	if len(sch.Fields()) != len(want.Fields()) {
		return fmt.Errorf("%w: load: state schema %s, want %s", batch.ErrAggSchema, sch, want)
	}
	for i, f := range want.Fields() {
		if got := sch.Field(i); got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			return fmt.Errorf("%w: load: state column %d is %q of type %s, want %q of type %s", batch.ErrAggSchema, i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	nk := len(g.keyIdx)
	gids := make([]uint32, n)
	g.m.groups = g.keys.find(rec.Columns()[:nk], gids, g.nextSeq(), g.m.groups[:0])
	g.grow()
	c := nk
	for i, acc := range g.accs {
		if g.aggs[i].PerBatch {
			continue
		}
		k := len(acc.stateFields(g.aggs[i].Name))
		acc.load(rec.Columns()[c:c+k], gids)
		c += k
	}
	return nil
}

// Remove evicts the groups for which keep writes false: keep receives the
// key columns of all groups (insertion order; released when keep returns)
// and a slice of as many bools, all true, to fill. It returns the removed groups' keys (KeySchema), for the state
// delta; the caller releases them. The other groups keep their order.
func (g *GroupBy) Remove(keep func(keys []arrow.Array, out []bool)) (arrow.RecordBatch, error) {
	n := g.keys.len()
	all := g.keys.arrays(g.mem, nil)
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	keep(all, out)
	for _, a := range all {
		a.Release()
	}
	var removed []uint32
	for gid, k := range out {
		if !k {
			removed = append(removed, uint32(gid))
		}
	}
	rem := g.record(g.keySch, g.keys.arrays(g.mem, aggNonNil(removed)), len(removed))
	if len(removed) == 0 {
		return rem, nil
	}
	remap, _ := aggRenumber(out)
	touched := g.touched[:0]
	for _, gid := range g.touched {
		if ng, ok := remap(gid); ok {
			touched = append(touched, ng)
		}
	}
	g.touched = touched
	g.keys.compact(out)
	g.touchBits = g.touchBits[:(g.keys.len()+63)/64]
	clear(g.touchBits)
	for _, gid := range g.touched {
		g.touchBits[gid>>6] |= uint64(1) << (gid & 63)
	}
	if g.needCand {
		g.m.cand = g.m.cand[:g.keys.len()]
	}
	for _, acc := range g.accs {
		acc.compact(out)
	}
	g.parts = g.parts[:0] // renumbered
	return rem, nil
}

func aggNonNil(r []uint32) []uint32 {
	if r == nil {
		return []uint32{}
	}
	return r
}

// MemoryBytes estimates the Go memory the state holds.
func (g *GroupBy) MemoryBytes() int64 {
	if g.keys == nil {
		return 0
	}
	n := g.keys.memoryBytes() + aggSize(g.touchBits) + aggSize(g.touched) +
		aggSize(g.m.gids) + aggSize(g.m.groups) + aggSize(g.m.cand) + aggSize(g.m.bools) +
		aggSize(g.stateIdx) + aggSize(g.parts)
	for _, acc := range g.accs {
		n += acc.memoryBytes()
	}
	return n
}

// Release drops the state. The GroupBy must not be used afterwards.
func (g *GroupBy) Release() {
	g.keys = nil
	g.accs = nil
	g.touchBits, g.touched, g.stateIdx, g.parts = nil, nil, nil, nil
	g.m = aggMergeCtx{}
	g.keyCols = nil
}

// describe names group gid's key for an error message: k1=v1, k2=v2.
func (g *GroupBy) describe(gid uint32) string {
	cols := g.keys.arrays(g.mem, []uint32{gid})
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", g.keySch.Field(i).Name, c.ValueStr(0))
		c.Release()
	}
	return b.String()
}
