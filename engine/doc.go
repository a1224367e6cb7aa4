// Package engine defines streaming queries and runs them: the driver loop,
// triggers, planning, the write-ahead offset log, recovery and progress. It
// is the only package that sees sources, operators, state and sinks
// together. Nothing imports it but programs (cmd/, examples/, tests/,
// bench/) and plugins on its listener API (monitor, see Listener); sources
// and sinks implement the interfaces of package contract, which engine
// re-exports as aliases (contracts.go). internal/lint keeps it so.
//
// # The life of batch N
//
//  1. Plan: ask each source for its next end offset (capped by its
//     per-trigger limit). No new data: no batch.
//  2. Write offsets/N (put-if-absent): the sources' start and end offsets,
//     the batch timestamp, the watermark, and the configuration fixed at the
//     first batch (state partitions, stateful operators and their schemas).
//  3. Read [start, end) of every source, run the stateless steps per record,
//     hash-partition rows into the first stateful operator's P partitions;
//     then, operator by operator along the chain, merge each partition into
//     its state, finish it at the watermark and write its state version N
//     (all partitions in parallel), and re-partition its output, through
//     the stateless steps that follow, by the next operator's keys. A
//     group-by or row-per-window aggregation whose state is in memory
//     keeps one working table for all its partitions instead: its rows
//     reach it unpartitioned, and its state changes and output are split
//     by partition when it finishes (whole.go: the same state files,
//     output and order as partition by partition). With
//     the in-memory backend the files of version N are written under a
//     storage.SyncGroup: aside, not yet in place nor durable.
//  4. Hand the output to every sink: AddBatch(ctx, N, …), which each sink
//     makes idempotent in N. Meanwhile the state files of version N are
//     fsynced and put in place (stateSync); both end before step 5. A
//     crash before then re-runs N from state N-1, which nothing of N
//     replaced, and the sinks skip what they hold.
//  5. Write commits/N; under Every(0) the next batch is planned at the
//     same time (planAhead), and offsets/N+1 is still written only after
//     commits/N, so the log never holds two uncommitted plans. Then the
//     sources' after-commit hooks run, and in the background (beside the
//     next batches, one pass of each at a time) logs and state older than
//     the retention are purged (in steps of a tenth of the retention) and
//     state snapshots are written.
//
// On start, if offsets/L exists and commits/L does not, batch L is re-run
// with exactly the offsets, timestamp and watermark recorded in offsets/L:
// nothing is re-planned. State is reloaded at the last committed version, so
// a re-run rebuilds version L from version L-1 and overwrites what a crashed
// attempt wrote.
//
// # Joins: a second input
//
// A join (Stream.Join, JoinTable, JoinStatic) adds its right side's
// sources to the query's source list, so their offsets (a static table's
// version among them) are planned in the same offsets/N. Each such source
// feeds a branch (branch.go): the right stream's stateless steps and its
// own watermark, whose rows enter side 1 of the join, late by the same
// watermark as its main input; the global watermark takes each source's
// branch delay. A re-run of batch N reads the same ranges of both sides,
// and each join's output is a function of its state (loaded in arrival
// order) and the batch, so it joins exactly what the first attempt joined.
//
// # Guarantees
//
//   - No sink sees batch N before offsets/N is durable; sinks see batches
//     in increasing order; a batch is committed only after every sink
//     accepted it.
//   - Everything that reaches a sink is a function of the input and the
//     write-ahead entry: no wall clock, no random ids, no map order.
//   - A second driver on a local checkpoint fails at once (an exclusive
//     lock that the kernel drops when the process dies); on object storage
//     the put-if-absent of offsets/N and commits/N, which carry the run id,
//     stops the loser with ErrConcurrentDriver.
//   - A restart that changes what the first batch fixed (partition count,
//     grouping keys or state schema, removed sources or stateful
//     operators) fails before any batch runs, listing each difference.
//   - A sink that knows its newest applied batch (SinkPosition) must be at
//     the newest commit (or the planned batch after it) when a run starts:
//     one ahead of the checkpoint would skip re-planned batches, one behind
//     it (restored from a backup, failed over to a lagging replica) would
//     never get the batches it lost. Either fails before any batch runs,
//     naming the sink, both batch ids and the way out.
//
// # The operator chain
//
// A query is stateless steps, then a stateful operator, then stateless
// steps, then another operator, and so on (chain.go). Every stateful step
// implements one interface (operator.go): group-by (op_agg.go), tumbling
// and sliding windows (op_agg.go, by panes in op_panes.go), session windows
// (session.go), the two deduplications (op_dedup.go), top-N
// (op_topn.go) and user processors (op_process.go). Each has its own state folder, conf entry and progress
// entry. The first operator drops rows older than the batch's watermark;
// the ones after it drop rows older than the previous batch's (Spark 3.4),
// recorded in offsets/N; all evict by the batch's. Output modes are checked
// for the whole chain by NewQuery (chainMode), and Query.Describe returns
// the plan.
//
// # Checkpoint layout
//
//	metadata                       query id, name, format version, created
//	offsets/<N, 20 digits>         write-ahead plan of batch N (offsetlog v1 JSON)
//	commits/<N>                    batch N is done
//	progress/<N>                   the batch's Progress record
//	state/<operator>/<partition>/  statestore files (<store>/ below it for
//	                               an operator with several named stores: a
//	                               join's left/, right/, table/; a processor's
//	                               states and timers, docs/format/processor.md)
//	state/<operator>/deltas/       a batch's deltas of every partition of a
//	                               store in one bundle file (statestore.Group)
//	sources/<i>/                   the source's own log, if it keeps one
//	.lock                          local checkpoints only: the driver lock
//
// # User processors
//
// GroupBy(keys…).Process(p) runs Go code (a Processor) once per key per
// batch with typed state (ValueState, ListState, MapState; TTL on the
// batch timestamp) and durable timers (event time: the watermark;
// processing time: the batch timestamp of offsets/N, which also makes the
// planner run a batch without input). Processor's doc states the
// determinism rule; package processortest checks it. Side effects leave as
// intent rows for package outbox.
//
// # Lifecycle
//
// NewQuery checks the definition; Run opens the checkpoint, starts the
// sinks, recovers and runs batches until the trigger ends, Stop is called
// or its context ends, and waits for the state snapshots it started in the
// background. Stop is final: a later Run returns nil at once. The caller
// owns the sources, sinks and stores it passes in and closes them after
// the last Run.
//
// A Query is not safe for concurrent Run calls; Stop and LastProgress may
// be called from any goroutine.
package engine
