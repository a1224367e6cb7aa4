// Package chaos is the chaos harness: it runs the settlement pipeline as a
// real process (chaosprog) with all four sink protocols attached, kills it
// with SIGKILL at named fault points and random moments while payments keep
// arriving, restarts it, and at the end reconciles every sink with the input
// through package audit (and once through `onceflow audit`). The broker runs
// in its own `onceflow dev kafka` process so it outlives the kills.
//
//	go test -race ./tests/chaos/                          a short run (a few dozen kills, every fault kind once)
//	go test ./tests/chaos/ -run TestChaos -chaos.kills=1000 -timeout 2h -v
//
// Beyond SIGKILL (docs/faults.md has the table these print), each against
// all four sinks, each followed by a restart once the fault clears and an
// audit of every sink:
//
//   - TestStorageFaults: ENOSPC, EIO, torn writes, failed fsyncs and slow
//     calls in the checkpoint store and the file sink's table store
//     (storage/faultstore, chaosprog -checkpoint-faults/-lake-faults).
//   - TestS3Faults: checkpoint and table on S3 behind internal/s3fault:
//     500, 503 SlowDown, resets mid-body, a 10 s stall, a PUT whose answer
//     is lost; -chaos.s3-stops adds a run per kind that outlasts the SDK's
//     retries. Needs ONCEFLOW_TEST_S3_ENDPOINT.
//   - TestPGRestart: pg_ctlcluster restart of a cluster of the test's own
//     (15/onceflow-chaos) in the middle of a batch; needs root and the
//     Debian PostgreSQL tools.
//   - TestPGLostCommit: internal/pgfault forwards COMMIT and loses its
//     answer.
//   - TestKafkaFaults: kfake in the test process fails Produce, EndTxn and
//     Fetch with retriable and fatal codes and dropped connections.
//   - TestClockJumps: the engine's clock jumps ±2 h under available-now,
//     processing-time and scheduled triggers.
//   - TestSoak (-chaos.soak=30m): 10k payments/s, a SIGKILL about every
//     20 s, RSS, checkpoint size and batch p99 of the first window against
//     the last.
//
// These fault tests (but TestPGRestart, which sets the environment) run in
// parallel with each other, -parallel at a time (GOMAXPROCS by default):
// each has its own broker, checkpoint, bucket and schema, and much of
// their time is waiting (stalls, client backoff). -chaos.rounds=N repeats
// every fault kind N times (default 1); -chaos.table=FILE appends the
// fault tables as markdown rows. The programs are built with
// -tags onceflow_faults (internal/fault's points).
//
// The PostgreSQL sink takes part when ONCEFLOW_TEST_PG_URL is set (see
// scripts/pg-setup.sh); without it the harness runs the other three sinks
// and says so. See docs/chaos.md and docs/faults.md.
package chaos
