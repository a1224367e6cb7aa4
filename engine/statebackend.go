package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// WithStateStore keeps the state of the query's operators with backend
// instead of in memory (the default, for small state): a disk-backed
// backend such as statestore/pebblestore keeps a working copy on local
// disk, so a batch loads only the groups it touches (looked up in key
// order), merges them, and commits the changes, and memory is bounded by
// the backend's budget instead of the state's size. Durability is the same
// delta files in the checkpoint. The engine never imports the backend's
// module: the program passes it in.
//
// A checkpoint written with the in-memory backend may be continued on a
// disk-backed one (the backend reads its files); the reverse is refused
// with a *statestore.BackendMismatchError.
//
// Today the disk-backed path runs group-by and deduplication operators
// that do not evict by the watermark, in update and append output modes;
// a query with another stateful operator, with eviction, or in complete
// mode is refused when it starts.
func WithStateStore(backend statestore.Backend) Option {
	return func(c *config) { c.stateBackend = backend }
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
func (c *chainOp) checkDisk(cfg *config, mode OutputMode) error {
	name := cfg.stateBackend.Name()
	refuse := func(why string) error {
		return fmt.Errorf("%w: operator %s (%s): %s, which the %s state backend does not run yet; use the in-memory backend (no WithStateStore)", ErrInvalidQuery, c.op.id(), c.op.kind(), why, name)
	}
	if len(c.specs) != 1 || c.specs[0].name != "" {
		return refuse("it keeps several stores")
	}
	if c.op.evicts() {
		return refuse("it evicts state by the watermark")
	}
	if mode == Complete {
		return refuse("complete output reads every group each batch")
	}
	for _, p := range c.parts {
		if _, ok := p.(diskPart); !ok {
			return refuse("its state is not a group-by's")
		}
	}
	return nil
}

// openDisk opens partition p's store on the backend at version committed.
func (c *chainOp) openDisk(ctx context.Context, cfg *config, p int, spec storeSpec, committed int64) (statestore.DiskStore, error) {
	st, err := cfg.stateBackend.Open(ctx, storage.Sub(cfg.checkpoint, c.storeDir(p, spec)), c.op.id(), p, storeOptions(cfg, spec))
	if err != nil {
		return nil, err
	}
	if err := st.Restore(ctx, committed); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return st, nil
}

// lookup loads into partition p the groups its pending input touches, all
// before any of it is merged.
func (c *chainOp) lookup(ctx context.Context, p int, pending []pendingRec) error {
	part := c.parts[p].(diskPart)
	st := c.st[p][0].(statestore.DiskStore)
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
