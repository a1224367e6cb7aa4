package engine

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/statestore"
)

// operator is one stateful step of a query's chain: group-by, the event-time
// windows, session windows, the two deduplications, top-N, joins and user
// processors are peers behind it. The executor (chain.go) owns the order of
// calls:
//
//  1. bind: the step's constructor checks the input schema(s) and builds
//     the operator; stores() and conf() describe its state.
//  2. For each partition p in [0, P): newPartition(p), then, for each
//     store of stores(), load with the committed version's records.
//  3. Per batch, per input record: the executor drops the rows late for
//     this operator (event time below its late watermark, counted per
//     operator), calls prepare on the rest, hash-partitions the prepared
//     rows by partitionKeys(side) and merges each piece into its partition,
//     in partition order, so the merge order is a function of the input.
//  4. Per batch, every partition in parallel: finish at the batch's
//     watermark gives the output rows, the state changes and removals of
//     each store and what was evicted; the executor commits state version
//     N of every store, then calls committed.
//  5. The outputs, in partition order, go through the stateless steps that
//     follow to the next operator (step 3 again) or to the sinks.
//
// Nothing an operator computes may depend on the wall clock, randomness or
// Go map order: a re-run of batch N gives the same output and state.
type operator interface {
	// id names the operator: its state folder state/<id>/ and its entry in
	// the conf of offsets/N.
	id() string
	// kind is the operator's kind as progress and the conf name it.
	kind() string
	// conf is the restart-compatibility description recorded in offsets/N.
	conf() OperatorConf
	// inputs is the number of inputs (1; 2 for a two-input join).
	inputs() int
	// inputSchema is the schema of the rows entering input side (before
	// prepare): the late rows' schema.
	inputSchema(side int) *arrow.Schema
	// outputSchema is the schema of finish's output.
	outputSchema() *arrow.Schema
	// stores describes the state stores of each partition.
	stores() []storeSpec
	// prepare turns an input record of side (its late rows already taken
	// out) into the rows to partition, and counts the rows it dropped as
	// too late itself (a sliding window's closed windows). The caller keeps
	// ownership of rec. watermark is the operator's late watermark for this
	// batch (0: none).
	prepare(ctx context.Context, side int, rec arrow.RecordBatch, watermark int64) (arrow.RecordBatch, int64, error)
	// partitionKeys are the columns of prepare's output that place a row
	// in a partition.
	partitionKeys(side int) []int
	// eventTime says which output column carries the event time that the
	// next operator's watermark is compared with.
	eventTime() eventTimeCol
	// aggregates reports whether the output rows are groups whose values
	// change from batch to batch (update and complete output apply); an
	// operator that does not aggregate emits each row once (append).
	aggregates() bool
	// closes reports whether, in append mode, the operator emits each group
	// once, when the watermark closes it. An aggregation that does not
	// close cannot run in append mode nor feed another operator.
	closes() bool
	// evicts reports whether a watermark that moved is work for the
	// operator even without input (windows to emit, state to evict).
	evicts() bool
	newPartition(p int) (opPartition, error)
	release()
}

// opPartition is the state of one operator partition.
type opPartition interface {
	// load feeds the committed version of store (its records, as the store
	// returns them) into the partition's working state.
	load(ctx context.Context, store string, recs []arrow.RecordBatch) error
	// merge takes rows of input side that hash to this partition.
	merge(ctx context.Context, side int, rec arrow.RecordBatch) error
	// finish closes the batch at the watermark.
	finish(ctx context.Context, fc *finishCtx) (finished, error)
	// committed tells the partition that every store holds the version
	// finish described: changes are forgotten.
	committed()
	// size reports the rows and bytes the partition's state holds.
	size() (rows, bytes int64)
	release()
}

// storeSpec describes one state store of an operator partition. An
// operator has either one store named "" (at state/<id>/<p>/) or only named
// stores (at state/<id>/<p>/<name>/): never a named store under another.
type storeSpec struct {
	name          string
	key, value    *arrow.Schema
	uniqueUpserts bool // every changes record holds each key once
}

// finishCtx is what finish may depend on besides the partition's state and
// input: the batch's write-ahead entry.
type finishCtx struct {
	batchID   int64
	watermark int64 // in force for this batch (eviction), Unix ms; 0 for none
	// prevWatermark is the previous batch's watermark, recorded in
	// offsets/N as lateWatermarkMs for chains and for operators that ask
	// (prevWatermarker); 0 otherwise.
	prevWatermark int64
	timestampMs   int64 // the batch timestamp recorded in offsets/N
	mode          OutputMode
	last          bool // the operator is the chain's last (its output reaches the sinks)
	mem           memory.Allocator
}

// finished is a partition's result of one batch. The executor releases
// every record in it.
type finished struct {
	out arrow.RecordBatch // nil for no rows
	// outHead says out's rows are, in order, the first rows of the upserts
	// of store "" (the same keys first): a split by partition of the
	// upserts splits out too (whole.go).
	outHead bool
	changes map[string]stateChange
	// parts, when not nil, is the batch's state change of store "" and
	// its output already split by state partition (the whole-table path,
	// whole.go): changes[""] then holds only its full flag, and out is
	// nil.
	parts   *splitChange
	updated int64 // rows written to state
	removed int64 // rows evicted or deleted from state
	// late counts rows the operator dropped itself as too late (windows
	// already closed), on top of the executor's watermark filter.
	late   int64
	custom map[string]int64 // operator-specific figures for progress
}

// stateChange is one store's new version: rows upserted and keys removed
// (either nil for none). full says the upserts are every live row of the
// new version and nothing was removed (every group changed): the store may
// then write a delta that serves as a snapshot (statestore.CommitFull).
type stateChange struct {
	upserts, removals arrow.RecordBatch
	full              bool
}

// splitChange is a state change's upserts and the output, piece p
// holding partition p's rows (nil for none).
type splitChange struct {
	upserts, out []arrow.RecordBatch
}

// releaseAll releases the records of rs that are not nil.
func releaseAll(rs []arrow.RecordBatch) {
	for _, r := range rs {
		if r != nil {
			r.Release()
		}
	}
}

func (f *finished) release() {
	if f.out != nil {
		f.out.Release()
	}
	if f.parts != nil {
		releaseAll(f.parts.upserts)
		releaseAll(f.parts.out)
		f.parts = nil
	}
	for _, c := range f.changes {
		if c.upserts != nil {
			c.upserts.Release()
		}
		if c.removals != nil {
			c.removals.Release()
		}
	}
}

// eventTimeCol names the output column that carries a row's event time,
// col -1 for none. A row's event time is the column's value (Unix ms) plus
// offsetMs: a window's rows carry window_end with offset -1, the last
// instant inside the window, so that a window the watermark just closed is
// not late for the next operator.
type eventTimeCol struct {
	col      int
	offsetMs int64
}

var noEventTime = eventTimeCol{col: -1}

// prevWatermarker is an operator that needs the previous batch's
// watermark at finish (a sliding window by panes emits the windows that
// closed since then).
type prevWatermarker interface {
	needsPrevWatermark() bool
}

// storeOptions are the statestore options of one store of an operator.
func storeOptions(cfg *config, s storeSpec) statestore.Options {
	return statestore.Options{
		KeySchema:           s.key,
		ValueSchema:         s.value,
		SnapshotEvery:       cfg.snapshotEvery,
		MinVersionsToRetain: cfg.minBatchesToRetain,
		Allocator:           cfg.mem,
		UniqueUpserts:       s.uniqueUpserts,
	}
}
