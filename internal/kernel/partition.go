package kernel

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// PartitionOf is the partition of a row whose HashRows hash is h among n
// partitions: h % n. Part of the checkpoint format (n is fixed at a query's
// first batch), like HashRows itself.
func PartitionOf(h uint64, n int) int { return int(h % uint64(n)) }

// Partition splits rec by the hash of its key columns keyCols into n
// records: result[p] holds, in their original order, the rows r with
// PartitionOf(HashRows(keys)[r], n) == p, or is nil when there are none.
// When every row falls in one partition, that partition is rec itself,
// retained. The caller releases the records.
func Partition(mem memory.Allocator, rec arrow.RecordBatch, keyCols []int, n int) ([]arrow.RecordBatch, error) {
	var p Partitioner
	return p.partition(mem, rec, keyCols, n, true)
}

// Partitioner is Partition with its scratch (row hashes, partition
// numbers, row order) kept between calls, for a caller that partitions
// record after record. It is not safe for concurrent use.
type Partitioner struct {
	// Shared lets the partitions' records share one buffer per scattered
	// column, each a slice of it, which saves a slice header and a
	// position per row. Set it only when whoever takes the records copies
	// what it keeps beyond them (a hash aggregation does): any one of them
	// keeps every partition's rows of that column alive.
	Shared bool

	keys             []arrow.Array
	h                []uint64
	start, part, idx []int32
	dest, pos        []int32
	// numbered is the row count of part's numbers (PartitionLike).
	numbered int
}

// Partition is the package's Partition, reusing p's scratch.
func (p *Partitioner) Partition(mem memory.Allocator, rec arrow.RecordBatch, keyCols []int, n int) ([]arrow.RecordBatch, error) {
	return p.partition(mem, rec, keyCols, n, true)
}

func partition(mem memory.Allocator, rec arrow.RecordBatch, keyCols []int, n int, scatter bool) ([]arrow.RecordBatch, error) {
	var p Partitioner
	return p.partition(mem, rec, keyCols, n, scatter)
}

// partition is Partition; scatter false makes every column take the
// gather path (tests compare the two).
func (pt *Partitioner) partition(mem memory.Allocator, rec arrow.RecordBatch, keyCols []int, n int, scatter bool) ([]arrow.RecordBatch, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: partition: %d partitions", batch.ErrAggSchema, n)
	}
	if len(keyCols) == 0 {
		return nil, fmt.Errorf("%w: partition: no key columns", batch.ErrAggSchema)
	}
	pt.numbered = 0
	rows := int(rec.NumRows())
	out := make([]arrow.RecordBatch, n)
	if rows == 0 {
		return out, nil
	}
	keys := aggGrow(pt.keys[:0], len(keyCols))
	pt.keys = keys
	defer clear(keys)
	for i, ci := range keyCols {
		if ci < 0 || ci >= int(rec.NumCols()) {
			return nil, fmt.Errorf("%w: partition: key column %d of a record of %d columns", batch.ErrAggSchema, ci, rec.NumCols())
		}
		keys[i] = rec.Column(ci)
	}
	pt.h = scratchOf(pt.h, rows)
	h := pt.h
	if err := HashRows(keys, h); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	// Counting sort of the row indices by partition, stable.
	pt.start = aggGrow(pt.start[:0], n+1)
	clear(pt.start)
	pt.part = scratchOf(pt.part, rows)
	partitionNumbers(h, n, pt.part, pt.start[1:])
	pt.numbered = rows
	return pt.split(mem, rec, n, scatter, out)
}

// PartitionLike splits rec the way the last Partition (or PartitionLike)
// call split its record's first rec.NumRows() rows, without hashing: for a record whose
// rows are, in order, the first rows of that record (the same keys), it
// gives what Partition would. It fails when the last call had fewer rows
// or none.
func (pt *Partitioner) PartitionLike(mem memory.Allocator, rec arrow.RecordBatch, n int) ([]arrow.RecordBatch, error) {
	rows := int(rec.NumRows())
	out := make([]arrow.RecordBatch, n)
	if rows == 0 {
		return out, nil
	}
	if rows > pt.numbered || len(pt.start) != n+1 {
		return nil, fmt.Errorf("%w: partition like: %d rows in %d partitions after a partitioning of %d rows in %d", batch.ErrAggSchema, rows, n, pt.numbered, len(pt.start)-1)
	}
	pt.numbered = rows
	clear(pt.start)
	pt.part = pt.part[:rows]
	for _, p := range pt.part {
		pt.start[p+1]++
	}
	return pt.split(mem, rec, n, true, out)
}

// split is Partition's second half: rec's rows by the partition numbers
// pt.part, with pt.start[p+1] holding partition p's row count.
func (pt *Partitioner) split(mem memory.Allocator, rec arrow.RecordBatch, n int, scatter bool, out []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	rows := int(rec.NumRows())
	start, part := pt.start, pt.part
	for p := range n {
		if int(start[p+1]) == rows {
			rec.Retain()
			out[p] = rec
			return out, nil
		}
		start[p+1] += start[p]
	}
	// cols[p][ci] is column ci of partition p. A null-free fixed-width
	// column is scattered: one sequential pass over it writes each row to
	// its partition's array. Any other column is gathered per partition
	// through the row indices, which reads the column once per partition.
	cols := make([][]arrow.Array, n)
	for p := range cols {
		if start[p+1] > start[p] {
			cols[p] = make([]arrow.Array, rec.NumCols())
		}
	}
	release := func() {
		for _, pc := range cols {
			for _, c := range pc {
				if c != nil {
					c.Release()
				}
			}
		}
	}
	var idx, dest []int32
	for ci := range int(rec.NumCols()) {
		c := rec.Column(ci)
		if scatter && pt.Shared && dest == nil && partScatterable(c) {
			// dest[i] is row i's place in the rows ordered by partition
			// (stable), computed once for every scattered column.
			pt.dest = scratchOf(pt.dest, rows)
			dest = pt.dest
			pt.pos = aggGrow(pt.pos[:0], n)
			pos := pt.pos
			copy(pos, start[:n])
			for i, p := range part {
				dest[i] = pos[p]
				pos[p]++
			}
		}
		if scatter && partScatter(mem, c, part, dest, start, cols, ci) {
			continue
		}
		if idx == nil {
			pt.idx = scratchOf(pt.idx, rows)
			idx = pt.idx
			pt.pos = aggGrow(pt.pos[:0], n)
			pos := pt.pos
			copy(pos, start[:n])
			for i, p := range part {
				idx[pos[p]] = int32(i)
				pos[p]++
			}
		}
		for p := range n {
			sel := idx[start[p]:start[p+1]]
			if len(sel) == 0 {
				continue
			}
			g, err := partGather(mem, c, sel)
			if err != nil {
				release()
				return nil, fmt.Errorf("partition: column %q: %w", rec.ColumnName(ci), err)
			}
			cols[p][ci] = g
		}
	}
	for p, pc := range cols {
		if pc == nil {
			continue
		}
		out[p] = array.NewRecordBatch(rec.Schema(), pc, int64(start[p+1]-start[p]))
		for _, c := range pc {
			c.Release()
		}
	}
	return out, nil
}

// scratchOf is s with length n, its old contents left as they are (the
// caller overwrites every element).
func scratchOf[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// partitionNumbers writes PartitionOf(h[i], n) to part[i] and counts the
// rows of each partition into count. A power-of-two n takes a mask, which
// gives the same numbers as the modulo without a 64-bit division a row.
func partitionNumbers(h []uint64, n int, part, count []int32) {
	if n&(n-1) == 0 {
		mask := uint64(n - 1)
		for i, x := range h {
			p := int32(x & mask)
			part[i] = p
			count[p]++
		}
		return
	}
	un := uint64(n)
	for i, x := range h {
		p := int32(x % un)
		part[i] = p
		count[p]++
	}
}

// partScatterable says whether partScatter takes column c: fixed-width,
// not boolean, without nulls.
func partScatterable(c arrow.Array) bool {
	if c.NullN() != 0 || c.DataType().ID() == arrow.BOOL {
		return false
	}
	switch keyTypeWidth(c.DataType()) {
	case 1, 2, 4, 8, 16:
		return true
	}
	return false
}

// partScatter writes column ci of every partition (cols[p][ci], for the
// partitions with rows) in one pass over c when partScatterable takes c,
// and otherwise returns false and does nothing. start[p] is the first row
// of partition p in the stable order. With dest (a Shared partitioner)
// row i goes to place dest[i] of one buffer laid out partition after
// partition, and each partition's array is a slice of that buffer;
// without, each partition gets its own buffer.
func partScatter(mem memory.Allocator, c arrow.Array, part, dest, start []int32, cols [][]arrow.Array, ci int) bool {
	if !partScatterable(c) {
		return false
	}
	switch keyTypeWidth(c.DataType()) {
	case 1:
		partScatterFixed[uint8](mem, c, part, dest, start, cols, ci)
	case 2:
		partScatterFixed[uint16](mem, c, part, dest, start, cols, ci)
	case 4:
		partScatterFixed[uint32](mem, c, part, dest, start, cols, ci)
	case 8:
		partScatterFixed[uint64](mem, c, part, dest, start, cols, ci)
	case 16:
		partScatterFixed[aggPair](mem, c, part, dest, start, cols, ci)
	}
	return true
}

func partScatterFixed[T any](mem memory.Allocator, c arrow.Array, part, dest, start []int32, cols [][]arrow.Array, ci int) {
	vals := gbValues[T](c)
	n := len(start) - 1
	var zero T
	w := int(unsafe.Sizeof(zero))
	if dest != nil {
		vals = vals[:len(dest)]
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(len(dest) * w)
		out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf.Bytes()))), len(dest))
		for i, d := range dest {
			out[d] = vals[i]
		}
		for p := range n {
			a, b := int(start[p]), int(start[p+1])
			if b > a {
				cols[p][ci] = aggFinish(c.DataType(), b-a, []*memory.Buffer{nil, memory.SliceBuffer(buf, a*w, (b-a)*w)}, 0)
			}
		}
		buf.Release()
		return
	}
	outs := make([][]T, n)
	bufs := make([]*memory.Buffer, n)
	for p := range n {
		cnt := int(start[p+1] - start[p])
		if cnt == 0 {
			continue
		}
		vb := memory.NewResizableBuffer(mem)
		vb.Resize(cnt * w)
		bufs[p] = vb
		outs[p] = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), cnt)
	}
	pos := make([]int32, n)
	for i, p := range part {
		outs[p][pos[p]] = vals[i]
		pos[p]++
	}
	for p, vb := range bufs {
		if vb != nil {
			cols[p][ci] = aggFinish(c.DataType(), int(pos[p]), []*memory.Buffer{nil, vb}, 0)
		}
	}
}

// partGather returns the rows sel of c, in order.
func partGather(mem memory.Allocator, c arrow.Array, sel []int32) (arrow.Array, error) {
	dt := c.DataType()
	n := len(sel)
	var nb *memory.Buffer
	nulls := 0
	if bm, off := gbBitmap(c); bm != nil {
		nb = memory.NewResizableBuffer(mem)
		nb.Resize(int(bitutil.BytesForBits(int64(n))))
		out := nb.Bytes()
		clear(out)
		for j, i := range sel {
			if bitutil.BitIsSet(bm, off+int(i)) {
				bitutil.SetBit(out, j)
			} else {
				nulls++
			}
		}
	}
	switch w := keyTypeWidth(dt); {
	case dt.ID() == arrow.BOOL:
		b := c.(*array.Boolean)
		vb := memory.NewResizableBuffer(mem)
		vb.Resize(int(bitutil.BytesForBits(int64(n))))
		out := vb.Bytes()
		clear(out)
		for j, i := range sel {
			if b.Value(int(i)) {
				bitutil.SetBit(out, j)
			}
		}
		return aggFinish(dt, n, []*memory.Buffer{nb, vb}, nulls), nil
	case w == 1:
		return partGatherFixed[uint8](mem, c, sel, nb, nulls), nil
	case w == 2:
		return partGatherFixed[uint16](mem, c, sel, nb, nulls), nil
	case w == 4:
		return partGatherFixed[uint32](mem, c, sel, nb, nulls), nil
	case w == 8:
		return partGatherFixed[uint64](mem, c, sel, nb, nulls), nil
	case w == 16:
		return partGatherFixed[aggPair](mem, c, sel, nb, nulls), nil
	case dt.ID() == arrow.STRING || dt.ID() == arrow.BINARY:
		return partGatherVar(mem, c, gbOffsets[int32](c), sel, nb, nulls), nil
	case dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.LARGE_BINARY:
		return partGatherVar(mem, c, gbOffsets[int64](c), sel, nb, nulls), nil
	}
	if nb != nil {
		nb.Release()
	}
	ib := memory.NewResizableBuffer(mem)
	ib.Resize(4 * n)
	copy(unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(ib.Bytes()))), n), sel)
	ind := aggFinish(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{nil, ib}, 0)
	defer ind.Release()
	return compute.TakeArray(compute.WithAllocator(context.Background(), mem), c, ind)
}

func partGatherFixed[T any](mem memory.Allocator, c arrow.Array, sel []int32, nb *memory.Buffer, nulls int) arrow.Array {
	vals := gbValues[T](c)
	var zero T
	vb := memory.NewResizableBuffer(mem)
	vb.Resize(len(sel) * int(unsafe.Sizeof(zero)))
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), len(sel))
	for j, i := range sel {
		out[j] = vals[i]
	}
	return aggFinish(c.DataType(), len(sel), []*memory.Buffer{nb, vb}, nulls)
}

func partGatherVar[O int32 | int64](mem memory.Allocator, c arrow.Array, offs []O, sel []int32, nb *memory.Buffer, nulls int) arrow.Array {
	data := gbVarData(c)
	var zero O
	ob := memory.NewResizableBuffer(mem)
	ob.Resize((len(sel) + 1) * int(unsafe.Sizeof(zero)))
	no := unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(ob.Bytes()))), len(sel)+1)
	total := O(0)
	for j, i := range sel {
		no[j] = total
		total += offs[i+1] - offs[i]
	}
	no[len(sel)] = total
	db := memory.NewResizableBuffer(mem)
	db.Resize(int(total))
	nd := db.Bytes()
	for j, i := range sel {
		copy(nd[no[j]:no[j+1]], data[offs[i]:offs[i+1]])
	}
	return aggFinish(c.DataType(), len(sel), []*memory.Buffer{nb, ob, db}, nulls)
}
