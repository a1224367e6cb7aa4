package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
)

// plan asks every source for its next end offset and returns the plan of
// the next batch, or ok=false when there is nothing to do.
func (r *run) plan(ctx context.Context) (*OffsetsEntry, bool, error) {
	next := r.committed + 1
	e := &OffsetsEntry{
		BatchID:     next,
		TimestampMs: r.cfg.clock.Now().UnixMilli(),
		WatermarkMs: r.watermark,
		RunID:       r.runID,
		Conf:        r.conf,
	}
	anyNew := false
	// A watermark that moved since the last batch is work even without
	// data: closed windows are emitted and their state evicted.
	if r.ex.evicts() && r.lastPlan != nil && r.watermark > r.lastPlan.WatermarkMs {
		anyNew = true
	}
	// A processing-time timer due at the batch timestamp is work too.
	if r.ex.timerDue(e.TimestampMs) {
		anyNew = true
	}
	// Operators after the first drop rows late by the previous batch's
	// watermark (Spark 3.4): a window the first closes in this batch is
	// not late for the next. Recorded, so a re-run uses the same.
	if r.ex.needsPrevWatermark() && r.lastPlan != nil {
		e.LateWatermarkMs = r.lastPlan.WatermarkMs
	}
	for i, src := range r.srcs {
		var startOff json.RawMessage
		if r.lastPlan != nil && i < len(r.lastPlan.Sources) {
			startOff = r.lastPlan.Sources[i].End
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
