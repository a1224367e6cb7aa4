package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

func (r *run) main(ctx context.Context) error {
	cfg, cp := r.cfg, r.cp
	for i, src := range r.srcs {
		r.descs = append(r.descs, describe(src))
		if sc, ok := src.(SourceCheckpointer); ok {
			if err := sc.OpenCheckpoint(ctx, storage.Sub(cfg.checkpoint, checkpoint.SourceDir(i))); err != nil {
				return fmt.Errorf("engine: open source %d (%s): %w", i, r.descs[i], err)
			}
		}
	}
	r.conf = Conf{StatePartitions: cfg.partitions, Sources: r.descs}
	for _, src := range r.srcs {
		r.conf.SourceIDs = append(r.conf.SourceIDs, sourceID(src))
	}
	for _, c := range r.ex.ops {
		r.conf.Operators = append(r.conf.Operators, c.conf())
	}
	for _, s := range cfg.sinks {
		r.conf.Sinks = append(r.conf.Sinks, describe(s))
	}

	// What the checkpoint holds.
	lastPlanID, lastPlan, havePlan, err := cp.offsets.Latest(ctx)
	if err != nil {
		return fmt.Errorf("engine: read write-ahead log: %w", err)
	}
	lastCommitID, lastCommit, haveCommit, err := cp.commits.Latest(ctx)
	if err != nil {
		return fmt.Errorf("engine: read commit log: %w", err)
	}
	r.eventMax = make([]int64, len(r.srcs))
	if haveCommit {
		r.committed = lastCommitID
		r.watermark = lastCommit.NextWatermarkMs
		copy(r.eventMax, lastCommit.EventTimeMaxMs)
	}
	if havePlan {
		changed, err := r.ex.adoptRows(cfg, lastPlan.Conf, cfg.partitions)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		if changed {
			r.conf.Operators = nil
			for _, c := range r.ex.ops {
				r.conf.Operators = append(r.conf.Operators, c.conf())
			}
		}
		if err := checkRestart(lastPlan.Conf, r.conf); err != nil {
			return err
		}
		if lastPlanID > r.committed+1 || lastPlanID < r.committed {
			return fmt.Errorf("engine: checkpoint %s: write-ahead log ends at batch %d but commits end at %d: %w", cfg.checkpoint.URL(), lastPlanID, r.committed, offsetlog.ErrCorrupt)
		}
		// The conf in force is the one fixed by the first batch.
		r.conf.StatePartitions = lastPlan.Conf.StatePartitions
	} else if haveCommit {
		return fmt.Errorf("engine: checkpoint %s has commits but no write-ahead log: %w", cfg.checkpoint.URL(), offsetlog.ErrCorrupt)
	}

	// Sinks: schema, guarantee, start.
	for _, s := range cfg.sinks {
		if v, ok := s.(SchemaValidator); ok {
			if err := v.ValidateSchema(r.ex.outSchema); err != nil {
				return fmt.Errorf("%w: sink %s cannot take the output schema: %w", ErrInvalidQuery, describe(s), err)
			}
		}
		g := guarantee(s)
		if g != ExactlyOnce && !cfg.allowAtLeastOnce {
			return fmt.Errorf("%w: sink %s runs %s; name that guarantee with WithAtLeastOnce to allow it", ErrInvalidQuery, describe(s), g)
		}
		r.log.Info("sink delivery guarantee", "sink", describe(s), "guarantee", g)
	}
	if late := cfg.lateRows; late != nil {
		if !r.ex.stateful() || r.ex.wm == nil {
			return fmt.Errorf("%w: WithLateRows needs a watermark and a stateful step, which drop late rows", ErrInvalidQuery)
		}
		if v, ok := late.(SchemaValidator); ok {
			if err := v.ValidateSchema(r.ex.first().op.inputSchema(0)); err != nil {
				return fmt.Errorf("%w: late-rows sink %s cannot take the late rows' schema: %w", ErrInvalidQuery, describe(late), err)
			}
		}
		if g := guarantee(late); g != ExactlyOnce && !cfg.allowAtLeastOnce {
			return fmt.Errorf("%w: late-rows sink %s runs %s; name that guarantee with WithAtLeastOnce to allow it", ErrInvalidQuery, describe(late), g)
		}
		r.log.Info("late-rows sink delivery guarantee", "sink", describe(late), "guarantee", guarantee(late))
	}
	starting := append([]Sink(nil), cfg.sinks...)
	if cfg.lateRows != nil {
		starting = append(starting, cfg.lateRows)
	}
	for _, s := range starting {
		if st, ok := s.(SinkStarter); ok {
			if err := st.Start(ctx, cp.meta.ID); err != nil {
				return fmt.Errorf("engine: start sink %s: %w", describe(s), err)
			}
		}
	}
	pos, err := r.sinkPositions(ctx, havePlan && lastPlanID == r.committed+1)
	if err != nil {
		return err
	}
	for _, s := range cfg.sinks {
		if err := pos.check(ctx, "sink", s); err != nil {
			return err
		}
	}
	if cfg.lateRows != nil {
		if err := pos.check(ctx, "late-rows sink", cfg.lateRows); err != nil {
			return err
		}
	}
	if err := r.ex.openState(ctx, cfg, r.committed); err != nil {
		return fmt.Errorf("engine: %w", err)
	}

	// Recovery: re-run the planned, uncommitted batch verbatim.
	if havePlan && lastPlanID == r.committed+1 {
		r.log.Info("recovering uncommitted batch", "batchId", lastPlanID)
		cfg.notifyRecovered(lastPlanID)
		if err := r.runBatch(ctx, lastPlanID, &lastPlan, true); err != nil {
			return err
		}
	} else if havePlan {
		r.lastPlan = &lastPlan
	}

	if cfg.trigger.kind == triggerSchedule {
		return r.scheduled(ctx)
	}
	if cfg.trigger.kind == triggerAvailableNow {
		if err := r.prepareAvailableNow(ctx); err != nil {
			return err
		}
	}
	return r.loop(ctx)
}

func sourceID(src Source) string {
	if id, ok := src.(SourceIdentifier); ok {
		return id.SourceID()
	}
	d := describe(src)
	if i := strings.IndexByte(d, '['); i > 0 {
		return d[:i]
	}
	return d
}

func (r *run) prepareAvailableNow(ctx context.Context) error {
	for i, src := range r.srcs {
		if an, ok := src.(AvailableNowSource); ok {
			if err := an.PrepareAvailableNow(ctx); err != nil {
				return fmt.Errorf("engine: prepare source %d (%s) for available-now: %w", i, r.descs[i], err)
			}
		}
	}
	return nil
}
