package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
)

// plan asks every source for its next end offset and returns the plan of
// the next batch, or ok=false when there is nothing to do.
func (r *run) plan(ctx context.Context) (*OffsetsEntry, bool, error) {
	if a := r.ahead; a != nil {
		r.ahead = nil
		return a.plan, a.ok, a.err
	}
	return r.planAfter(ctx, r.committed, r.lastPlan, r.watermark)
}

// planAfter is plan for the batch after committed, whose plan was
// lastPlan and whose next watermark is watermark.
func (r *run) planAfter(ctx context.Context, committed int64, lastPlan *OffsetsEntry, watermark int64) (*OffsetsEntry, bool, error) {
	next := committed + 1
	e := &OffsetsEntry{
		BatchID:     next,
		TimestampMs: r.cfg.clock.Now().UnixMilli(),
		WatermarkMs: watermark,
		RunID:       r.runID,
		Conf:        r.conf,
	}
	anyNew := false
	// A watermark that moved since the last batch is work even without
	// data: closed windows are emitted and their state evicted.
	if r.ex.evicts() && lastPlan != nil && watermark > lastPlan.WatermarkMs {
		anyNew = true
	}
	// A processing-time timer due at the batch timestamp is work too.
	if r.ex.timerDue(e.TimestampMs) {
		anyNew = true
	}
	// Operators after the first drop rows late by the previous batch's
	// watermark (Spark 3.4): a window the first closes in this batch is
	// not late for the next. Recorded, so a re-run uses the same.
	if r.ex.needsPrevWatermark() && lastPlan != nil {
		e.LateWatermarkMs = lastPlan.WatermarkMs
	}
	for i, src := range r.srcs {
		var startOff json.RawMessage
		if lastPlan != nil && i < len(lastPlan.Sources) {
			startOff = lastPlan.Sources[i].End
		} else {
			init, err := src.InitialOffset(ctx)
			if err != nil {
				return nil, false, fmt.Errorf("engine: source %d (%s): initial offset: %w", i, r.descs[i], err)
			}
			startOff = compact(init)
		}
		end, err := src.LatestOffset(ctx, startOff)
		if err != nil {
			return nil, false, fmt.Errorf("engine: source %d (%s): latest offset: %w", i, r.descs[i], err)
		}
		end = compact(end)
		if !bytes.Equal(end, startOff) && !isPassive(src) {
			anyNew = true
		}
		e.Sources = append(e.Sources, SourceOffset{Description: r.descs[i], Start: startOff, End: end})
	}
	return e, anyNew, nil
}

// planned is a plan made ahead (see planAhead).
type planned struct {
	plan       *OffsetsEntry
	ok         bool
	err        error
	took       time.Duration
	prefetched bool // the sources were asked to prefetch plan's ranges
}

// planAhead plans the batch after id (planned as plan, with next watermark
// nextWM) in its own goroutine while the caller writes commits/id, under
// an as-fast-as-possible trigger (Every(0)), where the loop would plan it
// right after anyway. It returns nil (plan afterwards, as usual) under any
// other trigger and when a source has an after-commit step, which the plan
// must follow.
//
// Planning early is safe because a plan is only a proposal until
// offsets/id+1 is durable, and that is written by the loop after
// commits/id, exactly as before: there is never more than one planned,
// uncommitted batch in the log, so recovery is unchanged. A plan made
// ahead and then not used (Stop, an error, a cancelled ctx) leaves nothing
// behind, like a plan made in the loop that never reached the
// write-ahead. The goroutine reads only what planning reads (the sources'
// latest offsets, the executor's timers and watermark needs); the caller
// writes only commits/id meanwhile, and waits for it (the channel) before
// it touches the executor again.
func (r *run) planAhead(ctx context.Context, id int64, plan *OffsetsEntry, nextWM int64) <-chan planned {
	if r.cfg.trigger.kind != triggerEvery || r.cfg.trigger.interval != 0 {
		return nil
	}
	if r.q.stopped() {
		return nil // the loop returns after this batch: nothing to plan
	}
	for _, src := range r.srcs {
		if _, ok := src.(SourceCommitter); ok {
			return nil
		}
	}
	ch := make(chan planned, 1)
	go func() {
		t := time.Now()
		p, ok, err := r.planAfter(ctx, id, plan, nextWM)
		took := time.Since(t)
		if err == nil && ok {
			r.prefetch(ctx, p)
		}
		ch <- planned{plan: p, ok: ok, err: err, took: took, prefetched: true}
	}()
	return ch
}

// prefetcher is a source that can start the Read of a planned range
// early, without any effect on what Read returns (the Kafka source sends
// the range's first fetches); the engine calls it between planning a batch
// and reading it, never at the same time as Read.
type prefetcher interface {
	Prefetch(ctx context.Context, start, end json.RawMessage)
}

// prefetch lets every source that can start reading plan's range.
func (r *run) prefetch(ctx context.Context, plan *OffsetsEntry) {
	for i, so := range plan.Sources {
		if i >= len(r.srcs) {
			break // runBatch refuses the plan
		}
		if p, ok := r.srcs[i].(prefetcher); ok && !bytes.Equal(so.Start, so.End) {
			p.Prefetch(ctx, so.Start, so.End)
		}
	}
}

// prefetchAsync runs prefetch in its own goroutine (while the caller
// writes offsets/N) and returns a channel closed when it is done; nil when
// no source prefetches.
func (r *run) prefetchAsync(ctx context.Context, plan *OffsetsEntry) chan struct{} {
	some := false
	for _, src := range r.srcs {
		if _, ok := src.(prefetcher); ok {
			some = true
		}
	}
	if !some {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.prefetch(ctx, plan)
	}()
	return done
}

func compact(m json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, m); err != nil {
		return m
	}
	return b.Bytes()
}

// checkCurrent fails with ErrConcurrentDriver when another driver has
// moved past batch id: a plan or a commit of a later batch, or a commit of
// this one. Put-if-absent of offsets/N and commits/N alone cannot tell,
// since the purge deletes old entries and a driver that stalled longer than
// the retention would find its batch ids free again. The engine checks
// before the write-ahead, before each sink and before the commit, unless it
// holds the lock of a checkpoint on a local disk, which rules another
// driver out (and saves two listings per step).
//
// id is the batch the driver is running (or, before the write-ahead, the
// one it is about to plan): no plan may be newer, no commit as new.
func (r *run) checkCurrent(ctx context.Context, id int64) error {
	if r.locked {
		return nil
	}
	ids, err := r.cp.offsets.List(ctx)
	if err != nil {
		return fmt.Errorf("engine: list write-ahead log: %w", err)
	}
	if n := len(ids); n > 0 && ids[n-1] > id {
		return fmt.Errorf("%w: offsets/%d exists while this driver is at batch %d; another driver has moved on", ErrConcurrentDriver, ids[n-1], id)
	}
	cids, err := r.cp.commits.List(ctx)
	if err != nil {
		return fmt.Errorf("engine: list commit log: %w", err)
	}
	if n := len(cids); n > 0 && cids[n-1] >= id {
		return fmt.Errorf("%w: commits/%d exists while this driver is at batch %d; another driver has moved on", ErrConcurrentDriver, cids[n-1], id)
	}
	return nil
}

// writeAhead makes offsets/N durable before anything of batch N runs.
func (r *run) writeAhead(ctx context.Context, plan *OffsetsEntry) error {
	if err := r.checkCurrent(ctx, plan.BatchID); err != nil {
		return err
	}
	fault.Point(fault.EngineBeforeWAL)
	if err := r.cp.offsets.Add(ctx, plan.BatchID, *plan); err != nil {
		if errors.Is(err, offsetlog.ErrConflict) {
			return fmt.Errorf("%w: offsets/%d was written by another driver (%v)", ErrConcurrentDriver, plan.BatchID, err)
		}
		return fmt.Errorf("engine: write offsets/%d: %w", plan.BatchID, err)
	}
	fault.Point(fault.EngineAfterWAL)
	return nil
}

// isPassive reports whether a new end offset of src is no reason for a
// batch (a static table's version: a batch joins the newest when it runs
// for its stream's sake).
func isPassive(src Source) bool {
	p, ok := src.(interface{ passive() bool })
	return ok && p.passive()
}
