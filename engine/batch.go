package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

func (r *run) runBatch(ctx context.Context, id int64, plan *OffsetsEntry, recovered bool) error {
	return r.runBatchTimed(ctx, id, plan, recovered, map[string]int64{}, 0)
}

// runBatchTimed executes batch id exactly as plan says, hands it to every
// sink, and commits it.
func (r *run) runBatchTimed(ctx context.Context, id int64, plan *OffsetsEntry, recovered bool, durs map[string]int64, planning time.Duration) error {
	ex := r.ex
	defer ex.reset()
	began := time.Now()

	// Read.
	t := time.Now()
	first := true
	ex.watermark = plan.WatermarkMs
	ex.lateWatermark = plan.LateWatermarkMs
	ex.timestampMs = plan.TimestampMs
	ex.batchID = id
	if err := ex.atStaticVersions(ctx, plan); err != nil {
		return fmt.Errorf("engine: batch %d: %w", id, err)
	}
	for i, so := range plan.Sources {
		ex.curSource = i
		if i >= len(r.srcs) {
			return fmt.Errorf("%w: offsets/%d names source %d (%s), which the query no longer has", ErrIncompatibleRestart, id, i, so.Description)
		}
		if bytes.Equal(so.Start, so.End) {
			continue
		}
		err := r.srcs[i].Read(ctx, so.Start, so.End, func(rec arrow.RecordBatch) error {
			ex.inRows[i] += rec.NumRows()
			if first {
				first = false
				fault.Point(fault.EngineMidRead)
			}
			return ex.consume(ctx, rec)
		})
		if err != nil {
			return fmt.Errorf("engine: batch %d: read source %d (%s) from %s to %s: %w", id, i, r.descs[i], so.Start, so.End, err)
		}
	}
	durs[PhaseGetBatch] = time.Since(t).Milliseconds()

	// State. With every operator's state in memory (on a local disk), the
	// delta files of version N are written under a sync group: not yet in
	// place nor durable, so the sinks need not wait for their fsyncs (see
	// stateSync). A disk-backed store commits durably by itself.
	// Each operator store's deltas of every partition are kept aside and
	// written as one bundle file (statestore.Group): one file to create
	// per store and batch instead of one per partition.
	var group *storage.SyncGroup
	stateCtx := ctx
	var bundle *statestore.Bundle
	if r.deferState() {
		group = storage.NewSyncGroup()
		bundle = statestore.NewBundle()
		stateCtx = statestore.WithBundle(storage.WithSyncGroup(ctx, group), bundle)
	}
	defer group.Abort() // a failed batch leaves no temporary file behind
	stateTime, err := ex.finishState(stateCtx, id)
	if err == nil && bundle != nil {
		t := time.Now()
		err = bundle.Flush(stateCtx)
		stateTime += time.Since(t)
	}
	if err != nil {
		return fmt.Errorf("engine: batch %d: %w", id, err)
	}

	// Sinks, while the state becomes durable.
	t = time.Now()
	syncDone := r.stateSync(ctx, id, group, t)
	err = r.addToSinks(ctx, id)
	st := <-syncDone
	if err := errors.Join(err, st.err); err != nil {
		return err
	}
	durs[PhaseStateCommit] = (stateTime + st.took).Milliseconds()
	durs[PhaseAddBatch] = time.Since(t).Milliseconds()
	fault.Point(fault.EngineAfterSink)

	// Commit, with the watermark for the next batch.
	t = time.Now()
	eventMax, nextWM := r.nextWatermark(plan)
	if err := r.checkCurrent(ctx, id); err != nil {
		return err
	}
	ahead := r.planAhead(ctx, id, plan, nextWM)
	err = r.cp.commits.Add(ctx, id, CommitEntry{BatchID: id, RunID: r.runID, NextWatermarkMs: nextWM, EventTimeMaxMs: eventMax})
	if ahead != nil {
		a := <-ahead
		if err == nil {
			r.ahead = &a
		}
	}
	if err != nil {
		if errors.Is(err, offsetlog.ErrConflict) {
			return fmt.Errorf("%w: commits/%d was written by another driver", ErrConcurrentDriver, id)
		}
		return fmt.Errorf("engine: write commits/%d: %w", id, err)
	}
	durs[PhaseCommitOffsets] = time.Since(t).Milliseconds()
	r.committed = id
	r.lastPlan = plan
	r.watermark = nextWM
	r.eventMax = eventMax
	fault.Point(fault.EngineAfterCommit)

	for i, so := range plan.Sources {
		if c, ok := r.srcs[i].(SourceCommitter); ok {
			if err := c.Commit(ctx, so.End); err != nil {
				return fmt.Errorf("engine: batch %d: after-commit step of source %d (%s): %w", id, i, r.descs[i], err)
			}
		}
	}
	r.purge(ctx, id)
	r.maintain(ctx, id)

	total := time.Since(began) + planning
	durs[PhaseTriggerExecution] = total.Milliseconds()
	r.report(ctx, id, plan, recovered, durs, total)
	return nil
}

// synced is how the state's sync ended and how long it took.
type synced struct {
	err  error
	took time.Duration
}

// stateSync makes state version id durable (group's deferred writes: fsync
// the delta files, rename them into place, fsync their folders) in its own
// goroutine, while the sinks add batch id, and reports on the channel. The
// order is safe: a sink may hold batch id before the state of id is
// durable because recovery never reads the state of an uncommitted batch.
// commits/id is written only after both ended; until then a crash re-runs
// id from state id-1 (unchanged: the files of version id replace nothing
// of it) and offsets/id, and the sinks, idempotent in the batch id, skip
// what they already hold. A stateless query has nothing to sync.
func (r *run) stateSync(ctx context.Context, id int64, group *storage.SyncGroup, began time.Time) <-chan synced {
	ch := make(chan synced, 1)
	if !r.ex.stateful() {
		ch <- synced{}
		return ch
	}
	go func() {
		fault.Point(fault.EngineBeforeStateSync)
		if err := group.Sync(ctx); err != nil {
			ch <- synced{err: fmt.Errorf("engine: batch %d: make state version %d durable: %w", id, id, err), took: time.Since(began)}
			return
		}
		fault.Point(fault.EngineAfterState)
		ch <- synced{took: time.Since(began)}
	}()
	return ch
}

// deferState reports whether the batch's state is written under a sync
// group: a stateful query whose operators all keep their state in memory
// (a disk-backed store applies each delta to its working copy and must
// find it durable).
func (r *run) deferState() bool {
	if !r.ex.stateful() {
		return false
	}
	for _, c := range r.ex.ops {
		if c.disk {
			return false
		}
	}
	return true
}

// addToSinks hands batch id to the late-rows sink and then to every sink.
func (r *run) addToSinks(ctx context.Context, id int64) error {
	cfg, ex := r.cfg, r.ex
	// The late-rows sink gets every batch, with or without late rows, so
	// its position is the newest commit like every other sink's (see
	// positions.check) and a files sink's log has no holes.
	if cfg.lateRows != nil {
		if err := r.checkCurrent(ctx, id); err != nil {
			return err
		}
		if err := cfg.lateRows.AddBatch(ctx, id, ex.first().op.inputSchema(0), ex.late); err != nil {
			return fmt.Errorf("engine: batch %d: late-rows sink %s: %w", id, describe(cfg.lateRows), err)
		}
	}
	for _, s := range cfg.sinks {
		if err := r.checkCurrent(ctx, id); err != nil {
			return err
		}
		if err := s.AddBatch(ctx, id, ex.outSchema, ex.out); err != nil {
			return fmt.Errorf("engine: batch %d: sink %s: %w", id, describe(s), err)
		}
	}
	return nil
}

// nextWatermark derives the watermark of the batch after plan from the
// event times seen up to plan's batch: per source, the newest event time
// minus the delay; combined by the policy; never moving back.
func (r *run) nextWatermark(plan *OffsetsEntry) ([]int64, int64) {
	ex := r.ex
	eventMax := make([]int64, len(r.srcs))
	copy(eventMax, r.eventMax)
	if !ex.watermarked() {
		return nil, 0
	}
	for i := range eventMax {
		eventMax[i] = max(eventMax[i], ex.batchMax[i])
	}
	global := int64(0)
	seen := false
	for i, m := range eventMax {
		// Each source has its branch's delay (a join's right side has its
		// own watermark); a source of a branch without one does not count.
		delay, ok := ex.sourceDelay(i)
		if !ok {
			continue
		}
		w := int64(0)
		if m > 0 {
			w = max(m-delay, 1)
		}
		switch {
		case !seen:
			seen = true
			global = w
		case r.cfg.watermarkPolicy == MaxWatermark:
			global = max(global, w)
		default:
			global = min(global, w)
		}
	}
	return eventMax, max(plan.WatermarkMs, global)
}
