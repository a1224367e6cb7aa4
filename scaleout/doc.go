// Package scaleout runs one query definition on any number of worker
// processes, with Kafka's consumer-group protocol deciding which worker
// runs which part. It is the Kafka Streams model on onceflow's protocol;
// docs/scale-out.md is the design, with the arithmetic at 64 workers ×
// 256 partitions.
//
// # What it owns
//
// A Worker owns one franz-go group client and the tasks the group assigns
// to it. A task is one partition of the lead input topic (Task); the
// worker runs, for each task it owns, the query that the caller's
// BuildFunc returns for that task, on its own goroutine. The query is an
// ordinary engine query (*engine.Query implements Query): this package
// does not import the engine, and the engine knows nothing of tasks. What
// makes a task a task is what BuildFunc gives its query:
//
//   - a source restricted to the task's partition (kafka.WithPartitions),
//   - a checkpoint of its own on shared storage (Task.Checkpoint:
//     <root>/tasks/<t>/, usually S3 through storage/s3store),
//   - the task's name (Task.Name) as the query's name and as the job of a
//     PostgreSQL progress row; the Kafka sink's transactional id follows
//     from the task checkpoint's query id without being told.
//
// # What it guarantees
//
// The group only assigns. The worker subscribes to the lead topic with the
// cooperative-sticky balancer, BlockRebalanceOnPoll and auto-commit off,
// pauses the topic so nothing is ever fetched, and never commits an offset:
// the position of a task is its checkpoint's offset log, nothing else.
//
//  1. Assigned: the task starts. BuildFunc builds its query, Run opens
//     the checkpoint, recovers the last planned batch and loads the state
//     at the last commit, exactly as a restart of a single query does.
//  2. A Run that fails (a checkpoint still held by the previous owner: the
//     local lock or a lost put-if-absent, engine.ErrConcurrentDriver; or
//     any other error) is retried after a backoff for as long as the worker
//     owns the task; it never stops the worker or its other tasks.
//  3. Revoked (or lost): the task's query is stopped (Stop: the batch in
//     flight finishes and commits) and the callback waits for its Run to
//     return before the rebalance goes on, so a graceful move never has two
//     owners. After WithStopTimeout the task's context is cancelled and the
//     batch in flight is abandoned, to be re-run by the next owner from its
//     write-ahead entry.
//  4. A zombie (an owner that lost the task without knowing) is fenced by
//     the put-if-absent of offsets/N and commits/N, by the Kafka sink's
//     transactional-id epoch, and by the PostgreSQL progress row.
//
// # Lifecycle
//
// NewWorker checks the options. Run joins the group and runs tasks until
// its context ends; then it stops every task as a revoke does, leaves the
// group, and returns. The caller's release function (from BuildFunc) runs
// after each Run of a task's query, to close its sources and sinks. A
// Worker runs once.
//
// Tasks and the On… callbacks of WithTaskListener are safe to use from any
// goroutine; listener calls are made one at a time.
package scaleout
