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
)

func (r *run) runBatch(ctx context.Context, id int64, plan *OffsetsEntry, recovered bool) error {
	return r.runBatchTimed(ctx, id, plan, recovered, map[string]int64{}, 0)
}

// runBatchTimed executes batch id exactly as plan says, hands it to every
// sink, and commits it.
func (r *run) runBatchTimed(ctx context.Context, id int64, plan *OffsetsEntry, recovered bool, durs map[string]int64, planning time.Duration) error {
	cfg, ex := r.cfg, r.ex
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

	// State.
	stateTime, err := ex.finishState(ctx, id)
	if err != nil {
		return fmt.Errorf("engine: batch %d: %w", id, err)
	}
	durs[PhaseStateCommit] = stateTime.Milliseconds()
	if ex.stateful() {
		fault.Point(fault.EngineAfterState)
	}

	// Sinks: the late rows first, then the output.
	t = time.Now()
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
	durs[PhaseAddBatch] = time.Since(t).Milliseconds()
	fault.Point(fault.EngineAfterSink)

	// Commit, with the watermark for the next batch.
	t = time.Now()
	eventMax, nextWM := r.nextWatermark(plan)
	if err := r.checkCurrent(ctx, id); err != nil {
		return err
	}
	if err := r.cp.commits.Add(ctx, id, CommitEntry{BatchID: id, RunID: r.runID, NextWatermarkMs: nextWM, EventTimeMaxMs: eventMax}); err != nil {
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
	if err := r.purge(ctx, id); err != nil {
		return err
	}
	r.maintain(ctx, id)

	total := time.Since(began) + planning
	durs[PhaseTriggerExecution] = total.Milliseconds()
	r.report(ctx, id, plan, recovered, durs, total)
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
