package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// Fault points of the batch protocol, in the order a batch meets them
// (see package internal/fault).
const (
	FaultBeforeWAL      = "engine-before-wal"
	FaultAfterWAL       = "engine-after-wal"
	FaultMidRead        = "engine-mid-read"
	FaultAfterState     = "engine-after-state"
	FaultAfterSink      = "engine-after-sink"
	FaultAfterCommit    = "engine-after-commit"
	FaultDuringPurge    = "engine-during-purge"
	FaultDuringSnapshot = "engine-during-snapshot"
)

// FaultPoints lists the engine's fault points in protocol order.
var FaultPoints = []string{FaultBeforeWAL, FaultAfterWAL, FaultMidRead, FaultAfterState, FaultAfterSink, FaultAfterCommit, FaultDuringPurge, FaultDuringSnapshot}

// Query is a streaming query bound to its checkpoint. Build it with
// NewQuery, run it with Run. A Query runs at most once at a time.
type Query struct {
	cfg    config
	stream *Stream

	stopping atomic.Bool
	running  atomic.Bool

	mu struct {
		sync.Mutex
		last *Progress
		id   string
	}
}

// NewQuery checks the definition and returns a query ready to Run.
func NewQuery(stream *Stream, opts ...Option) (*Query, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if stream == nil {
		return nil, fmt.Errorf("%w: nil stream", ErrInvalidQuery)
	}
	// Bind once now so a bad definition fails at construction.
	ex, err := bindStream(stream, &cfg)
	if err != nil {
		return nil, err
	}
	ex.release()
	return &Query{cfg: cfg, stream: stream}, nil
}

// Stop asks a running query to finish the batch in flight, commit it, and
// return from Run with nil. Cancelling Run's context instead abandons the
// batch in flight (safe: it is re-run on restart).
func (q *Query) Stop() { q.stopping.Store(true) }

// LastProgress returns the progress of the newest batch this run
// committed, or nil.
func (q *Query) LastProgress() *Progress {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.last
}

// ID returns the checkpoint's query id once Run has opened it.
func (q *Query) ID() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.id
}

// run is the state of one Run call.
type run struct {
	q        *Query
	cfg      *config
	log      *slog.Logger
	cp       *checkpoint
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
}

// Run runs the query until its trigger says to stop (Once, AvailableNow),
// Stop is called, ctx is cancelled, or an error occurs. A cancelled ctx
// returns ctx.Err(); Stop returns nil.
func (q *Query) Run(ctx context.Context) (err error) {
	if !q.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: this Query is already running", ErrConcurrentDriver)
	}
	defer q.running.Store(false)
	q.stopping.Store(false)
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
	for _, o := range cfg.observers {
		o.started(cp.meta.ID, r.runID, cfg.name)
	}
	defer func() {
		for _, o := range cfg.observers {
			o.stopped(err)
		}
	}()
	for _, o := range cfg.observers {
		if f, ok := o.(startFailer); ok {
			if err := f.startErr(); err != nil {
				return err
			}
		}
	}
	r.log = cfg.logger.With("query", cfg.name, "queryId", cp.meta.ID, "runId", r.runID)
	r.log.Info("starting", "checkpoint", storage.Redact(cfg.checkpoint.URL()), "trigger", cfg.trigger.String(), "plan", q.stream.describe())
	r.ex, err = bindStream(q.stream, cfg)
	if err != nil {
		return err
	}
	defer r.ex.release()
	defer func() {
		// A background snapshot may fail after the loop's last look at
		// maintErr (an available-now pass that found no more input).
		r.wg.Wait()
		if p := r.maintErr.Load(); p != nil && !errors.Is(err, *p) {
			err = errors.Join(err, *p)
		}
	}()
	return r.main(ctx)
}

func (r *run) main(ctx context.Context) error {
	cfg, cp := r.cfg, r.cp
	for i, src := range r.srcs {
		r.descs = append(r.descs, describe(src))
		if sc, ok := src.(SourceCheckpointer); ok {
			if err := sc.OpenCheckpoint(ctx, storage.Sub(cfg.checkpoint, fmt.Sprintf("%s/%d", sourcesDir, i))); err != nil {
				return fmt.Errorf("engine: open source %d (%s): %w", i, r.descs[i], err)
			}
		}
	}
	r.conf = Conf{StatePartitions: cfg.partitions, Sources: r.descs}
	for _, src := range r.srcs {
		r.conf.SourceIDs = append(r.conf.SourceIDs, sourceID(src))
	}
	if r.ex.agg != nil {
		r.conf.Operators = []OperatorConf{r.ex.agg.conf()}
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
		if r.ex.agg == nil || r.ex.wm == nil {
			return fmt.Errorf("%w: WithLateRows needs a watermark and a stateful step, which drop late rows", ErrInvalidQuery)
		}
		if v, ok := late.(SchemaValidator); ok {
			if err := v.ValidateSchema(r.ex.agg.inSchema); err != nil {
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
	newest := int64(-1) // the newest planned batch
	if havePlan {
		newest = lastPlanID
	}
	for _, s := range starting {
		p, ok := s.(SinkPosition)
		if !ok {
			continue
		}
		id, has, err := p.LastBatchID(ctx)
		if err != nil {
			return fmt.Errorf("engine: sink %s: read its last applied batch: %w", describe(s), err)
		}
		if has && id > newest {
			return fmt.Errorf("%w: sink %s has applied batch %d, but the checkpoint %s has planned only up to %d; the checkpoint is older than the output (restored from a copy?) and its next batches would be skipped as already applied. Use the checkpoint that wrote the output, or a new output",
				ErrIncompatibleRestart, describe(s), id, storage.Redact(cfg.checkpoint.URL()), newest)
		}
	}
	if r.ex.agg != nil {
		if err := r.ex.agg.openState(ctx, cfg, r.committed); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}

	// Recovery: re-run the planned, uncommitted batch verbatim.
	if havePlan && lastPlanID == r.committed+1 {
		r.log.Info("recovering uncommitted batch", "batchId", lastPlanID)
		for _, o := range cfg.observers {
			o.recovered(lastPlanID)
		}
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
		if r.q.stopping.Load() {
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
		if r.q.stopping.Load() {
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
		plan, ok, err := r.plan(ctx)
		if err != nil {
			return err
		}
		latestDur := time.Since(planStart)
		if ok {
			walStart := time.Now()
			if err := r.writeAhead(ctx, plan); err != nil {
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

func (r *run) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	// Poll for Stop so a graceful stop does not wait for a long interval.
	for d > 0 {
		step := min(d, 100*time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.cfg.clock.After(step):
		}
		if r.q.stopping.Load() {
			return nil
		}
		d -= step
	}
	return nil
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

func guarantee(s Sink) string {
	if g, ok := s.(GuaranteeReporter); ok {
		return g.Guarantee()
	}
	return ExactlyOnce
}

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
	if a := r.ex.agg; a != nil && a.evicts() && r.lastPlan != nil && r.watermark > r.lastPlan.WatermarkMs {
		anyNew = true
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
		if !bytes.Equal(end, startOff) {
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
	fault.Point(FaultBeforeWAL)
	if err := r.cp.offsets.Add(ctx, plan.BatchID, *plan); err != nil {
		if errors.Is(err, offsetlog.ErrConflict) {
			return fmt.Errorf("%w: offsets/%d was written by another driver (%v)", ErrConcurrentDriver, plan.BatchID, err)
		}
		return fmt.Errorf("engine: write offsets/%d: %w", plan.BatchID, err)
	}
	fault.Point(FaultAfterWAL)
	return nil
}

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
	ex.batchID = id
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
				fault.Point(FaultMidRead)
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
	if ex.agg != nil {
		fault.Point(FaultAfterState)
	}

	// Sinks: the late rows first, then the output.
	t = time.Now()
	if cfg.lateRows != nil && len(ex.late) > 0 {
		if err := cfg.lateRows.AddBatch(ctx, id, ex.agg.inSchema, ex.late); err != nil {
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
	fault.Point(FaultAfterSink)

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
	fault.Point(FaultAfterCommit)

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
	r.maintain(id)

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
	if ex.wm == nil {
		return nil, 0
	}
	for i := range eventMax {
		eventMax[i] = max(eventMax[i], ex.batchMax[i])
	}
	delay := ex.wm.delay.Milliseconds()
	global := int64(0)
	for i, m := range eventMax {
		w := int64(0)
		if m > 0 {
			w = max(m-delay, 1)
		}
		switch {
		case i == 0:
			global = w
		case r.cfg.watermarkPolicy == MaxWatermark:
			global = max(global, w)
		default:
			global = min(global, w)
		}
	}
	return eventMax, max(plan.WatermarkMs, global)
}

// purge deletes logs and state older than the retention.
func (r *run) purge(ctx context.Context, committed int64) error {
	before := committed - int64(r.cfg.minBatchesToRetain) + 1
	if before <= 0 {
		return nil
	}
	fault.Point(FaultDuringPurge)
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
	if r.ex.agg != nil {
		for p, part := range r.ex.agg.parts {
			if err := part.store.Purge(ctx, committed); err != nil {
				return fmt.Errorf("engine: purge state of %s partition %d: %w", r.ex.agg.step.id, p, err)
			}
		}
	}
	return nil
}

// maintain writes state snapshots in the background, one pass at a time.
func (r *run) maintain(committed int64) {
	if r.ex.agg == nil || !r.maint.CompareAndSwap(false, true) {
		return
	}
	parts := r.ex.agg.parts
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.maint.Store(false)
		for p, part := range parts {
			if err := part.store.Maintain(context.Background(), committed); err != nil {
				e := fmt.Errorf("engine: state maintenance of %s partition %d at version %d: %w", r.ex.agg.step.id, p, committed, err)
				r.maintErr.Store(&e)
				return
			}
			if p == 0 {
				fault.Point(FaultDuringSnapshot)
			}
		}
	}()
}

func (r *run) report(ctx context.Context, id int64, plan *OffsetsEntry, recovered bool, durs map[string]int64, total time.Duration) {
	ex := r.ex
	secs := total.Seconds()
	var in int64
	for _, n := range ex.inRows {
		in += n
	}
	p := Progress{
		ID: r.cp.meta.ID, RunID: r.runID, Name: r.cfg.name,
		Timestamp:       fmtMillis(plan.TimestampMs),
		BatchID:         id,
		BatchDurationMs: total.Milliseconds(),
		NumInputRows:    in,
		DurationMs:      durs,
		Recovered:       recovered,
	}
	if secs > 0 {
		p.ProcessedRowsPerSecond = float64(in) / secs
	}
	if prev := r.q.LastProgress(); prev != nil {
		if prevT, err := time.Parse(millisLayout, prev.Timestamp); err == nil {
			if d := time.UnixMilli(plan.TimestampMs).Sub(prevT).Seconds(); d > 0 {
				p.InputRowsPerSecond = float64(in) / d
			}
		}
	}
	for i, so := range plan.Sources {
		sp := SourceProgress{Description: so.Description, StartOffset: so.Start, EndOffset: so.End, NumInputRows: ex.inRows[i]}
		if secs > 0 {
			sp.ProcessedRowsPerSecond = float64(ex.inRows[i]) / secs
		}
		if m, ok := r.srcs[i].(SourceMetrics); ok {
			sp.Metrics = m.Metrics()
		}
		p.Sources = append(p.Sources, sp)
	}
	for _, s := range r.cfg.sinks {
		p.Sinks = append(p.Sinks, SinkProgress{Description: describe(s), NumOutputRows: ex.outRows, Guarantee: guarantee(s)})
	}
	if a := ex.agg; a != nil {
		op := StateOperatorProgress{OperatorID: a.step.id, OperatorName: a.kind(), NumPartitions: len(a.parts), CommitTimeMs: durs[PhaseStateCommit], NumRowsDroppedByWatermark: ex.lateRows}
		for _, part := range a.parts {
			op.NumRowsTotal += int64(part.gb.Len())
			op.NumRowsUpdated += part.updated
			op.NumRowsRemoved += part.removed
			op.MemoryUsedBytes += part.gb.MemoryBytes()
		}
		p.StateOperators = append(p.StateOperators, op)
	}
	if ex.wm != nil {
		p.EventTime = map[string]string{"watermark": fmtMillis(plan.WatermarkMs)}
		if ex.ev.n > 0 {
			p.EventTime["min"] = fmtMillis(ex.ev.min)
			p.EventTime["max"] = fmtMillis(ex.ev.max)
			p.EventTime["avg"] = fmtMillis(ex.ev.sum / ex.ev.n)
		}
	}
	// The progress log is for people: a failure to write it must not
	// fail a committed batch, but it is logged.
	if err := r.cp.store.Put(ctx, offsetlog.FileName(progressDir, id), mustEncode(p)); err != nil {
		r.log.Warn("write progress", "batchId", id, "err", err)
	}
	r.q.mu.Lock()
	r.q.mu.last = &p
	r.q.mu.Unlock()
	r.log.Info("batch committed", "batchId", id, "inputRows", in, "outputRows", ex.outRows, "durationMs", total.Milliseconds(), "recovered", recovered)
	for _, o := range r.cfg.observers {
		o.committed(&p)
	}
	for _, fn := range r.cfg.listeners {
		fn(p)
	}
}

// millisLayout is how progress records print times (UTC, milliseconds).
const millisLayout = "2006-01-02T15:04:05.000Z"

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(millisLayout)
}

func mustEncode(v any) []byte {
	b, err := offsetlog.Encode(v)
	if err != nil {
		panic(err) // Progress always encodes
	}
	return b
}

// checkRestart compares the configuration recorded at the first batch with
// the query's and reports every incompatible difference.
func checkRestart(old, cur Conf) error {
	var diffs []string
	if old.StatePartitions != cur.StatePartitions && len(old.Operators) > 0 {
		diffs = append(diffs, fmt.Sprintf("state partitions changed from %d to %d (not allowed: state is hash-partitioned by it)", old.StatePartitions, cur.StatePartitions))
	}
	if len(cur.Sources) < len(old.Sources) {
		diffs = append(diffs, fmt.Sprintf("sources changed from %d to %d (not allowed: a removed source orphans its offsets)", len(old.Sources), len(cur.Sources)))
	}
	for i := 0; i < len(old.SourceIDs) && i < len(cur.SourceIDs); i++ {
		if old.SourceIDs[i] != cur.SourceIDs[i] {
			diffs = append(diffs, fmt.Sprintf("source %d changed from %s to %s (not allowed: its offsets and log belong to the old source; start a new checkpoint, or fork one)", i, old.SourceIDs[i], cur.SourceIDs[i]))
		}
	}
	oldOps := map[string]OperatorConf{}
	for _, o := range old.Operators {
		oldOps[o.ID] = o
	}
	for _, o := range cur.Operators {
		prev, ok := oldOps[o.ID]
		if !ok {
			if len(old.Operators) > 0 {
				diffs = append(diffs, fmt.Sprintf("stateful operator %q is new and the checkpoint has %d other(s) (not allowed: give it the old operator's id or start a new checkpoint)", o.ID, len(old.Operators)))
			} else {
				diffs = append(diffs, fmt.Sprintf("stateful operator %q is new and the checkpoint's batches ran without state (not allowed: its state would miss every committed batch; start a new checkpoint)", o.ID))
			}
			continue
		}
		delete(oldOps, o.ID)
		if prev.KeySchema != o.KeySchema {
			diffs = append(diffs, fmt.Sprintf("operator %q grouping key changed from %s to %s (not allowed)", o.ID, prev.KeySchema, o.KeySchema))
		}
		if prev.StateSchema != o.StateSchema {
			diffs = append(diffs, fmt.Sprintf("operator %q state schema changed from %s to %s (not allowed)", o.ID, prev.StateSchema, o.StateSchema))
		}
	}
	for id := range oldOps {
		diffs = append(diffs, fmt.Sprintf("stateful operator %q was removed (not allowed: its state would be orphaned)", id))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  - %s", ErrIncompatibleRestart, joinLines(diffs))
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n  - "
		}
		out += l
	}
	return out
}
