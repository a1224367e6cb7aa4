package statestore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
			return nil, &missingError{name: fileName(v, kindDelta), dir: s.st.URL()}
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
// ascending key order.
func (s *Store) merge(ctx context.Context, snap []arrow.RecordBatch, snapName string, changes []change) ([]arrow.RecordBatch, error) {
	e := &emitter{schema: s.rowSchema, mem: s.mem}
	j := 0
	var cur, prev []byte
	first := true
	for ri, r := range snap {
		if err := ctx.Err(); err != nil {
			e.release()
			return nil, err
		}
		enc := newKeyEncoder(r, s.nkeys)
		for i := 0; i < int(r.NumRows()); i++ {
			cur = enc.encode(cur[:0], i)
			if !first && bytes.Compare(prev, cur) >= 0 {
				e.release()
				return nil, &CorruptionError{File: snapName, Offset: -1, Reason: fmt.Sprintf("record %d row %d: keys are not in ascending order", ri, i)}
			}
			first = false
			for j < len(changes) && changes[j].key < string(cur) {
				if c := changes[j]; c.rec != nil {
					e.add(c.rec, c.row)
				}
				j++
			}
			if j < len(changes) && changes[j].key == string(cur) {
				if c := changes[j]; c.rec != nil {
					e.add(c.rec, c.row)
				}
				j++
			} else {
				e.add(r, i)
			}
			prev, cur = cur, prev
		}
	}
	for ; j < len(changes); j++ {
		if c := changes[j]; c.rec != nil {
			e.add(c.rec, c.row)
		}
	}
	return e.finish()
}

// emitter gathers output rows, given one at a time as (record, row), into
// as few records as it can: runs of consecutive rows become slices.
type emitter struct {
	schema      *arrow.Schema
	mem         memory.Allocator
	out         []arrow.RecordBatch
	pending     []arrow.RecordBatch
	pendingRows int
	err         error

	cur      arrow.RecordBatch // current run: cur's rows [start, start+n)
	start, n int
}

func (e *emitter) add(rec arrow.RecordBatch, row int) {
	if e.n > 0 && rec == e.cur && row == e.start+e.n {
		e.n++
		return
	}
	e.flushRun()
	e.cur, e.start, e.n = rec, row, 1
}

func (e *emitter) flushRun() {
	if e.n == 0 || e.err != nil {
		e.n = 0
		return
	}
	var sl arrow.RecordBatch
	if e.start == 0 && int64(e.n) == e.cur.NumRows() {
		e.cur.Retain()
		sl = e.cur
	} else {
		sl = e.cur.NewSlice(int64(e.start), int64(e.start+e.n))
	}
	if e.n >= directRun {
		e.flushPending()
		e.out = append(e.out, sl)
	} else {
		e.pending = append(e.pending, sl)
		e.pendingRows += e.n
		if e.pendingRows >= chunkRows {
			e.flushPending()
		}
	}
	e.n = 0
}

func (e *emitter) flushPending() {
	defer func() {
		releaseAll(e.pending)
		e.pending, e.pendingRows = e.pending[:0], 0
	}()
	switch {
	case len(e.pending) == 0 || e.err != nil:
		return
	case len(e.pending) == 1:
		e.pending[0].Retain()
		e.out = append(e.out, e.pending[0])
		return
	}
	cols := make([]arrow.Array, e.schema.NumFields())
	defer releaseAll2(cols)
	parts := make([]arrow.Array, len(e.pending))
	for c := range cols {
		for p, r := range e.pending {
			parts[p] = r.Column(c)
		}
		a, err := array.Concatenate(parts, e.mem)
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
	releaseAll(e.pending)
	e.out, e.pending = nil, nil
}

func releaseAll2(arrs []arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}
