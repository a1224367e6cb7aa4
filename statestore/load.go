package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

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

// load builds version from the newest snapshot at or before it and the
// deltas after that snapshot.
func (s *Store) load(ctx context.Context, version int64, l *listing) ([]arrow.RecordBatch, error) {
	base := l.snapshotAtOrBefore(version)
	for v := base + 1; v <= version; v++ {
		if !l.deltas[v] {
			return nil, &missingError{name: fileName(v, kindDelta), dir: s.st.URL(), hint: l.purgedHint(version)}
		}
	}
	var files []*decodedFile
	defer func() {
		for _, f := range files {
			f.release()
		}
	}()
	var snap []arrow.RecordBatch
	snapName := ""
	if base >= 0 {
		f, err := s.readFile(ctx, base, kindSnapshot)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		snap = f.sections[0].recs
		snapName = s.file(fileName(base, kindSnapshot))
	}
	if base == version {
		out := make([]arrow.RecordBatch, 0, len(snap))
		for _, r := range snap {
			if r.NumRows() > 0 {
				r.Retain()
				out = append(out, r)
			}
		}
		return out, nil
	}
	deltas := make([]*decodedFile, 0, version-base)
	for v := base + 1; v <= version; v++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := s.readFile(ctx, v, kindDelta)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		deltas = append(deltas, f)
	}
	return s.merge(ctx, snap, snapName, s.overlay(deltas))
}

// change is the last change the deltas make to one key: an upsert (rec's
// row) or, with rec nil, a delete.
type change struct {
	key string // key encoding
	rec arrow.RecordBatch
	row int
}

// overlay replays deltas in order (within one delta, deletes before
// upserts) and returns each touched key's last change, in ascending key
// order.
func (s *Store) overlay(deltas []*decodedFile) []change {
	n := 0
	for _, d := range deltas {
		for _, sec := range d.sections {
			for _, r := range sec.recs {
				n += int(r.NumRows())
			}
		}
	}
	idx := make(map[string]int, n)
	changes := make([]change, 0, n)
	var buf []byte
	for _, d := range deltas {
		for _, part := range []int{1, 0} { // deletes, then upserts
			for _, r := range d.sections[part].recs {
				enc := newKeyEncoder(r, s.nkeys)
				var live arrow.RecordBatch
				if part == 0 {
					live = r
				}
				for i := 0; i < int(r.NumRows()); i++ {
					buf = enc.encode(buf[:0], i)
					if j, ok := idx[string(buf)]; ok {
						changes[j].rec, changes[j].row = live, i
						continue
					}
					k := string(buf)
					idx[k] = len(changes)
					changes = append(changes, change{key: k, rec: live, row: i})
				}
			}
		}
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.key, b.key) })
	return changes
}

// merge walks the snapshot rows (ascending key order) and the changes
// (ascending key order) together and returns the resulting rows, in
// ascending key order. Within a snapshot record it finds each change's
// place by binary search, so it encodes O(changes × log rows) keys, not
// every row's; runs of untouched rows pass as zero-copy slices. The
// snapshot's order is checked at record edges (the checksum already
// vouches for the bytes Maintain wrote sorted).
func (s *Store) merge(ctx context.Context, snap []arrow.RecordBatch, snapName string, changes []change) ([]arrow.RecordBatch, error) {
	e := newEmitter(ctx, s.rowSchema, s.mem)
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
		for ; j < len(changes) && changes[j].key <= string(last); j++ {
			c := changes[j]
			i := pos + sort.Search(n-pos, func(k int) bool {
				probe = enc.encode(probe[:0], pos+k)
				return string(probe) >= c.key
			})
			e.addRun(r, pos, i-pos)
			pos = i
			if i < n && string(enc.encode(probe[:0], i)) == c.key {
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

// rechunk returns recs' rows, in order, as records of exactly size rows
// (the last may be shorter). Snapshots are written this way so that their
// bytes depend on the state alone, not on how fragmented the loads that
// built them were.
func rechunk(recs []arrow.RecordBatch, size int, schema *arrow.Schema, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	var out, group []arrow.RecordBatch
	groupRows := 0
	fail := func(err error) ([]arrow.RecordBatch, error) {
		releaseAll(out)
		releaseAll(group)
		return nil, err
	}
	flush := func() error {
		defer func() {
			releaseAll(group)
			group, groupRows = group[:0], 0
		}()
		switch len(group) {
		case 0:
			return nil
		case 1:
			group[0].Retain()
			out = append(out, group[0])
			return nil
		}
		cols := make([]arrow.Array, schema.NumFields())
		defer releaseArrays(cols)
		parts := make([]arrow.Array, len(group))
		for c := range cols {
			for p, r := range group {
				parts[p] = r.Column(c)
			}
			a, err := array.Concatenate(parts, mem)
			if err != nil {
				return fmt.Errorf("rechunk column %q: %w", schema.Field(c).Name, err)
			}
			cols[c] = a
		}
		out = append(out, array.NewRecordBatch(schema, cols, int64(groupRows)))
		return nil
	}
	for _, r := range recs {
		for off := 0; off < int(r.NumRows()); {
			n := min(int(r.NumRows())-off, size-groupRows)
			group = append(group, slice(run{rec: r, start: off, n: n}))
			groupRows += n
			off += n
			if groupRows == size {
				if err := flush(); err != nil {
					return fail(err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	return out, nil
}
