package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Output shaping of Load: a run of at least directRun consecutive rows of
// one stored record is returned as a zero-copy slice of it; shorter runs
// are gathered and concatenated into records of up to chunkRows rows.
const (
	directRun = 1024
	chunkRows = 64 << 10
)

// rowSink receives the rows of a loaded version, in order, as single rows
// or runs of consecutive rows of one record, and shapes them into records.
type rowSink interface {
	add(rec arrow.RecordBatch, row int)
	addRun(rec arrow.RecordBatch, start, n int)
	finish() ([]arrow.RecordBatch, error)
	release()
}

// load builds version from its base (the newest full delta after the
// newest snapshot at or before it, else that snapshot) and the deltas
// after the base, shaped for Load: long runs of stored rows as zero-copy
// slices, the rest gathered into records (emitter).
func (s *Store) load(ctx context.Context, version int64, l *listing) ([]arrow.RecordBatch, error) {
	return s.loadInto(ctx, version, l, newEmitter(ctx, s.rowSchema, s.mem), false)
}

// loadInto builds version into out. With exact, the snapshot's own records
// go through out too, even when version is that snapshot.
//
// It reads the deltas after the snapshot newest first and stops at the
// first full one: the state there is that delta's upserts, so what came
// before it is not read (and may have been purged).
func (s *Store) loadInto(ctx context.Context, version int64, l *listing, out rowSink, exact bool) ([]arrow.RecordBatch, error) {
	snapV := l.snapshotAtOrBefore(version)
	var files []*decodedFile
	defer func() {
		for _, f := range files {
			f.release()
		}
	}()
	// A gap is reported at its oldest missing delta, unless a full delta
	// after the gap makes it irrelevant.
	missing := int64(-1)
	for v := snapV + 1; v <= version; v++ {
		if !l.deltas[v] {
			missing = v
			break
		}
	}
	deltas := make([]*decodedFile, 0, version-snapV) // newest first
	fromFull := false
	for v := version; v > snapV; v-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !l.deltas[v] {
			return nil, &missingError{name: fileName(missing, kindDelta), dir: s.st.URL(), hint: l.purgedHint(version)}
		}
		f, err := s.readFile(ctx, v, kindDelta)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		deltas = append(deltas, f)
		s.setFull(v, f.full, true)
		if f.full {
			fromFull = true
			break
		}
	}
	slices.Reverse(deltas)
	var snap []arrow.RecordBatch
	snapName := ""
	if snapV >= 0 && !fromFull {
		f, err := s.readFile(ctx, snapV, kindSnapshot)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		snap = f.sections[0].recs
		snapName = s.file(fileName(snapV, kindSnapshot))
	}
	if snapV == version && !exact {
		out := make([]arrow.RecordBatch, 0, len(snap))
		for _, r := range snap {
			if r.NumRows() > 0 {
				r.Retain()
				out = append(out, r)
			}
		}
		return out, nil
	}
	return s.merge(ctx, snap, snapName, s.overlay(deltas), out)
}

// merge walks the snapshot rows (ascending key order) and the changes
// (ascending key order) together and returns the resulting rows, in
// ascending key order. Within a snapshot record it finds each change's
// place by galloping from the previous one, so it encodes O(changes × log
// gap) keys, not every row's; runs of untouched rows pass as zero-copy slices. The
// snapshot's order is checked at record edges (the checksum already
// vouches for the bytes Maintain wrote sorted).
func (s *Store) merge(ctx context.Context, snap []arrow.RecordBatch, snapName string, changes []change, e rowSink) ([]arrow.RecordBatch, error) {
	emit := func(c change) {
		if c.rec != nil {
			e.add(c.rec, c.row)
		}
	}
	j := 0
	var prev, first, last, probe []byte
	for ri, r := range snap {
		if err := ctx.Err(); err != nil {
			e.release()
			return nil, err
		}
		n := int(r.NumRows())
		if n == 0 {
			continue
		}
		enc := newKeyEncoder(r, s.nkeys)
		first, last = enc.encode(first[:0], 0), enc.encode(last[:0], n-1)
		if prev != nil && bytes.Compare(prev, first) >= 0 || bytes.Compare(first, last) > 0 {
			e.release()
			return nil, &CorruptionError{File: snapName, Offset: -1, Reason: fmt.Sprintf("record %d: keys are not in ascending order", ri)}
		}
		prev = append(prev[:0], last...)
		pos := 0 // rows before pos are emitted
		probeAt := -1
		at := func(i int) []byte { // row i's key, in probe
			if probeAt != i {
				probe, probeAt = enc.encode(probe[:0], i), i
			}
			return probe
		}
		for ; j < len(changes) && bytes.Compare(changes[j].key, last) <= 0; j++ {
			c := changes[j]
			// Gallop from pos to bracket c's place, then search the
			// bracket: a change next to the previous one costs a probe
			// or two, a far one O(log distance).
			lo, hi := pos, pos
			for step := 1; hi < n && bytes.Compare(at(hi), c.key) < 0; step *= 2 {
				lo, hi = hi+1, min(n, hi+step)
			}
			i := lo + sort.Search(hi-lo, func(k int) bool {
				return bytes.Compare(at(lo+k), c.key) >= 0
			})
			e.addRun(r, pos, i-pos)
			pos = i
			if i < n && bytes.Equal(at(i), c.key) {
				pos++ // the change replaces or deletes this row
			}
			emit(c)
		}
		e.addRun(r, pos, n-pos)
	}
	for ; j < len(changes); j++ {
		emit(changes[j])
	}
	return e.finish()
}

// emitter gathers output rows, given one at a time as (record, row), into
// as few records as it can: a long run of consecutive rows of one record
// becomes a zero-copy slice of it; shorter runs are gathered (Arrow take)
// into records of up to chunkRows rows.
type emitter struct {
	ctx         context.Context // carries the allocator for compute
	schema      *arrow.Schema
	mem         memory.Allocator
	out         []arrow.RecordBatch
	pending     []run
	pendingRows int
	err         error

	cur run // the run being extended
}

// run is rows [start, start+n) of rec.
type run struct {
	rec      arrow.RecordBatch
	start, n int
}

func newEmitter(ctx context.Context, schema *arrow.Schema, mem memory.Allocator) *emitter {
	return &emitter{ctx: compute.WithAllocator(ctx, mem), schema: schema, mem: mem}
}

func (e *emitter) add(rec arrow.RecordBatch, row int) {
	if e.cur.n > 0 && rec == e.cur.rec && row == e.cur.start+e.cur.n {
		e.cur.n++
		return
	}
	e.flushRun()
	e.cur = run{rec: rec, start: row, n: 1}
}

// addRun adds rows [start, start+n) of rec.
func (e *emitter) addRun(rec arrow.RecordBatch, start, n int) {
	if n == 0 {
		return
	}
	if e.cur.n > 0 && rec == e.cur.rec && start == e.cur.start+e.cur.n {
		e.cur.n += n
		return
	}
	e.flushRun()
	e.cur = run{rec: rec, start: start, n: n}
}

func (e *emitter) flushRun() {
	r := e.cur
	e.cur.n = 0
	if r.n == 0 || e.err != nil {
		return
	}
	if r.n >= directRun {
		e.flushPending()
		e.out = append(e.out, slice(r))
		return
	}
	e.pending = append(e.pending, r)
	e.pendingRows += r.n
	if e.pendingRows >= chunkRows {
		e.flushPending()
	}
}

// slice returns run r as a record, sharing r.rec's buffers.
func slice(r run) arrow.RecordBatch {
	if r.start == 0 && int64(r.n) == r.rec.NumRows() {
		r.rec.Retain()
		return r.rec
	}
	return r.rec.NewSlice(int64(r.start), int64(r.start+r.n))
}

// flushPending turns the pending runs into one record.
func (e *emitter) flushPending() {
	defer func() { e.pending, e.pendingRows = e.pending[:0], 0 }()
	switch {
	case len(e.pending) == 0 || e.err != nil:
		return
	case len(e.pending) == 1:
		e.out = append(e.out, slice(e.pending[0]))
		return
	}
	g, err := newGather(e.pending, e.pendingRows, e.mem)
	if err != nil {
		e.err = err
		return
	}
	defer g.release()
	cols := make([]arrow.Array, e.schema.NumFields())
	defer releaseArrays(cols)
	for c := range cols {
		a, err := g.column(e.ctx, c)
		if err != nil {
			e.err = fmt.Errorf("gather rows of column %q: %w", e.schema.Field(c).Name, err)
			return
		}
		cols[c] = a
	}
	e.out = append(e.out, array.NewRecordBatch(e.schema, cols, int64(e.pendingRows)))
}

func (e *emitter) finish() ([]arrow.RecordBatch, error) {
	e.flushRun()
	e.flushPending()
	if e.err != nil {
		e.release()
		return nil, e.err
	}
	return e.out, nil
}

func (e *emitter) release() {
	releaseAll(e.out)
	e.out, e.pending = nil, nil
}

// gather picks rows out of a few source records, in a given order. Per
// column it takes each source's rows (in output order) and, when there is
// more than one source, concatenates those and takes them again through a
// permutation: O(rows) work in Arrow kernels, whatever the number of runs.
type gather struct {
	runs    []run
	rows    int
	sources []arrow.RecordBatch
	idx     []arrow.Array // per source: its rows, in output order
	perm    arrow.Array   // output row → row of the concatenated takes; nil for one source
}

func newGather(runs []run, rows int, mem memory.Allocator) (*gather, error) {
	g := &gather{runs: runs, rows: rows}
	var ids []int // source of each run
	var idx [][]int32
	for _, r := range runs {
		s := slices.Index(g.sources, r.rec)
		if s < 0 {
			s = len(g.sources)
			g.sources = append(g.sources, r.rec)
			idx = append(idx, nil)
		}
		ids = append(ids, s)
		for k := r.start; k < r.start+r.n; k++ {
			idx[s] = append(idx[s], int32(k))
		}
	}
	b := array.NewInt32Builder(mem)
	defer b.Release()
	for _, rows := range idx {
		b.AppendValues(rows, nil)
		g.idx = append(g.idx, b.NewArray())
	}
	if len(g.sources) > 1 {
		base := make([]int32, len(idx)) // where each source's rows start in the concatenation
		for s := 1; s < len(idx); s++ {
			base[s] = base[s-1] + int32(len(idx[s-1]))
		}
		next := make([]int32, len(idx))
		b.Reserve(rows)
		for i, r := range runs {
			s := ids[i]
			for k := 0; k < r.n; k++ {
				b.UnsafeAppend(base[s] + next[s])
				next[s]++
			}
		}
		g.perm = b.NewArray()
	}
	return g, nil
}

// column returns column c of the gathered rows.
func (g *gather) column(ctx context.Context, c int) (arrow.Array, error) {
	taken := make([]arrow.Array, len(g.sources))
	defer releaseArrays(taken)
	for s, src := range g.sources {
		a, err := compute.TakeArray(ctx, src.Column(c), g.idx[s])
		if err != nil {
			if errors.Is(err, arrow.ErrNotImplemented) {
				return g.columnBySlices(ctx, c)
			}
			return nil, err
		}
		taken[s] = a
	}
	if g.perm == nil {
		taken[0].Retain()
		return taken[0], nil
	}
	mem := compute.GetAllocator(ctx)
	cat, err := array.Concatenate(taken, mem)
	if err != nil {
		return nil, err
	}
	defer cat.Release()
	return compute.TakeArray(ctx, cat, g.perm)
}

// columnBySlices gathers column c by concatenating a slice per run: slower,
// for the types the take kernels do not cover (view types, for example).
func (g *gather) columnBySlices(ctx context.Context, c int) (arrow.Array, error) {
	parts := make([]arrow.Array, len(g.runs))
	defer releaseArrays(parts)
	for i, r := range g.runs {
		parts[i] = array.NewSlice(r.rec.Column(c), int64(r.start), int64(r.start+r.n))
	}
	return array.Concatenate(parts, compute.GetAllocator(ctx))
}

func (g *gather) release() {
	releaseArrays(g.idx)
	if g.perm != nil {
		g.perm.Release()
	}
}

func releaseArrays(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// chunker shapes a snapshot's rows into records of exactly size rows (the
// last may be shorter), so that a snapshot's bytes depend on the state
// alone, not on the files it was built from. Every chunk is built afresh,
// once per column, by concatenating slices of the stored records when the
// runs are long and by gathering (take) when they are short.
type chunker struct {
	ctx       context.Context // carries the allocator for compute
	schema    *arrow.Schema
	mem       memory.Allocator
	size      int
	concatRun int                           // average run length from which slices are concatenated
	emit      func(arrow.RecordBatch) error // when set, takes each chunk (out stays empty)
	out       []arrow.RecordBatch
	runs      []run // of the chunk being filled
	rows      int
	cur       run // the run being extended
	err       error
}

// concatRun is the average run length from which concatenating slices
// beats gathering rows one by one.
const concatRun = 16

func newChunker(ctx context.Context, schema *arrow.Schema, mem memory.Allocator, size, concatRun int) *chunker {
	return &chunker{ctx: compute.WithAllocator(ctx, mem), schema: schema, mem: mem, size: size, concatRun: concatRun}
}

func (c *chunker) add(rec arrow.RecordBatch, row int) { c.addRun(rec, row, 1) }

func (c *chunker) addRun(rec arrow.RecordBatch, start, n int) {
	if n == 0 {
		return
	}
	if c.cur.n > 0 && rec == c.cur.rec && start == c.cur.start+c.cur.n {
		c.cur.n += n
		return
	}
	c.flushRun()
	c.cur = run{rec: rec, start: start, n: n}
}

// flushRun moves the current run into chunks, splitting it at chunk
// edges.
func (c *chunker) flushRun() {
	r := c.cur
	c.cur.n = 0
	for r.n > 0 && c.err == nil {
		m := min(r.n, c.size-c.rows)
		c.runs = append(c.runs, run{rec: r.rec, start: r.start, n: m})
		c.rows += m
		r.start, r.n = r.start+m, r.n-m
		if c.rows == c.size {
			c.flushChunk()
		}
	}
}

func (c *chunker) flushChunk() {
	defer func() { c.runs, c.rows = c.runs[:0], 0 }()
	if len(c.runs) == 0 || c.err != nil {
		return
	}
	cols := make([]arrow.Array, c.schema.NumFields())
	defer releaseArrays(cols)
	if c.rows >= c.concatRun*len(c.runs) {
		parts := make([]arrow.Array, len(c.runs))
		for col := range cols {
			for i, r := range c.runs {
				parts[i] = array.NewSlice(r.rec.Column(col), int64(r.start), int64(r.start+r.n))
			}
			a, err := array.Concatenate(parts, c.mem)
			releaseArrays(parts)
			if err != nil {
				c.err = fmt.Errorf("concatenate rows of column %q: %w", c.schema.Field(col).Name, err)
				return
			}
			cols[col] = a
		}
	} else {
		g, err := newGather(c.runs, c.rows, c.mem)
		if err != nil {
			c.err = err
			return
		}
		defer g.release()
		for col := range cols {
			a, err := g.column(c.ctx, col)
			if err != nil {
				c.err = fmt.Errorf("gather rows of column %q: %w", c.schema.Field(col).Name, err)
				return
			}
			// Concatenating the one gathered array lays its buffers out
			// as concatenating slices would (take pads some to 64 bytes),
			// so both ways write the same bytes.
			cols[col], err = array.Concatenate([]arrow.Array{a}, c.mem)
			a.Release()
			if err != nil {
				c.err = fmt.Errorf("gather rows of column %q: %w", c.schema.Field(col).Name, err)
				return
			}
		}
	}
	rec := array.NewRecordBatch(c.schema, cols, int64(c.rows))
	if c.emit == nil {
		c.out = append(c.out, rec)
		return
	}
	c.err = c.emit(rec)
	rec.Release()
}

func (c *chunker) finish() ([]arrow.RecordBatch, error) {
	c.flushRun()
	c.flushChunk()
	if c.err != nil {
		c.release()
		return nil, c.err
	}
	return c.out, nil
}

func (c *chunker) release() {
	releaseAll(c.out)
	c.out, c.runs = nil, nil
}
