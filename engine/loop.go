package engine

import (
	"context"
	"time"
)

// scheduled runs an AvailableNow pass at each tick of the schedule.
func (r *run) scheduled(ctx context.Context) error {
	sched := r.cfg.trigger.schedule
	for {
		now := r.cfg.clock.Now()
		next := sched.Next(now)
		r.log.Info("waiting for the next scheduled run", "at", next)
		if err := r.sleep(ctx, next.Sub(now)); err != nil {
			return err
		}
		if r.q.stopped() {
			return nil
		}
		if err := r.prepareAvailableNow(ctx); err != nil {
			return err
		}
		if err := r.loop(ctx); err != nil {
			return err
		}
	}
}

// loop plans and runs batches until the trigger says to stop.
func (r *run) loop(ctx context.Context) error {
	cfg := r.cfg

	start := cfg.clock.Now()
	tick := 0
	for {
		if r.q.stopped() {
			r.log.Info("stopped after committing batch", "batchId", r.committed)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p := r.maintErr.Load(); p != nil {
			return *p
		}
		planStart := time.Now()
		var aheadTook time.Duration // planned while the last batch committed
		prefetched := false
		if r.ahead != nil {
			aheadTook, prefetched = r.ahead.took, r.ahead.prefetched
		}
		plan, ok, err := r.plan(ctx)
		if err != nil {
			return err
		}
		latestDur := max(time.Since(planStart), aheadTook)
		if ok {
			walStart := time.Now()
			// The sources may start reading while offsets/N is written:
			// reading has no effect until the batch runs.
			var pf chan struct{}
			if !prefetched {
				pf = r.prefetchAsync(ctx, plan)
			}
			err := r.writeAhead(ctx, plan)
			if pf != nil {
				<-pf
			}
			if err != nil {
				return err
			}
			pre := map[string]int64{PhaseLatestOffset: latestDur.Milliseconds(), PhaseWALCommit: time.Since(walStart).Milliseconds()}
			if err := r.runBatchTimed(ctx, plan.BatchID, plan, false, pre, time.Since(planStart)); err != nil {
				return err
			}
			if cfg.trigger.kind == triggerOnce {
				return nil
			}
		} else if cfg.trigger.kind != triggerEvery {
			return nil // nothing (more) available: Once, AvailableNow and a scheduled pass end
		}
		if cfg.trigger.kind != triggerEvery {
			continue
		}
		// Processing-time trigger: wait for the next multiple of the
		// interval, or go at once if the batch overran it.
		iv := cfg.trigger.interval
		if iv == 0 {
			if !ok {
				// Back to back, but do not spin on an idle source.
				if err := r.sleep(ctx, 10*time.Millisecond); err != nil {
					return err
				}
			}
			continue
		}
		now := cfg.clock.Now()
		tick = int(now.Sub(start)/iv) + 1
		wait := start.Add(time.Duration(tick) * iv).Sub(now)
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sleep waits d, or until Stop (returning nil: the caller then sees
// stopped) or the end of ctx.
func (r *run) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.q.stop:
		return nil
	case <-r.cfg.clock.After(d):
		return nil
	}
}
