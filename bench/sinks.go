package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// answer is what a workload computes, in a form that a streamed result and
// a reference can be compared in.
type answer interface {
	// diff describes how a differs from ref, or returns "" when they agree.
	diff(ref answer) string
	summary() string
}

// resultSink is a sink that keeps what it needs to compute the workload's
// answer. Every one is idempotent in the batch id.
type resultSink interface {
	AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error
	answer() answer
}

// ---- checksums of a stateless query's output ----

type colKind int

const (
	kInt   colKind = iota // sum of values
	kFloat                // sum of values (float64)
	kTime                 // sum of (milliseconds - base)
	kStr                  // sum of byte lengths
)

type colSum struct {
	name string
	kind colKind
}

// checksum summarises rows: their count and one sum per column.
type checksum struct {
	rows   int64
	ints   []int64
	floats []float64
	cols   []colSum
}

func (c checksum) summary() string {
	s := fmt.Sprintf("%d rows", c.rows)
	for i, col := range c.cols {
		if col.kind == kFloat {
			s += fmt.Sprintf(", %s %.6g", col.name, c.floats[i])
		} else {
			s += fmt.Sprintf(", %s %d", col.name, c.ints[i])
		}
	}
	return s
}

func (c checksum) diff(ref answer) string {
	r, ok := ref.(checksum)
	if !ok {
		return fmt.Sprintf("reference is a %T", ref)
	}
	if c.rows != r.rows {
		return fmt.Sprintf("rows %d, reference %d", c.rows, r.rows)
	}
	for i, col := range c.cols {
		if col.kind == kFloat {
			a, b := c.floats[i], r.floats[i]
			if math.Abs(a-b) > 1e-9*math.Max(math.Abs(a), math.Abs(b)) {
				return fmt.Sprintf("sum of %s %.17g, reference %.17g", col.name, a, b)
			}
			continue
		}
		if c.ints[i] != r.ints[i] {
			return fmt.Sprintf("checksum of %s %d, reference %d", col.name, c.ints[i], r.ints[i])
		}
	}
	return ""
}

func newChecksum(cols []colSum) checksum {
	return checksum{cols: cols, ints: make([]int64, len(cols)), floats: make([]float64, len(cols))}
}

func (c *checksum) add(o checksum) {
	c.rows += o.rows
	for i := range c.cols {
		c.ints[i] += o.ints[i]
		c.floats[i] += o.floats[i]
	}
}

// checksumRecords computes the checksum of records, whose schema must have
// the columns of cols with the kinds' types.
func checksumRecords(cols []colSum, baseMs int64, records []arrow.RecordBatch) (checksum, error) {
	c := newChecksum(cols)
	for _, rec := range records {
		c.rows += rec.NumRows()
		for i, col := range cols {
			idx := rec.Schema().FieldIndices(col.name)
			if len(idx) != 1 {
				return c, fmt.Errorf("checksum: no column %q in %s", col.name, rec.Schema())
			}
			arr := rec.Column(idx[0])
			if arr.NullN() > 0 {
				return c, fmt.Errorf("checksum: column %q has nulls", col.name)
			}
			switch a := arr.(type) {
			case *array.Int64:
				for _, v := range a.Int64Values() {
					c.ints[i] += v
				}
			case *array.Float64:
				for _, v := range a.Float64Values() {
					c.floats[i] += v
				}
			case *array.Timestamp:
				mult := int64(a.DataType().(*arrow.TimestampType).Unit.Multiplier()) // ns per unit
				for _, v := range a.TimestampValues() {
					c.ints[i] += int64(v)*mult/1e6 - baseMs
				}
			case *array.String:
				offs := a.ValueOffsets()
				c.ints[i] += int64(offs[len(offs)-1] - offs[0])
			default:
				return c, fmt.Errorf("checksum: column %q is %s", col.name, arr.DataType())
			}
		}
	}
	return c, nil
}

// checksumSink keeps one checksum per batch id: a repeated batch replaces
// its own entry, so repeats are harmless.
type checksumSink struct {
	cols   []colSum
	baseMs int64
	mu     sync.Mutex
	byID   map[int64]checksum
}

func newChecksumSink(cols []colSum, baseMs int64) *checksumSink {
	return &checksumSink{cols: cols, baseMs: baseMs, byID: map[int64]checksum{}}
}

func (s *checksumSink) Description() string { return "bench-checksum" }

func (s *checksumSink) AddBatch(_ context.Context, batchID int64, _ *arrow.Schema, records []arrow.RecordBatch) error {
	c, err := checksumRecords(s.cols, s.baseMs, records)
	if err != nil {
		return fmt.Errorf("batch %d: %w", batchID, err)
	}
	s.mu.Lock()
	s.byID[batchID] = c
	s.mu.Unlock()
	return nil
}

func (s *checksumSink) answer() answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	total := newChecksum(s.cols)
	for _, id := range ids {
		total.add(s.byID[id])
	}
	return total
}

// ---- the settlement aggregation: exact totals per merchant ----

type totals struct{ sum, count int64 }

// totalsBy is the exact (sum, count) of each group.
type totalsBy[K comparable] map[K]totals

// groupTotals is keyed by a string merchant (agg), keyTotals by an int64 one
// (kernel, agg-int64).
type (
	groupTotals = totalsBy[string]
	keyTotals   = totalsBy[int64]
)

func (g totalsBy[K]) summary() string {
	var sum, count int64
	for _, t := range g {
		sum, count = sum+t.sum, count+t.count
	}
	return fmt.Sprintf("%d groups, %d rows, total %d", len(g), count, sum)
}

func (g totalsBy[K]) diff(ref answer) string {
	r, ok := ref.(totalsBy[K])
	if !ok {
		return fmt.Sprintf("reference is a %T", ref)
	}
	if len(g) != len(r) {
		return fmt.Sprintf("%d groups, reference %d", len(g), len(r))
	}
	var bad []string
	for k, v := range g {
		if rv, ok := r[k]; !ok || rv != v {
			bad = append(bad, fmt.Sprintf("%v: %+v, reference %+v", k, v, rv))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Sprintf("%d groups differ, first %s", len(bad), bad[0])
	}
	return ""
}

// addTotals sets into's groups from the rows of rec: key column key (string
// for a groupTotals, int64 for a keyTotals), int64 columns sum and count,
// none of them null. A later row of a group replaces an earlier one.
func addTotals(into answer, rec arrow.RecordBatch, key, sum, count string) error {
	sc := rec.Schema()
	column := func(name string) arrow.Array {
		if idx := sc.FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	keys, sumCol, countCol := column(key), column(sum), column(count)
	sums, ok1 := sumCol.(*array.Int64)
	counts, ok2 := countCol.(*array.Int64)
	if keys == nil || !ok1 || !ok2 || keys.NullN() > 0 || sums.NullN() > 0 || counts.NullN() > 0 {
		return fmt.Errorf("want non-null columns %s, %s int64, %s int64 in %s", key, sum, count, sc)
	}
	switch g := into.(type) {
	case groupTotals:
		ks, ok := keys.(*array.String)
		if !ok {
			return fmt.Errorf("key column %s is %s, want utf8", key, keys.DataType())
		}
		for i := 0; i < ks.Len(); i++ {
			t, k := totals{sum: sums.Value(i), count: counts.Value(i)}, ks.Value(i)
			if _, ok := g[k]; ok {
				g[k] = t
			} else {
				g[string([]byte(k))] = t // copy: k aliases the record
			}
		}
	case keyTotals:
		ks, ok := keys.(*array.Int64)
		if !ok {
			return fmt.Errorf("key column %s is %s, want int64", key, keys.DataType())
		}
		for i, k := range ks.Int64Values() {
			g[k] = totals{sum: sums.Value(i), count: counts.Value(i)}
		}
	default:
		return fmt.Errorf("totals of %T", into)
	}
	return nil
}

// keptBatches holds the output records of each batch id, retained, so a
// sink does no per-row work while the engine is timed; the answer is
// computed from them afterwards. A repeated batch id at or below the last
// one seen is skipped (update-mode rows carry a group's full value, so a
// repeat is harmless either way).
type keptBatches struct {
	mu   sync.Mutex
	last int64
	recs [][]arrow.RecordBatch // in batch order
}

func (k *keptBatches) add(batchID int64, records []arrow.RecordBatch) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if batchID <= k.last {
		return
	}
	for _, r := range records {
		r.Retain()
	}
	k.recs = append(k.recs, slices.Clone(records))
	k.last = batchID
}

// each calls fn for every kept record in batch order and releases them.
func (k *keptBatches) each(fn func(arrow.RecordBatch) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var err error
	for _, recs := range k.recs {
		for _, r := range recs {
			if err == nil {
				err = fn(r)
			}
			r.Release()
		}
	}
	k.recs = nil
	return err
}

// totalsSink keeps the newest (sum, count) of each group of an update-mode
// aggregation, keyed by a string (groupTotals) or an int64 (keyTotals)
// column.
type totalsSink struct {
	key, sum, count string
	kept            keptBatches
}

func newTotalsSink(key, sum, count string) *totalsSink {
	return &totalsSink{key: key, sum: sum, count: count, kept: keptBatches{last: -1}}
}

func (s *totalsSink) Description() string { return "bench-totals" }

func (s *totalsSink) AddBatch(_ context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	if len(schema.FieldIndices(s.key)) != 1 || len(schema.FieldIndices(s.sum)) != 1 || len(schema.FieldIndices(s.count)) != 1 {
		return fmt.Errorf("batch %d: want columns %s, %s, %s in %s", batchID, s.key, s.sum, s.count, schema)
	}
	s.kept.add(batchID, records)
	return nil
}

func (s *totalsSink) answer() answer {
	var groups answer
	err := s.kept.each(func(rec arrow.RecordBatch) error {
		if groups == nil { // the key's type decides the answer's
			groups = groupTotals{}
			if idx := rec.Schema().FieldIndices(s.key); len(idx) == 1 && rec.Column(idx[0]).DataType().ID() == arrow.INT64 {
				groups = keyTotals{}
			}
		}
		return addTotals(groups, rec, s.key, s.sum, s.count)
	})
	if err != nil {
		return badAnswer(err.Error())
	}
	if groups == nil {
		return groupTotals{}
	}
	return groups
}

// badAnswer is an answer that could not be computed; it agrees with
// nothing.
type badAnswer string

func (b badAnswer) summary() string    { return "error: " + string(b) }
func (b badAnswer) diff(answer) string { return "no answer: " + string(b) }

// ---- windowed answers (q5, q7) ----

// windowKey is a window start (Unix ms) and a group key.
type windowKey struct{ start, key int64 }

// windowValues keeps the newest value of each (window, key) of an
// update-mode windowed aggregation.
type windowValues map[windowKey]int64

// hotItems is Nexmark q5's answer: per window, the highest bid count, how
// many auctions reach it and the sum of their ids.
type hotItems map[int64][3]int64

func (h hotItems) summary() string {
	var bids int64
	for _, v := range h {
		bids += v[0]
	}
	return fmt.Sprintf("%d windows, sum of top counts %d", len(h), bids)
}

func (h hotItems) diff(ref answer) string { return diffWindows(h, ref) }

// maxPrices is the aggregation of Nexmark q7: the highest price per window.
type maxPrices map[int64][3]int64

func (m maxPrices) summary() string {
	var s int64
	for _, v := range m {
		s += v[0]
	}
	return fmt.Sprintf("%d windows, sum of max prices %d", len(m), s)
}

func (m maxPrices) diff(ref answer) string { return diffWindows(m, ref) }

func diffWindows[M ~map[int64][3]int64](a M, ref answer) string {
	r, ok := ref.(M)
	if !ok {
		return fmt.Sprintf("reference is a %T", ref)
	}
	if len(a) != len(r) {
		return fmt.Sprintf("%d windows, reference %d", len(a), len(r))
	}
	var bad []int64
	for w, v := range a {
		if r[w] != v {
			bad = append(bad, w)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Sprintf("%d windows differ, first at %d: %v, reference %v", len(bad), bad[0], a[bad[0]], r[bad[0]])
	}
	return ""
}

// hotFromTop is q5's answer from the engine's own top rows: every row of a
// window holds the window's highest count (RANK 1, ties kept), so the
// answer only counts and sums them; rows of one window that disagree mean
// the engine ranked wrongly.
func hotFromTop(v windowValues) answer {
	out := hotItems{}
	for k, c := range v {
		cur, ok := out[k.start]
		switch {
		case !ok:
			out[k.start] = [3]int64{c, 1, k.key}
		case c != cur[0]:
			return badAnswer(fmt.Sprintf("window %d: top rows with counts %d and %d", k.start, cur[0], c))
		default:
			out[k.start] = [3]int64{c, cur[1] + 1, cur[2] + k.key}
		}
	}
	return out
}

// windowSink keeps the newest value per (window_start, key) of an
// update-mode windowed aggregation; key "" means the window alone.
type windowSink struct {
	key, value string
	reduce     func(windowValues) answer
	kept       keptBatches
}

func newWindowSink(key, value string, reduce func(windowValues) answer) *windowSink {
	return &windowSink{key: key, value: value, reduce: reduce, kept: keptBatches{last: -1}}
}

func (s *windowSink) Description() string { return "bench-windows" }

func (s *windowSink) AddBatch(_ context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	if len(schema.FieldIndices("window_start")) != 1 || len(schema.FieldIndices(s.value)) != 1 ||
		(s.key != "" && len(schema.FieldIndices(s.key)) != 1) {
		return fmt.Errorf("batch %d: want window_start, %s and %q in %s", batchID, s.value, s.key, schema)
	}
	s.kept.add(batchID, records)
	return nil
}

func (s *windowSink) answer() answer {
	vals := windowValues{}
	err := s.kept.each(func(rec arrow.RecordBatch) error {
		sc := rec.Schema()
		ws, ok := rec.Column(sc.FieldIndices("window_start")[0]).(*array.Timestamp)
		v, ok2 := rec.Column(sc.FieldIndices(s.value)[0]).(*array.Int64)
		if !ok || !ok2 {
			return fmt.Errorf("unexpected column types in %s", sc)
		}
		mult := int64(ws.DataType().(*arrow.TimestampType).Unit.Multiplier())
		var keys *array.Int64
		if s.key != "" {
			if keys, ok = rec.Column(sc.FieldIndices(s.key)[0]).(*array.Int64); !ok {
				return fmt.Errorf("%s is not int64 in %s", s.key, sc)
			}
		}
		for i := 0; i < ws.Len(); i++ {
			k := windowKey{start: int64(ws.Value(i)) * mult / 1e6}
			if keys != nil {
				k.key = keys.Value(i)
			}
			vals[k] = v.Value(i)
		}
		return nil
	})
	if err != nil {
		return badAnswer(err.Error())
	}
	return s.reduce(vals)
}

func maxPerWindow(v windowValues) answer {
	out := maxPrices{}
	for k, p := range v {
		out[k.start] = [3]int64{p}
	}
	return out
}
