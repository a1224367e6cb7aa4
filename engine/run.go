package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/onceflow/onceflow/storage"
)

// run is the state of one Run call.
type run struct {
	q        *Query
	cfg      *config
	log      *slog.Logger
	cp       *checkpointLogs
	runID    string
	ex       *executor
	conf     Conf
	srcs     []Source
	descs    []string
	wg       sync.WaitGroup // background state maintenance
	maint    atomic.Bool
	maintErr atomic.Pointer[error]

	locked    bool  // the checkpoint is locked: no other driver can move on
	committed int64 // newest committed batch, -1 for none
	lastPlan  *OffsetsEntry
	watermark int64   // in force for the next batch (ms, 0 none)
	eventMax  []int64 // per source, newest event time committed (ms)
	// purgedBefore: everything before this batch was purged by this run
	// (0: nothing yet); see purge.
	purgedBefore int64
	purging      chan struct{} // closed when the purge in flight ends; nil before the first
	// ahead is the plan of the next batch made while the last one
	// committed (planAhead); plan returns it once.
	ahead *planned
}

// Run runs the query until its trigger says to stop (Once, AvailableNow),
// Stop is called, ctx is cancelled, or an error occurs. A cancelled ctx
// returns ctx.Err(); Stop returns nil (and a Run after Stop returns nil at
// once). The state snapshots written in the background run on ctx; Run
// waits for them and joins a failure of theirs into its result.
func (q *Query) Run(ctx context.Context) (err error) {
	if !q.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: this Query is already running", ErrConcurrentDriver)
	}
	defer q.running.Store(false)
	if q.stopped() {
		return nil
	}
	cfg := &q.cfg
	unlock, locked, err := lockCheckpoint(cfg.checkpoint)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, unlock()) }()

	cp, err := openCheckpoint(ctx, cfg.checkpoint, cfg.name, cfg.clock.Now())
	if err != nil {
		return err
	}
	if cfg.name == "" {
		cfg.name = cp.meta.Name
	}
	q.mu.Lock()
	q.mu.id = cp.meta.ID
	q.mu.Unlock()

	r := &run{q: q, cfg: cfg, cp: cp, runID: newRunID(), srcs: q.stream.sources, committed: -1, locked: locked}
	if r.ex, err = bindStream(q.stream, cfg); err != nil {
		return err
	}
	defer r.ex.release()
	plan := describePlan(q.stream, cfg, r.ex)
	started, startErr := cfg.notifyStart(QueryInfo{ID: cp.meta.ID, RunID: r.runID, Name: cfg.name, Trigger: cfg.trigger, Plan: plan})
	defer func() { notifyStop(started, err) }()
	if startErr != nil {
		return startErr
	}
	r.log = cfg.logger.With("query", cfg.name, "queryId", cp.meta.ID, "runId", r.runID)
	r.log.Info("starting", "checkpoint", storage.Redact(cfg.checkpoint.URL()), "trigger", cfg.trigger.String(), "plan", q.stream.describe())
	for _, w := range plan.Warnings {
		r.log.Warn("plan", "warning", w)
	}
	err = r.main(ctx)
	r.wg.Wait() // background snapshots
	if p := r.maintErr.Load(); p != nil && !errors.Is(err, *p) && !(ctx.Err() != nil && errors.Is(*p, ctx.Err())) {
		err = errors.Join(err, *p)
	}
	return err
}
