package engine

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/internal/fault"
)

// purge deletes logs and state older than the retention, in steps of a
// tenth of it (purgeStep): with the default retention of 100 batches the
// three logs and the state folders are listed, and the directories synced
// after the deletes, once every 10 batches instead of after every batch,
// and each step deletes 10 entries of each log at once. The retention is a
// minimum: keeping up to a step more batches changes no recovery, which
// reads only the newest entries; a run that stops between steps leaves
// them to the next run's first purge.
//
// A due purge runs in its own goroutine, on ctx (Run's), so the next batch
// need not wait for its listings, deletes and directory syncs: it deletes
// only what no recovery reads (the newest entries stay), and touches no
// file a later batch writes. One purge runs at a time: a purge due while
// the previous one still runs waits for it first, so purges happen at the
// same batches whatever the timing. Run waits for the one in flight; a
// failure stops the loop at its next batch (maintErr) and is joined into
// Run's result.
func (r *run) purge(ctx context.Context, committed int64) {
	before := committed - int64(r.cfg.minBatchesToRetain) + 1
	if before <= 0 || before < r.purgedBefore+purgeStep(r.cfg.minBatchesToRetain) {
		return
	}
	if r.purging != nil {
		<-r.purging
	}
	r.purgedBefore = before
	done := make(chan struct{})
	r.purging = done
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		if err := r.purgeBefore(ctx, committed, before); err != nil {
			r.maintErr.CompareAndSwap(nil, &err)
		}
	}()
}

// purgeStep is how many batches apart purge runs: a tenth of the
// retention, at least 1.
func purgeStep(retain int) int64 { return int64(max(1, retain/10)) }

func (r *run) purgeBefore(ctx context.Context, committed, before int64) error {
	fault.Point(fault.EngineDuringPurge)
	// Commits before offsets: a commit is never left without its plan.
	if _, err := r.cp.commits.Purge(ctx, before); err != nil {
		return fmt.Errorf("engine: purge: %w", err)
	}
	if _, err := r.cp.offsets.Purge(ctx, before); err != nil {
		return fmt.Errorf("engine: purge: %w", err)
	}
	if _, err := r.cp.progress.Purge(ctx, before); err != nil {
		return fmt.Errorf("engine: purge: %w", err)
	}
	return r.ex.stores(func(c *chainOp, p int, spec storeSpec, st stateStore) error {
		if err := st.Purge(ctx, committed); err != nil {
			return fmt.Errorf("engine: purge state of %s partition %d%s: %w", c.op.id(), p, storeLabel(spec), err)
		}
		return nil
	})
}

// maintain writes state snapshots in the background, one pass at a time,
// on ctx (Run's): a cancelled Run does not wait for a slow snapshot. Run
// waits for the pass in flight and reports its error.
func (r *run) maintain(ctx context.Context, committed int64) {
	if !r.ex.stateful() || !r.maint.CompareAndSwap(false, true) {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.maint.Store(false)
		first := true
		err := r.ex.stores(func(c *chainOp, p int, spec storeSpec, st stateStore) error {
			if err := st.Maintain(ctx, committed); err != nil {
				return fmt.Errorf("engine: state maintenance of %s partition %d%s at version %d: %w", c.op.id(), p, storeLabel(spec), committed, err)
			}
			if first {
				first = false
				fault.Point(fault.EngineDuringSnapshot)
			}
			return nil
		})
		if err != nil {
			r.maintErr.Store(&err)
		}
	}()
}
