package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/onceflow/onceflow/batch"
)

// One working table for all state partitions.
//
// A hash aggregation whose state is in memory (a group-by, or a window
// computed a row per window) keeps all its groups in one kernel.GroupBy
// instead of one per state partition. The batch's rows reach that table
// as they are, in input order, with no hash partitioning; the state
// partitions are only the layout of the state files: at commit, the
// batch's state changes (its changed groups, or the whole state when it
// commits whole, and the keys it evicted) are split by the same row hash
// the partitioned path places input rows with (kernel.Partition of the
// state's key columns, which are the operator's partition keys), and each
// piece is committed to its partition's store, the stores in parallel.
// So every partition's store holds exactly the rows the partitioned path
// would have put there, and a checkpoint written by either path restarts
// on the other. A restart loads the partitions into the table in
// partition order.
//
// In update mode without eviction (aggPart.finishUpdate) the table builds
// the state change and the output already split: each group's partition
// is computed once, from the same hash of its keys, and the rows come
// partition by partition in the order the split above gives
// (kernel.GroupBy.StateOutputParts), each piece a slice of one record, so
// the commit neither hashes the state rows nor copies them or the output
// again.
//
// Why: the input arrives one record at a time on one goroutine, so hash
// partitioning it (hashing every row and copying every column into P
// pieces) was a sequential pass as costly as the merge it fed, and it
// bought parallel merges that the sequential pass already bounded. One
// table costs one merge of the input; what is split by partition is the
// batch's changed groups, fewer than its rows whenever groups repeat.
// The output is split by partition too and emitted partition by
// partition, so its rows come in the partitioned path's order exactly
// (update mode: each partition's changed groups in order of first touch;
// append and complete: each partition's sorted by key), which an
// order-sensitive aggregate (First, Last) of a next operator sees.
//
// Operators with disk-backed state keep a table per partition (a
// partition loads from and writes to its own store), and so do the other
// stateful operators (joins, deduplication, sessions, panes, top-N,
// processors).

// wholeTable reports whether operator o runs on one working table for all
// its state partitions.
func wholeTable(cfg *config, o operator) bool {
	switch o.(type) {
	case *groupByOp, *windowOp:
	default:
		return false
	}
	return cfg.backendFor(o.id()) == nil && !cfg.partitionedAgg
}

// finishWhole is finishOperator for an operator on one working table: it
// merges the batch's rows, finishes, splits the state changes by
// partition and commits every partition's store (in parallel).
func (ex *executor) finishWhole(ctx context.Context, c *chainOp, fc *finishCtx) ([]arrow.RecordBatch, error) {
	start := time.Now()
	defer func() { c.commitTime = time.Since(start) }()
	if c.wmem == nil {
		c.wmem = newRecycler(ex.mem)
	}
	pending := c.pending[0]
	c.pending[0] = pending[:0]
	var err error
	for _, pr := range pending {
		if err = c.parts[0].merge(ctx, pr.side, pr.rec); err != nil {
			break
		}
	}
	if errors.Is(err, batch.ErrSumOverflow) && ex.mergeNet(ctx, c, pending, fc.batchID-1) == nil {
		// Where the net sums overflow too, the row's error above names
		// where the sum first left the range.
		err = nil
	}
	for _, pr := range pending {
		pr.rec.Release()
	}
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", c.op.id(), err)
	}
	part := c.parts[0]
	if ps, ok := part.(interface{ splitInto(n int) }); ok && len(c.specs) == 1 {
		ps.splitInto(c.nParts)
	}
	f, err := part.finish(ctx, fc)
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", c.op.id(), err)
	}
	defer f.release()
	g, gctx := errgroup.WithContext(ctx)
	var pieces [][]arrow.RecordBatch
	defer func() {
		for _, ps := range pieces {
			releaseAll(ps)
		}
	}()
	// Every piece is split before any commit starts: a split that fails
	// returns with no commit in flight.
	for _, spec := range c.specs {
		ch := f.changes[spec.name]
		if f.parts != nil && spec.name == "" {
			// Built split (aggPart.finishUpdate): nothing removed.
			pieces = append(pieces, make([]arrow.RecordBatch, c.nParts), f.parts.upserts)
			f.parts.upserts = nil
			continue
		}
		rems, err := ex.splitState(c, ch.removals, spec)
		if err != nil {
			return nil, fmt.Errorf("operator %s%s: split state version %d by partition: %w", c.op.id(), storeLabel(spec), fc.batchID, err)
		}
		pieces = append(pieces, rems)
		// The upserts last: PartitionLike below reuses their numbers.
		ups, err := ex.splitState(c, ch.upserts, spec)
		if err != nil {
			return nil, fmt.Errorf("operator %s%s: split state version %d by partition: %w", c.op.id(), storeLabel(spec), fc.batchID, err)
		}
		pieces = append(pieces, ups)
	}
	for i, spec := range c.specs {
		ch := f.changes[spec.name]
		rems, ups := pieces[2*i], pieces[2*i+1]
		for p := range c.nParts {
			// A whole-state commit is whole in every partition: each
			// piece holds every live group of its partition (none, for a
			// partition without groups: its state is then empty).
			pc := stateChange{upserts: ups[p], removals: rems[p], full: ch.full}
			g.Go(func() error {
				if err := commitState(gctx, c.st[p][i], fc.batchID, pc); err != nil {
					return fmt.Errorf("operator %s partition %d%s: commit state version %d: %w", c.op.id(), p, storeLabel(spec), fc.batchID, err)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	part.committed()
	c.updated[0], c.removed[0], c.custom[0] = f.updated, f.removed, f.custom
	c.late.Add(f.late)
	if f.parts != nil {
		outs := f.parts.out
		f.parts.out = nil
		for _, o := range outs {
			if o != nil {
				return outs, nil
			}
		}
		return nil, nil
	}
	if f.out == nil || f.out.NumRows() == 0 {
		return nil, nil
	}
	// The output in partition order, each partition's rows in the order
	// finish gave them: the partitioned path's order exactly, which an
	// order-sensitive aggregate (First, Last) of a next operator sees.
	var outs []arrow.RecordBatch
	c.wpt.Shared = false // the output's pieces go on separately
	if up := f.changes[""].upserts; f.outHead && up != nil && up.NumRows() > 0 && len(c.specs) == 1 {
		// out is the head of the upserts, which were split last.
		outs, err = c.wpt.PartitionLike(ex.mem, f.out, c.nParts)
	} else {
		outs, err = c.wpt.Partition(ex.mem, f.out, c.outKeys(), c.nParts)
	}
	if err != nil {
		return nil, fmt.Errorf("operator %s: split output by partition: %w", c.op.id(), err)
	}
	return outs, nil
}

// outKeys are the output columns that hold the operator's keys: the
// first ones (group keys, and window_start and window_end after a
// window's keys).
func (c *chainOp) outKeys() []int { return firstColumns(c.specs[0].key.NumFields()) }

// firstColumns is [0, n): the key columns of state rows (keys first).
func firstColumns(n int) []int {
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	return cols
}

// splitState splits rec (state rows of spec, or its keys: the key columns
// come first) into c.nParts pieces by partition, nil where a partition
// has no rows. rec nil gives nils.
func (ex *executor) splitState(c *chainOp, rec arrow.RecordBatch, spec storeSpec) ([]arrow.RecordBatch, error) {
	if rec == nil || rec.NumRows() == 0 {
		return make([]arrow.RecordBatch, c.nParts), nil
	}
	keys := firstColumns(spec.key.NumFields())
	// The stores encode the pieces and keep none of them, nor anything
	// that points into them: the pieces may share one buffer per column,
	// and their buffers are recycled (the output's are not: what follows
	// may keep strings that point into them).
	c.wpt.Shared = true
	return c.wpt.Partition(c.wmem, rec, keys, c.nParts)
}

// mergeNet is the merge of a batch whose rows took an integer sum past
// the int64 range on their way, row by row: the batch is merged again
// into the committed state (version prev, reloaded from the stores) as
// each group's net partial state (the batch folded into a fresh GroupBy,
// then GroupBy.MergeState), so it fails only where a group's net result
// is out of range. This is what the partitioned path's combiner did
// (combine.go), the default before one working table, so a batch that
// reached the sinks that way and was not committed replays here to the
// same answer; and where row by row does not overflow, the answers are
// the same either way (exact sums). The working table is replaced; the
// records of pending stay the caller's.
func (ex *executor) mergeNet(ctx context.Context, c *chainOp, pending []pendingRec, prev int64) error {
	co, ok := c.op.(combinerOp)
	if !ok {
		return batch.ErrSumOverflow
	}
	gb, err := co.newCombiner()
	if err != nil {
		return err
	}
	if gb == nil {
		return fmt.Errorf("%w (the aggregates do not combine exactly, so the batch is summed row by row)", batch.ErrSumOverflow)
	}
	defer gb.Release()
	for _, pr := range pending {
		if err := gb.Merge(pr.rec); err != nil {
			return err
		}
	}
	part, err := c.op.newPartition(0)
	if err != nil {
		return err
	}
	if err := ex.loadWhole(ctx, c, part, prev); err != nil {
		part.release()
		return err
	}
	st := gb.State()
	err = part.(stateMerger).mergeState(st)
	st.Release()
	if err != nil {
		part.release()
		return err
	}
	c.parts[0].release()
	c.parts[0] = part
	return nil
}

// loadWhole loads version (-1: none) of every state partition of c into
// part, in partition order.
func (ex *executor) loadWhole(ctx context.Context, c *chainOp, part opPartition, version int64) error {
	if version < 0 {
		return nil
	}
	for p := range c.nParts {
		for i, spec := range c.specs {
			ld, ok := c.st[p][i].(interface {
				Load(ctx context.Context, version int64) ([]arrow.RecordBatch, error)
			})
			if !ok {
				return fmt.Errorf("partition %d%s: the store cannot load a version", p, storeLabel(spec))
			}
			recs, err := ld.Load(ctx, version)
			if err != nil {
				return fmt.Errorf("partition %d%s: load state version %d: %w", p, storeLabel(spec), version, err)
			}
			err = part.load(ctx, spec.name, recs)
			for _, r := range recs {
				r.Release()
			}
			if err != nil {
				return fmt.Errorf("partition %d%s: load state version %d: %w", p, storeLabel(spec), version, err)
			}
		}
	}
	return nil
}
