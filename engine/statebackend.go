package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/statestore"
)

// WithStateStore keeps the state of the query's operators with backend
// instead of in memory (the default, for small state): a disk-backed
// backend such as statestore/pebblestore keeps a working copy on local
// disk, so a batch loads only the groups it touches (looked up in key
// order), merges them, and commits the changes, and memory is bounded by
// the backend's budget plus the batch's groups (those it touches, emits
// or evicts) instead of the state's size. Durability is the same
// delta files in the checkpoint. The engine never imports the backend's
// module: the program passes it in.
//
// A checkpoint written with the in-memory backend may be continued on a
// disk-backed one (the backend reads its files); the reverse is refused
// with a *statestore.BackendMismatchError.
//
// The disk-backed path runs group-by, deduplication and event-time window
// operators (tumbling; sliding, by panes or row per window), in every
// output mode. Those that evict by the watermark (windows, a group-by or
// DropDuplicates keyed by the event time, DropDuplicatesWithinWatermark)
// need a backend that keeps a time index (statestore.IndexedBackend, as
// pebblestore's does): at each batch the partition loads, besides the
// groups its input touches, the groups the watermark closes or expires
// (found by the index, at a cost of the rows evicted, not the state's
// size), emits and evicts them as in memory, and forgets them after the
// commit. Complete mode emits every group every batch, so each batch
// reads the whole state from disk into memory: memory then follows the
// state's size, as on the in-memory backend, and the plan says so.
// Session windows, joins, top-N, user processors and operators with
// several stores are refused when the query is built (NewQuery); run them
// in memory with WithOperatorStateStore(id, nil).
func WithStateStore(backend statestore.Backend) Option {
	return func(c *config) { c.stateBackend = backend }
}

// WithOperatorStateStore keeps the state of the operator whose id is opID
// with backend, overriding WithStateStore for it; a nil backend keeps it in
// memory. An id that names no stateful operator of the query is refused by
// NewQuery. Query.Describe names each operator's backend. Switching an
// existing operator's backend follows WithStateStore's rules: memory to
// disk migrates, disk to memory is refused.
func WithOperatorStateStore(opID string, backend statestore.Backend) Option {
	return func(c *config) {
		if c.opBackends == nil {
			c.opBackends = map[string]statestore.Backend{}
		}
		c.opBackends[opID] = backend
	}
}

// backendFor is the backend of operator id: nil for the in-memory store.
func (c *config) backendFor(id string) statestore.Backend {
	if b, ok := c.opBackends[id]; ok {
		return b
	}
	return c.stateBackend
}

// backendName names operator id's backend for the plan.
func (c *config) backendName(id string) string {
	if b := c.backendFor(id); b != nil {
		return b.Name()
	}
	return statestore.BackendMemory
}

// checkBackends refuses WithOperatorStateStore ids that name no operator,
// and the operators their disk-backed backend does not run.
func checkBackends(cfg *config, ex *executor) error {
	ids := map[string]bool{}
	for _, c := range ex.ops {
		ids[c.op.id()] = true
	}
	var unknown []string
	for id := range cfg.opBackends {
		if !ids[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		known := slices.Sorted(maps.Keys(ids))
		return fmt.Errorf("%w: WithOperatorStateStore names %s, which is not a stateful operator of the query (its operators: %s)", ErrInvalidQuery, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	for _, c := range ex.ops {
		if err := c.checkDisk(cfg); err != nil {
			return err
		}
	}
	return nil
}

// stateStore is what the executor and retention call on a store of either
// backend once it is open.
type stateStore interface {
	Commit(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch) error
	Maintain(ctx context.Context, committed int64) error
	Purge(ctx context.Context, committed int64) error
}

// fullCommitter is the optional capability of a store to commit a version
// whose upserts are its every live row as a full delta, which later loads
// start from and which spares the snapshots (*statestore.Store has it).
type fullCommitter interface {
	CommitFull(ctx context.Context, version int64, rows arrow.RecordBatch) error
}

// commitState commits ch as version of st: a full delta when ch holds the
// whole state and st can write one, else an ordinary one.
func commitState(ctx context.Context, st stateStore, version int64, ch stateChange) error {
	if fc, ok := st.(fullCommitter); ok && ch.full {
		return fc.CommitFull(ctx, version, ch.upserts)
	}
	return st.Commit(ctx, version, ch.upserts, ch.removals)
}

// diskEvicter is an operator whose groups close or expire by the
// watermark, run on a disk-backed store: the store keeps a time index on
// one of its columns, and before a batch merges, the partition loads
// every row the index puts below the operator's bound, so that finish
// finds there every group it emits or evicts at this batch.
type diskEvicter interface {
	// diskTimeColumn is the store column (key or value) the index keys on,
	// "" when the operator does not evict.
	diskTimeColumn() string
	// diskBound is the Unix ms bound of fc's batch: the groups whose time
	// column is below it are loaded. ok is false when nothing is due.
	diskBound(fc *finishCtx) (boundMs int64, ok bool)
}

// diskPart is an operator partition that can run over a DiskStore: it
// holds only the groups of the batch being merged.
type diskPart interface {
	opPartition
	// lookupKeys returns the store key columns (the store's KeySchema) of
	// an input record of the partition.
	lookupKeys(rec arrow.RecordBatch) arrow.RecordBatch
	// forget drops every group once the batch's version is committed.
	forget() error
}

// checkDisk refuses an operator the disk-backed path does not run.
func (c *chainOp) checkDisk(cfg *config) error {
	backend := cfg.backendFor(c.op.id())
	if backend == nil {
		return nil
	}
	name := backend.Name()
	refuse := func(why string) error {
		return fmt.Errorf("%w: operator %s (%s): %s, which the %s state backend does not run yet; keep it in memory with WithOperatorStateStore(%q, nil)", ErrInvalidQuery, c.op.id(), c.op.kind(), why, name, c.op.id())
	}
	if len(c.specs) != 1 || c.specs[0].name != "" {
		return refuse("it keeps several stores")
	}
	for _, p := range c.parts {
		if _, ok := p.(diskPart); !ok {
			return refuse("its state is not a group-by's")
		}
	}
	if c.op.evicts() {
		ev, ok := c.op.(diskEvicter)
		if !ok || ev.diskTimeColumn() == "" {
			return refuse("it evicts state by the watermark")
		}
		if _, ok := backend.(statestore.IndexedBackend); !ok {
			return refuse("it evicts state by the watermark, which needs a backend that keeps a time index (statestore.IndexedBackend)")
		}
	}
	return nil
}

// timeColumn is the store column operator c's disk store indexes, "" for
// none.
func (c *chainOp) timeColumn() string {
	if ev, ok := c.op.(diskEvicter); ok && c.op.evicts() {
		return ev.diskTimeColumn()
	}
	return ""
}

// openDisk opens partition p's store on the backend at version committed.
func (c *chainOp) openDisk(ctx context.Context, cfg *config, p, i int, spec storeSpec, committed int64) (statestore.DiskStore, error) {
	backend := cfg.backendFor(c.op.id())
	folder := c.folder(cfg, p, i, spec)
	var st statestore.DiskStore
	var err error
	if col := c.timeColumn(); col != "" {
		st, err = backend.(statestore.IndexedBackend).OpenIndexed(ctx, folder, c.op.id(), p, storeOptions(cfg, spec), col)
	} else {
		st, err = backend.Open(ctx, folder, c.op.id(), p, storeOptions(cfg, spec))
	}
	if err != nil {
		return nil, err
	}
	if err := st.Restore(ctx, committed); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return st, nil
}

// lookup loads into partition p, all before any input is merged, the
// groups finish needs: in complete mode every group; else the groups the
// watermark closes or expires at this batch (by the store's time index)
// and those the pending input touches. A group loaded twice is loaded
// with the same row.
func (c *chainOp) lookup(ctx context.Context, p int, pending []pendingRec, fc *finishCtx) error {
	part := c.parts[p].(diskPart)
	st := c.st[p][0].(statestore.DiskStore)
	load := func(r arrow.RecordBatch) error { return part.load(ctx, "", []arrow.RecordBatch{r}) }
	if fc.mode == Complete {
		return st.Scan(ctx, nil, nil, 0, load)
	}
	if c.timeColumn() != "" {
		if bound, ok := c.op.(diskEvicter).diskBound(fc); ok {
			if err := st.(statestore.IndexedStore).ScanBefore(ctx, bound, 0, load); err != nil {
				return err
			}
		}
	}
	for _, pr := range pending {
		keys := part.lookupKeys(pr.rec)
		found, err := st.Lookup(ctx, keys)
		keys.Release()
		if err != nil {
			return err
		}
		err = part.load(ctx, "", []arrow.RecordBatch{found})
		found.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// closeDisk closes the disk-backed stores. Their folders are untouched and
// their working copies are caches, so a failure to close loses nothing:
// the next start restores from the folder.
func (ex *executor) closeDisk() {
	for _, c := range ex.ops {
		if !c.disk {
			continue
		}
		for _, sts := range c.st {
			for _, st := range sts {
				if ds, ok := st.(statestore.DiskStore); ok {
					_ = ds.Close()
				}
			}
		}
		c.st, c.disk = nil, false
	}
}

func (p *aggPart) lookupKeys(rec arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, len(p.h.keyIdx))
	for i, k := range p.h.keyIdx {
		cols[i] = rec.Column(k)
	}
	return array.NewRecordBatch(p.h.keySchema, cols, rec.NumRows())
}

func (p *aggPart) forget() error {
	removed, err := p.gb.Remove(func(_ []arrow.Array, out []bool) { clear(out) })
	if removed != nil {
		removed.Release()
	}
	return err
}

// diskColumn is the store column (keys, then state) that rule reads: a
// key column, or the state column of the output column it names; "" when
// the store does not hold it as such.
func (h *hashAgg) diskColumn(rule *evictRule) string {
	if rule == nil {
		return ""
	}
	if rule.inKeys {
		return h.keySchema.Field(rule.col).Name
	}
	name := h.outSchema.Field(rule.col).Name
	if idx := h.stateSchema.FieldIndices(name); len(idx) == 1 && arrow.TypeEqual(h.stateSchema.Field(idx[0]).Type, h.outSchema.Field(rule.col).Type) {
		return name
	}
	return ""
}

// evictBound is the bound below which rule expires a group: t + offset <
// watermark.
func evictBound(rule *evictRule, fc *finishCtx) (int64, bool) {
	if rule == nil || fc.watermark <= 0 {
		return 0, false
	}
	return fc.watermark - rule.offsetMs, true
}

func (o *groupByOp) diskTimeColumn() string                { return o.h.diskColumn(o.ev) }
func (o *groupByOp) diskBound(fc *finishCtx) (int64, bool) { return evictBound(o.ev, fc) }
func (o *windowOp) diskTimeColumn() string                 { return o.h.diskColumn(o.ev) }
func (o *windowOp) diskBound(fc *finishCtx) (int64, bool)  { return evictBound(o.ev, fc) }
func (o *dedupOp) diskTimeColumn() string                  { return o.h.diskColumn(o.rule) }
func (o *dedupOp) diskBound(fc *finishCtx) (int64, bool)   { return evictBound(o.rule, fc) }
func (o *paneOp) diskTimeColumn() string                   { return o.h.diskColumn(o.ev) }

// diskBound of the panes: when the watermark moved, the windows closing in
// (prevWatermark, watermark] need every pane they cover, pane_start in
// (prevWatermark - size, watermark); the panes before that were evicted by
// the batch of prevWatermark, so pane_start < watermark is that range and
// the panes evicted now. When it did not move, only the panes to evict.
func (o *paneOp) diskBound(fc *finishCtx) (int64, bool) {
	if fc.watermark <= 0 {
		return 0, false
	}
	if fc.watermark > fc.prevWatermark {
		return fc.watermark, true
	}
	return evictBound(o.ev, fc)
}
