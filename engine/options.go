package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// OutputMode says which rows of the result reach the sink each batch.
type OutputMode int

const (
	// Append emits only rows that will never change again. It is the mode
	// of stateless queries; aggregations need event-time windows and a
	// watermark for it.
	Append OutputMode = iota + 1
	// Update emits the groups that changed in this batch, with their new
	// full value, so an upsert of them is idempotent.
	Update
	// Complete emits the whole result table every batch.
	Complete
)

func (m OutputMode) String() string {
	switch m {
	case Append:
		return "append"
	case Update:
		return "update"
	case Complete:
		return "complete"
	}
	return fmt.Sprintf("OutputMode(%d)", int(m))
}

// ParseOutputMode parses "append", "update" or "complete".
func ParseOutputMode(s string) (OutputMode, error) {
	switch s {
	case "append":
		return Append, nil
	case "update":
		return Update, nil
	case "complete":
		return Complete, nil
	}
	return 0, fmt.Errorf("%w: output mode %q is not append, update or complete", ErrInvalidQuery, s)
}

// Option configures a query.
type Option func(*config)

type config struct {
	// rowWindows (a test knob) computes sliding windows a row per window
	// instead of by panes, as checkpoints written before panes hold them.
	rowWindows bool
	// partitionedAgg (a test knob) runs in-memory hash aggregations on
	// one working table per state partition, fed by hash partitioning
	// (and the combiner), instead of one table for all of them
	// (chainOp.single): the two must commit the same state.
	partitionedAgg bool
	// combine (a test knob) forces the partial aggregation before the
	// hash partitioning on or off (combine.go).
	combine            combineKnobs
	name               string
	checkpoint         storage.Store
	sinks              []Sink
	trigger            Trigger
	mode               OutputMode
	partitions         int
	minBatchesToRetain int
	snapshotEvery      int
	listeners          []func(Progress)
	logger             *slog.Logger
	clock              clock
	mem                memory.Allocator
	allowAtLeastOnce   bool
	lateRows           Sink
	watermarkPolicy    WatermarkPolicy
	hooks              []Listener
	stateBackend       statestore.Backend            // nil: the in-memory store
	opBackends         map[string]statestore.Backend // WithOperatorStateStore: per operator id, nil for memory
}

// WatermarkPolicy says how the watermarks of several sources combine.
type WatermarkPolicy int

const (
	// MinWatermark (the default) follows the slowest source: no row of any
	// source is dropped as late while another source lags. A source that
	// has produced no event yet holds the watermark back.
	MinWatermark WatermarkPolicy = iota
	// MaxWatermark follows the fastest source: state is evicted sooner, at
	// the price of dropping rows of slower sources as late.
	MaxWatermark
)

const (
	// DefaultStatePartitions is the number of state partitions a query
	// gets unless WithStatePartitions says otherwise.
	DefaultStatePartitions = 8
	// DefaultMinBatchesToRetain is how many batches of logs and state
	// versions are kept.
	DefaultMinBatchesToRetain = 100
	// DefaultSnapshotEvery is the fewest state versions between full
	// snapshots (statestore.Options.SnapshotEvery).
	DefaultSnapshotEvery = 10
)

func defaultConfig() config {
	return config{
		trigger:            Every(0),
		partitions:         DefaultStatePartitions,
		minBatchesToRetain: DefaultMinBatchesToRetain,
		snapshotEvery:      DefaultSnapshotEvery,
		logger:             slog.New(slog.DiscardHandler),
		clock:              realClock{},
		mem:                memory.DefaultAllocator,
	}
}

// WithName names the query (for progress and logs). Default: the
// checkpoint's recorded name, or "query".
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithCheckpoint sets where the query keeps its write-ahead log, commits,
// state and progress. Required.
func WithCheckpoint(store storage.Store) Option { return func(c *config) { c.checkpoint = store } }

// WithSink adds a sink. Every sink receives every batch, in the order they
// were added, before the batch commits. At least one is required.
func WithSink(s Sink) Option { return func(c *config) { c.sinks = append(c.sinks, s) } }

// WithTrigger sets the trigger. Default: Every(0), batches back to back.
func WithTrigger(t Trigger) Option { return func(c *config) { c.trigger = t } }

// WithOutputMode sets the output mode. Default: Append for stateless
// queries, Update for aggregations.
func WithOutputMode(m OutputMode) Option { return func(c *config) { c.mode = m } }

// WithStatePartitions sets the number of state partitions P of stateful
// operators. P is fixed by the query's first batch and recorded in the
// checkpoint; a restart with another P is refused. Default 8.
func WithStatePartitions(p int) Option { return func(c *config) { c.partitions = p } }

// WithMinBatchesToRetain sets how many batches of logs, progress and state
// versions are kept for recovery and inspection, at least: older ones are
// purged in steps of a tenth of n batches (so up to n + n/10 - 1 are on
// disk between two steps). Default 100.
func WithMinBatchesToRetain(n int) Option { return func(c *config) { c.minBatchesToRetain = n } }

// WithSnapshotEvery sets K, the fewest state versions between two full
// snapshots of a state partition (written in the background). Default 10.
// K is a minimum, not a period: once its newest snapshot is K or more
// versions old, a partition snapshots when the deltas since it weigh half
// of it (statestore.Options.SnapshotDeltaRatio), or unconditionally at
// max(100, K) versions (SnapshotMaxEvery). So a large state that changes
// little is not rewritten every K batches, and a load replays at most
// max(100, K) deltas. docs/format/state.md has the rule.
func WithSnapshotEvery(k int) Option { return func(c *config) { c.snapshotEvery = k } }

// WithProgressListener adds a function called with each batch's progress,
// after the batch commits, on the driver goroutine (after the
// BatchCommittedListeners of WithListener).
func WithProgressListener(fn func(Progress)) Option {
	return func(c *config) { c.listeners = append(c.listeners, fn) }
}

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithClock sets the clock the planner reads for batch timestamps and
// trigger ticks. Default: the system clock. Waits between ticks still use
// real time.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = funcClock{now: now} } }

// WithAllocator sets the Arrow allocator. Default memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.mem = mem } }

// WithLateRows sends the rows a stateful step drops as older than the
// watermark to sink, under the batch id, instead of only counting them.
// The sink must be idempotent in the batch id like any other.
func WithLateRows(sink Sink) Option { return func(c *config) { c.lateRows = sink } }

// WithWatermarkPolicy sets how the watermarks of several sources combine.
// Default MinWatermark.
func WithWatermarkPolicy(p WatermarkPolicy) Option { return func(c *config) { c.watermarkPolicy = p } }

// WithAtLeastOnce allows sinks that report the at-least-once guarantee.
// Without it the query refuses to start with such a sink, so nobody runs
// below exactly-once by accident.
func WithAtLeastOnce() Option { return func(c *config) { c.allowAtLeastOnce = true } }

func (c *config) validate() error {
	var errs []string
	if c.checkpoint == nil {
		errs = append(errs, "no checkpoint (WithCheckpoint)")
	}
	if len(c.sinks) == 0 {
		errs = append(errs, "no sink (WithSink)")
	}
	if c.partitions < 1 || c.partitions > 1<<16 {
		errs = append(errs, fmt.Sprintf("state partitions %d out of range 1..65536", c.partitions))
	}
	if c.minBatchesToRetain < 1 {
		errs = append(errs, fmt.Sprintf("minBatchesToRetain %d must be at least 1", c.minBatchesToRetain))
	}
	if c.snapshotEvery < 1 {
		errs = append(errs, fmt.Sprintf("snapshotEvery %d must be at least 1", c.snapshotEvery))
	}
	if c.trigger.kind == triggerEvery && c.trigger.interval < 0 {
		errs = append(errs, "negative trigger interval")
	}
	if c.trigger.kind == triggerSchedule && c.trigger.schedule == nil {
		errs = append(errs, "scheduled trigger without a schedule")
	}
	errs = append(errs, validateListeners(c.hooks)...)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidQuery, joinErrs(errs))
}

func joinErrs(errs []string) string {
	s := ""
	for i, e := range errs {
		if i > 0 {
			s += "; "
		}
		s += e
	}
	return s
}
