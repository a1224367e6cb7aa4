package kernel

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/batch"
)

// Partitioned state and output, built in partition order.
//
// One working table holds the groups of every state partition (the
// engine's whole-table path). Its commit used to build the batch's state
// rows and output in order of first touch and then split both by
// partition: it hashed every state row's keys (HashRows), then scattered
// or gathered every column into one array per partition, and did the
// same for the output. Both passes were about a quarter of an update-mode
// aggregation's CPU, batch after batch, over the same groups.
//
// A group's partition never changes, so it is computed once, when the
// group first reaches a commit (parts), and the rows are built in
// partition order from the start: each partition's pieces are then
// slices of one record. The pieces hold exactly the rows, in exactly the
// order, that Partition would have given (its split is stable), so the
// stores and the next operator see the same thing either way.

// StateOutputParts is StateOutput (whole) or ChangesOutput (!whole)
// split by partition among n: state[p] and out[p] are what Partition of
// their results by the key columns would give for partition p (nil where
// p has none), built without hashing the rows. Every piece is a slice of
// one record built from fresh buffers, so the output pieces stay valid
// after later Merges. The caller releases every non-nil piece.
func (g *GroupBy) StateOutputParts(n int, whole bool) (state, out []arrow.RecordBatch, err error) {
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: state output parts: %d partitions", batch.ErrAggSchema, n)
	}
	if err := g.partsOf(n); err != nil {
		return nil, nil, err
	}
	state = make([]arrow.RecordBatch, n)
	out = make([]arrow.RecordBatch, n)
	total := len(g.touched)
	if whole {
		total = g.keys.len()
	}
	if total == 0 {
		return state, out, nil
	}

	// cnt[2p] counts p's touched groups, cnt[2p+1] its untouched ones (a
	// whole commit); the rows go p by p, touched first in order of first
	// touch, then untouched in insertion order: the order StateOutput's
	// rows take once split stably by partition.
	part := g.parts
	cnt := make([]int, 2*n)
	for _, gid := range g.touched {
		cnt[2*part[gid]]++
	}
	bits := g.touchBits
	untouched := whole && len(g.touched) < g.keys.len()
	if untouched {
		for gid := range uint32(g.keys.len()) {
			if bits[gid>>6]&(1<<(gid&63)) == 0 {
				cnt[2*part[gid]+1]++
			}
		}
	}
	start := make([]int, 2*n+1)
	for i, c := range cnt {
		start[i+1] = start[i] + c
	}
	pos := append([]int(nil), start[:2*n]...)
	idx := aggGrow(g.stateIdx[:0], total)
	g.stateIdx = idx
	for _, gid := range g.touched {
		k := 2 * part[gid]
		idx[pos[k]] = gid
		pos[k]++
	}
	if untouched {
		for gid := range uint32(g.keys.len()) {
			if bits[gid>>6]&(1<<(gid&63)) == 0 {
				k := 2*part[gid] + 1
				idx[pos[k]] = gid
				pos[k]++
			}
		}
	}

	cols := g.keys.arrays(g.mem, idx)
	nk := len(cols)
	// outOf[j] is output column j as a column of cols (a key, or a state
	// column that is the result), or -1: a result built apart, over the
	// touched groups in partition order (results[j]).
	outOf := make([]int, 0, g.outSch.NumFields())
	for i := range nk {
		outOf = append(outOf, i)
	}
	var results []arrow.Array
	var touchedIdx []uint32
	defer func() {
		for _, r := range results {
			if r != nil {
				r.Release()
			}
		}
	}()
	for i, acc := range g.accs {
		if !g.aggs[i].PerBatch {
			st := acc.state(g.mem, idx)
			if sr, ok := acc.(stateResult); ok && sr.stateIsResult() {
				outOf = append(outOf, len(cols))
				cols = append(cols, st...)
				continue
			}
			cols = append(cols, st...)
		}
		if touchedIdx == nil {
			touchedIdx = make([]uint32, 0, len(g.touched))
			for p := range n {
				touchedIdx = append(touchedIdx, idx[start[2*p]:start[2*p+1]]...)
			}
		}
		if results == nil {
			results = make([]arrow.Array, g.outSch.NumFields())
		}
		results[len(outOf)] = acc.result(g.mem, aggNonNil(touchedIdx))
		outOf = append(outOf, -1)
	}
	all := g.record(arrow.NewSchema(append(g.keySch.Fields(), g.stateSch.Fields()...), nil), cols, total)
	defer all.Release()

	tdone := 0 // touched groups of the partitions before p
	for p := range n {
		lo, mid, hi := start[2*p], start[2*p+1], start[2*p+2]
		if hi > lo {
			state[p] = all.NewSlice(int64(lo), int64(hi))
		}
		if mid == lo {
			continue
		}
		oc := make([]arrow.Array, len(outOf))
		for j, c := range outOf {
			if c >= 0 {
				oc[j] = array.NewSlice(all.Column(c), int64(lo), int64(mid))
			} else {
				oc[j] = array.NewSlice(results[j], int64(tdone), int64(tdone+mid-lo))
			}
		}
		out[p] = g.record(g.outSch, oc, mid-lo)
		tdone += mid - lo
	}
	return state, out, nil
}

// partsOf brings g.parts up to date for n partitions: parts[gid] is
// PartitionOf(HashRows(keys of gid), n), the partition Partition places
// the group's state row in. Groups are numbered in insertion order and
// keep their number until Remove or Reset (which drop parts), so only
// the groups added since the last call are hashed.
func (g *GroupBy) partsOf(n int) error {
	if g.partsN != n {
		g.parts = g.parts[:0]
		g.partsN = n
	}
	have, total := len(g.parts), g.keys.len()
	if have >= total {
		g.parts = g.parts[:total]
		return nil
	}
	idx := make([]uint32, total-have)
	for i := range idx {
		idx[i] = uint32(have + i)
	}
	cols := g.keys.arrays(g.mem, idx)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	h := make([]uint64, len(idx))
	if err := HashRows(cols, h); err != nil {
		return fmt.Errorf("state output parts: %w", err)
	}
	count := make([]int32, n)
	nums := make([]int32, len(idx))
	partitionNumbers(h, n, nums, count)
	g.parts = append(g.parts, nums...)
	return nil
}
