package engine

import (
	"context"
	"errors"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// Partial aggregation before the hash partitioning (Spark's partial
// aggregate before the shuffle). Since one working table (whole.go)
// takes every in-memory group-by and window unpartitioned, this path runs
// only where the test knob config.partitionedAgg puts them back on the
// partitioned path, the oracle the one table is compared with; a disk-
// backed operator never had it. A hash aggregation whose aggregates
// combine exactly (kernel.GroupBy.Combinable) and whose state is in
// memory folds the prepared rows of a batch into one combiner GroupBy, in
// the order they arrive, instead of hashing and scattering every row into
// the partitions. When the batch's input is complete (before the
// partitions merge), the combiner's groups, keys and partial state, in
// first-seen order, are hash-partitioned by the key hash the rows would
// have had (so each group lands in its partition) and each partition folds
// them with GroupBy.MergeState. Partitioned stably, each partition sees its
// groups in the order of their first row in the batch, which is the order
// update mode emits: the answers, the state and the progress figures are
// those of the row-by-row path, batch for batch.
//
// Adaptive: the first combineProbeRows rows of a batch (all of them in a
// smaller batch) are only hashed and held; when their keys count more
// than half as many distinct values as rows (linear counting over a
// bitmap of the hashes) the whole batch is partitioned row by row as
// before, at the price of one hashing pass over the probe; otherwise the
// held rows and the rest go through the combiner. It flushes to the partitions whenever it holds combineMaxGroups
// groups. Every choice it makes (whether it gives up, where it flushes)
// is a function of the batch's rows alone, never of what the process saw
// in earlier batches, so a batch replayed after a restart takes the path
// it took before: the paths differ in one case (below), and a replay must
// not turn a failed batch into an emitted one or the other way round.
// An integer sum that overflows inside the combiner (a
// batch's rows of one group past int64) would fail where row-by-row adding
// from the group's running sum might not: the combiner then drops what it
// folded since its last flush and partitions those rows themselves, so the
// row-by-row path decides. The other way round, a batch whose rows take a
// group's running sum past int64 and back by its end succeeds here (only
// the batch's net sum is added) where row by row it fails: the sum is then
// the exact one.
//
// Operators without this path (joins, deduplication, sessions, panes,
// processors, disk-backed state) partition rows as before.

// combineMode is the test knob that forces the combiner on or off.
type combineMode int

// combineKnobs are the combiner's test knobs (config.combine): the mode,
// and in place of combineProbeRows and combineMaxGroups when not 0.
type combineKnobs struct {
	mode      combineMode
	probeRows int64
	maxGroups int
	// whole (tests) leaves an in-memory aggregation on one working table
	// (whole.go), where the combiner does not run; the tests that set
	// these knobs run the partitioned path otherwise.
	whole bool
}

const (
	combineAdaptive combineMode = iota // the default: on, off for a batch that does not reduce
	combineOff                         // never
	combineOn                          // always, however many groups
)

const (
	// combineProbeRows is how many rows of a batch the combiner folds
	// before it decides whether it reduces.
	combineProbeRows = 64 << 10
	// combineMaxGroups bounds the combiner's memory: holding this many
	// groups, it flushes (about 64 MiB at 64 bytes a group). A group
	// count, not the table's bytes: the table keeps its size between
	// batches, so bytes would make the flush points depend on earlier
	// batches.
	combineMaxGroups = 1 << 20
)

// combinerOp is an operator whose partitions can take partial states.
type combinerOp interface {
	// newCombiner returns an empty GroupBy of the operator's aggregates
	// over prepare's output, or nil when they do not combine exactly.
	newCombiner() (*kernel.GroupBy, error)
}

// stateMerger is a partition that folds partial states (KeySchema joined
// with StateSchema) into its groups.
type stateMerger interface {
	mergeState(rec arrow.RecordBatch) error
}

func (o *groupByOp) newCombiner() (*kernel.GroupBy, error) { return o.h.newCombiner() }
func (o *windowOp) newCombiner() (*kernel.GroupBy, error)  { return o.h.newCombiner() }

func (h *hashAgg) newCombiner() (*kernel.GroupBy, error) {
	gb, err := h.newGroupBy()
	if err != nil {
		return nil, err
	}
	if !gb.Combinable() {
		gb.Release()
		return nil, nil
	}
	return gb, nil
}

func (p *aggPart) mergeState(rec arrow.RecordBatch) error { return p.gb.MergeState(rec) }

// combiner is one operator's partial aggregation of the current batch. Its
// GroupBy and the partitioning scratch are kept from batch to batch.
type combiner struct {
	gb      *kernel.GroupBy
	keyCols []int // of the state records: the keys come first
	knobs   combineKnobs
	// per batch
	raw     bool  // the rest of the batch is partitioned row by row
	decided bool  // the adaptive check ran
	rows    int64 // rows folded this batch
	groups  int64 // groups flushed this batch
	// combined counts the rows that reached the partitions as partial
	// states this batch (progress: numRowsCombined).
	combined int64
	// held are the records folded since the last flush, kept for the
	// overflow fallback (the row-by-row path keeps as much in pending).
	held []arrow.RecordBatch
	// probe holds the batch's first rows, not folded yet, until the
	// adaptive check (probed rows in all); seen marks their key hashes
	// (linear counting), hashes is scratch.
	probe  []arrow.RecordBatch
	probed int64
	seen   []uint64
	marked int
	hashes []uint64
	keys   []arrow.Array // scratch: the probed record's key columns
}

// probeBits is the size of the adaptive check's hash bitmap: 2^20 bits
// (128 KiB) estimate up to 64k distinct keys within about 1%.
const probeBits = 1 << 20

// mark records the key hashes of rec's rows in the probe bitmap.
func (cb *combiner) mark(rec arrow.RecordBatch, keyCols []int) error {
	n := int(rec.NumRows())
	if cap(cb.hashes) < n {
		cb.hashes = make([]uint64, n)
	}
	h := cb.hashes[:n]
	keys := cb.keys[:0]
	for _, ci := range keyCols {
		keys = append(keys, rec.Column(ci))
	}
	cb.keys = keys
	err := kernel.HashRows(keys, h)
	clear(keys) // hold no column past the call
	if err != nil {
		return err
	}
	if cb.seen == nil {
		cb.seen = make([]uint64, probeBits/64)
	}
	for _, x := range h {
		b := x >> (64 - 20)
		w, bit := b>>6, uint64(1)<<(b&63)
		if cb.seen[w]&bit == 0 {
			cb.seen[w] |= bit
			cb.marked++
		}
	}
	return nil
}

// reduces says whether the probed rows hold at most half as many
// distinct keys as rows, by linear counting over the bitmap: a function
// of those rows alone.
func (cb *combiner) reduces() bool {
	m := float64(probeBits)
	distinct := -m * math.Log1p(-float64(cb.marked)/m)
	return 2*distinct <= float64(cb.probed)
}

// combinerOf returns c's combiner, building it at first use, or nil where
// the operator has none (see the package comment above).
func (ex *executor) combinerOf(c *chainOp) (*combiner, error) {
	if c.combChecked {
		return c.comb, nil
	}
	c.combChecked = true
	co, ok := c.op.(combinerOp)
	if !ok || c.disk || c.single || ex.combine.mode == combineOff {
		return nil, nil
	}
	gb, err := co.newCombiner()
	if err != nil || gb == nil {
		return nil, err
	}
	cb := &combiner{gb: gb, knobs: ex.combine}
	if cb.knobs.probeRows == 0 {
		cb.knobs.probeRows = combineProbeRows
	}
	if cb.knobs.maxGroups == 0 {
		cb.knobs.maxGroups = combineMaxGroups
	}
	cb.keyCols = firstColumns(gb.KeySchema().NumFields())
	c.comb = cb
	return cb, nil
}

// feed takes prep (prepared rows for c, released here) into c's combiner,
// or into its partitions' pending input when c has none or gave up for the
// batch. It runs in input order, one record at a time.
func (ex *executor) feed(ctx context.Context, c *chainOp, prep arrow.RecordBatch) error {
	cb, err := ex.combinerOf(c)
	if err != nil {
		prep.Release()
		return err
	}
	if cb == nil || cb.raw {
		return ex.partitionRaw(c, prep)
	}
	// The adaptive check comes after probeRows rows, inside a record if
	// need be: the rest of a large record is taken after the decision.
	// Until then the rows are only hashed (and held), so a batch that
	// does not reduce costs a pass of hashing, not a combiner merge and
	// a flush.
	if cb.knobs.mode == combineAdaptive && !cb.decided {
		if head := cb.knobs.probeRows - cb.probed; prep.NumRows() > head {
			a, b := prep.NewSlice(0, head), prep.NewSlice(head, prep.NumRows())
			prep.Release()
			if err := ex.feed(ctx, c, a); err != nil {
				b.Release()
				return err
			}
			return ex.feed(ctx, c, b)
		}
		if err := cb.mark(prep, c.op.partitionKeys(0)); err != nil {
			prep.Release()
			return err
		}
		cb.probe = append(cb.probe, prep)
		cb.probed += prep.NumRows()
		if cb.probed < cb.knobs.probeRows {
			return nil
		}
		return ex.decide(ctx, c)
	}
	if err := cb.gb.Merge(prep); err != nil {
		if !errors.Is(err, batch.ErrSumOverflow) {
			prep.Release()
			return err
		}
		// Row by row decides: the rows since the last flush go to the
		// partitions as they are, and so does the rest of the batch.
		cb.gb.Reset()
		cb.raw = true
		held := append(cb.held, prep)
		cb.held = cb.held[:0]
		for i, r := range held {
			if err := ex.partitionRaw(c, r); err != nil {
				for _, rest := range held[i+1:] {
					rest.Release()
				}
				return err
			}
		}
		return nil
	}
	cb.held = append(cb.held, prep)
	cb.rows += prep.NumRows()
	if cb.gb.Len() >= cb.knobs.maxGroups {
		return ex.flush(c)
	}
	return nil
}

// decide makes the adaptive check over the rows the probe holds (all the
// batch's rows when it has fewer than probeRows) and takes them, in
// order: into the combiner when they reduce, row by row (with the rest of
// the batch) when they do not.
func (ex *executor) decide(ctx context.Context, c *chainOp) error {
	cb := c.comb
	cb.decided = true
	if len(cb.probe) == 0 {
		return nil
	}
	cb.raw = !cb.reduces()
	held := append([]arrow.RecordBatch(nil), cb.probe...)
	clear(cb.probe)
	cb.probe = cb.probe[:0]
	for i, r := range held {
		if err := ex.feed(ctx, c, r); err != nil {
			for _, rest := range held[i+1:] {
				rest.Release()
			}
			return err
		}
	}
	return nil
}

// partitionRaw splits prep (released here) by c's partition keys into
// its partitions' pending input, with c's partitioning scratch.
func (ex *executor) partitionRaw(c *chainOp, prep arrow.RecordBatch) error {
	if c.single {
		c.add(0, []arrow.RecordBatch{prep}, false)
		return nil
	}
	defer prep.Release()
	pieces, err := c.pt.Partition(ex.mem, prep, c.op.partitionKeys(0), len(c.parts))
	if err != nil {
		return err
	}
	c.add(0, pieces, false)
	return nil
}

// endInput takes what the adaptive check still holds (a batch of fewer
// than probeRows rows) and flushes the combiner: the batch's input is
// complete.
func (ex *executor) endInput(ctx context.Context, c *chainOp) error {
	if cb := c.comb; cb != nil && !cb.decided {
		if err := ex.decide(ctx, c); err != nil {
			return err
		}
	}
	return ex.flush(c)
}

// flush hands the combiner's groups, as partial states, to c's
// partitions and empties it.
func (ex *executor) flush(c *chainOp) error {
	cb := c.comb
	if cb == nil {
		return nil
	}
	defer cb.dropHeld()
	if cb.gb.Len() == 0 {
		return nil
	}
	st := cb.gb.State()
	pieces, err := c.pt.Partition(ex.mem, st, cb.keyCols, len(c.parts))
	st.Release()
	if err != nil {
		return err
	}
	c.add(0, pieces, true)
	cb.groups += int64(cb.gb.Len())
	for _, r := range cb.held {
		cb.combined += r.NumRows()
	}
	cb.gb.Reset()
	return nil
}

func (cb *combiner) dropHeld() {
	for _, r := range cb.held {
		r.Release()
	}
	clear(cb.held)
	cb.held = cb.held[:0]
}

func (cb *combiner) dropProbe() {
	for _, r := range cb.probe {
		r.Release()
	}
	clear(cb.probe)
	cb.probe = cb.probe[:0]
	if cb.marked > 0 {
		clear(cb.seen)
	}
	cb.probed, cb.marked = 0, 0
}

// reset starts the next batch (after a failed one too).
func (cb *combiner) reset() {
	cb.dropHeld()
	cb.dropProbe()
	if cb.gb.Len() > 0 {
		cb.gb.Reset()
	}
	cb.raw, cb.decided, cb.rows, cb.groups, cb.combined = false, false, 0, 0, 0
}

func (cb *combiner) release() {
	cb.dropHeld()
	cb.dropProbe()
	cb.gb.Release()
}
