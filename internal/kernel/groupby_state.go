package kernel

import "github.com/apache/arrow-go/v18/arrow"

// State returns the keys and state columns (KeySchema then StateSchema) of
// every group, in insertion order: what Changes returns when every group
// has changed. The engine commits it as a full state version when most
// groups changed in a batch. The caller releases it.
func (g *GroupBy) State() arrow.RecordBatch {
	n := g.keys.len()
	idx := make([]uint32, n) // group ids are 0..n-1, in insertion order
	for i := range idx {
		idx[i] = uint32(i)
	}
	cols := g.keys.arrays(g.mem, idx)
	for i, acc := range g.accs {
		if !g.aggs[i].PerBatch {
			cols = append(cols, acc.state(g.mem, idx)...)
		}
	}
	return g.record(arrow.NewSchema(append(g.keySch.Fields(), g.stateSch.Fields()...), nil), cols, n)
}

// Changed returns how many groups were touched since ClearChanges: the
// rows Changes would return, without building them.
func (g *GroupBy) Changed() int { return len(g.touched) }
