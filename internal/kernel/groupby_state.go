package kernel

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

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

// stateResult is implemented by an aggAccumulator whose one state column
// is its result column (count, sum, min, max, first, last): StateOutput
// hands out the one array as both.
type stateResult interface{ stateIsResult() bool }

func (a *countAcc) stateIsResult() bool   { return true }
func (a *sumBase[S]) stateIsResult() bool { return !a.avg }
func (a *pickAcc[T]) stateIsResult() bool { return true }
func (a *pickStrAcc) stateIsResult() bool { return true }

// StateOutput returns State and Output(true) built together, for a batch
// that commits the whole state: state holds every group, the touched ones
// first in order of first touch, then the others in insertion order (a
// full delta may hold its rows in any order); out is exactly Output(true).
// The key columns and the result columns equal to a state column (count,
// sum, min, max, first, last) are built once: out's are slices of state's.
// Both are built from fresh buffers the GroupBy never writes again, so
// they stay valid after later Merges. The caller releases both.
func (g *GroupBy) StateOutput() (state, out arrow.RecordBatch) {
	n := g.keys.len()
	idx := append(g.stateIdx[:0], g.touched...)
	if len(idx) < n {
		bits := g.touchBits
		for gid := range uint32(n) {
			if bits[gid>>6]&(1<<(gid&63)) == 0 {
				idx = append(idx, gid)
			}
		}
	}
	g.stateIdx = idx
	return g.withOutput(idx)
}

// ChangesOutput returns Changes and Output(true) built together, sharing
// the arrays they have in common as StateOutput does (both list the
// touched groups in order of first touch). The caller releases both.
func (g *GroupBy) ChangesOutput() (changes, out arrow.RecordBatch) {
	return g.withOutput(aggNonNil(g.touched))
}

// withOutput builds the keys and state columns of groups idx, whose first
// len(g.touched) are g.touched, and the output of those first ones: its
// key and state-equal result columns are slices of the state's.
func (g *GroupBy) withOutput(idx []uint32) (state, out arrow.RecordBatch) {
	k := int64(len(g.touched))
	touched := idx[:k]
	cols := g.keys.arrays(g.mem, idx)
	outCols := make([]arrow.Array, 0, g.outSch.NumFields())
	for _, c := range cols {
		outCols = append(outCols, array.NewSlice(c, 0, k))
	}
	for i, acc := range g.accs {
		if g.aggs[i].PerBatch {
			outCols = append(outCols, acc.result(g.mem, touched))
			continue
		}
		st := acc.state(g.mem, idx)
		cols = append(cols, st...)
		if sr, ok := acc.(stateResult); ok && sr.stateIsResult() {
			outCols = append(outCols, array.NewSlice(st[0], 0, k))
		} else {
			outCols = append(outCols, acc.result(g.mem, touched))
		}
	}
	state = g.record(arrow.NewSchema(append(g.keySch.Fields(), g.stateSch.Fields()...), nil), cols, len(idx))
	out = g.record(g.outSch, outCols, int(k))
	return state, out
}
