package fault

// The fault points, one constant each, grouped by the package that places
// them and in the order a batch meets them. Each comment says what is
// durable, and what not yet, when the process dies there. Callers pass
// these constants to Point; TestPointNamesMatchCallSites fails when a call
// site uses a name missing here or a name here has no call site.
const (
	// Package engine: one batch N through plan → WAL → execute → state →
	// sink → commit (DESIGN.md, batch protocol).

	// EngineBeforeWAL: batch N is planned; offsets/N is not written.
	EngineBeforeWAL = "engine-before-wal"
	// EngineAfterWAL: offsets/N is durable; no source was read.
	EngineAfterWAL = "engine-after-wal"
	// EngineMidRead: the first record of a source's range of batch N was
	// read, the rest not.
	EngineMidRead = "engine-mid-read"
	// EngineBeforeStateSync: state version N is computed and its files
	// written as temporary files, none synced or in place (stateful
	// queries with the in-memory state backend; with another backend the
	// state is already durable); the sinks are adding batch N at the same
	// time, so a kill here finds batch N in none, some or all of them.
	EngineBeforeStateSync = "engine-before-state-sync"
	// EngineAfterState: state version N is durable (stateful queries
	// only); the sinks may still be adding batch N (they run while the
	// state is synced).
	EngineAfterState = "engine-after-state"
	// EngineAfterSink: every sink added batch N and state version N is
	// durable; commits/N is not written.
	EngineAfterSink = "engine-after-sink"
	// EngineAfterCommit: commits/N is durable; the sources' after-commit
	// steps, the purge and the progress record of batch N have not run.
	EngineAfterCommit = "engine-after-commit"
	// EngineDuringPurge: batch N is committed; the logs and state older
	// than the retention are not yet purged (the purge runs in its own
	// goroutine, so batch N+1 may be under way).
	EngineDuringPurge = "engine-during-purge"
	// EngineDuringSnapshot: background maintenance wrote partition 0's
	// snapshot at version N, the other partitions' not.
	EngineDuringSnapshot = "engine-during-snapshot"

	// Package source/files: the source's own log under sources/<i>/.

	// FilesAfterLog: files log entry k is durable; LatestOffset has not
	// returned it, so the engine's WAL cannot hold it.
	FilesAfterLog = "files-after-log"
	// FilesMidCleanup: the first file of a committed batch was archived
	// or deleted, the others not, and the cleanup record not advanced.
	FilesMidCleanup = "files-mid-cleanup"
	// FilesAfterCompact: compact/<c> is durable; none of the entries it
	// covers is deleted.
	FilesAfterCompact = "files-after-compact"
	// FilesAfterLogPurge: the plain entries compact/<c> covers are
	// deleted, the older compact entries not.
	FilesAfterLogPurge = "files-after-log-purge"

	// Package source/kafka: the dead-letter transaction inside a Read.

	// KafkaDeadLetterAfterProduce: the Read's dead letters and progress
	// markers are produced in an open transaction, not committed.
	KafkaDeadLetterAfterProduce = "kafka-deadletter-after-produce"
	// KafkaDeadLetterAfterCommit: the dead-letter transaction is
	// committed; Read has not returned, so the engine runs the batch again.
	KafkaDeadLetterAfterCommit = "kafka-deadletter-after-commit"

	// Package filesink: AddBatch of batch N (files first, log entry last).

	// FileSinkBetweenFiles: one Parquet file of batch N is written, the
	// next not.
	FileSinkBetweenFiles = "filesink-between-files"
	// FileSinkBeforeLog: every file of batch N is written; the table log
	// entry N is not, so the files are unlisted.
	FileSinkBeforeLog = "filesink-before-log"
	// FileSinkAfterLog: log entry N is durable (the batch is in the
	// table); AddBatch has not returned.
	FileSinkAfterLog = "filesink-after-log"
	// FileSinkCompaction: _onceflow_log/<N>.compact is durable; the log
	// objects older than the previous compact file are not deleted.
	FileSinkCompaction = "filesink-compaction"

	// Package kafkasink: AddBatch of batch N as one Kafka transaction.

	// KafkaSinkAfterProduce: the batch's records and marker are produced
	// in an open transaction, not committed.
	KafkaSinkAfterProduce = "kafkasink-after-produce"
	// KafkaSinkAfterCommit: the transaction is committed; AddBatch has not
	// returned.
	KafkaSinkAfterCommit = "kafkasink-after-commit"

	// Package foreachbatch/postgres: one database transaction per batch
	// (Sink and Guard).

	// PGBeforeBegin: no transaction of batch N has begun.
	PGBeforeBegin = "pg-before-begin"
	// PGAfterProgress: the Guard's progress row of batch N is written in
	// the open transaction; the user's function has not run.
	PGAfterProgress = "pg-after-progress"
	// PGAfterRows: batch N's rows (and progress row) are written in the
	// open transaction, not committed.
	PGAfterRows = "pg-after-rows"
	// PGAfterCommit: the transaction is committed; AddBatch has not
	// returned.
	PGAfterCommit = "pg-after-commit"

	// Package iceberg (module github.com/onceflow/onceflow/iceberg): AddBatch
	// of batch N as one Iceberg snapshot.

	// IcebergSinkAfterDataFiles: batch N's Parquet data files are written
	// under the table's data/ with names carrying the batch's write id; no
	// manifest lists them, so they are orphans until a replay commits them.
	IcebergSinkAfterDataFiles = "iceberg-sink-after-data-files"
	// IcebergSinkAfterMetadata: the manifests and the manifest list of
	// batch N's snapshot are written; the catalog still points at the
	// previous metadata, so the snapshot does not exist for readers.
	IcebergSinkAfterMetadata = "iceberg-sink-after-metadata"
	// IcebergSinkAfterCommit: the catalog points at the metadata holding
	// batch N's snapshot (with onceflow.batch-id = N); AddBatch has not
	// returned.
	IcebergSinkAfterCommit = "iceberg-sink-after-commit"

	// Program tests/chaos/chaosprog: its foreachBatch JSON-lines sink.

	// LinesMidRows: half the batch's rows are appended and synced, the
	// marker line not.
	LinesMidRows = "lines-mid-rows"
	// LinesAfterMarker: the rows and the marker line {"done":N} are
	// appended and synced.
	LinesAfterMarker = "lines-after-marker"
)

// EnginePoints returns the engine's points in protocol order.
func EnginePoints() []string {
	return []string{EngineBeforeWAL, EngineAfterWAL, EngineMidRead, EngineBeforeStateSync, EngineAfterState,
		EngineAfterSink, EngineAfterCommit, EngineDuringPurge, EngineDuringSnapshot}
}

// FilesSourcePoints returns the files source's points.
func FilesSourcePoints() []string {
	return []string{FilesAfterLog, FilesMidCleanup, FilesAfterCompact, FilesAfterLogPurge}
}

// KafkaDeadLetterPoints returns the Kafka source's dead-letter points.
func KafkaDeadLetterPoints() []string {
	return []string{KafkaDeadLetterAfterProduce, KafkaDeadLetterAfterCommit}
}

// FileSinkPoints returns the file sink's points in protocol order.
func FileSinkPoints() []string {
	return []string{FileSinkBetweenFiles, FileSinkBeforeLog, FileSinkAfterLog, FileSinkCompaction}
}

// KafkaSinkPoints returns the Kafka sink's points in protocol order.
func KafkaSinkPoints() []string {
	return []string{KafkaSinkAfterProduce, KafkaSinkAfterCommit}
}

// PostgresPoints returns the PostgreSQL Guard's points in protocol order;
// the Sink passes the same ones except PGAfterProgress.
func PostgresPoints() []string {
	return []string{PGBeforeBegin, PGAfterProgress, PGAfterRows, PGAfterCommit}
}

// IcebergSinkPoints returns the Iceberg sink's points in protocol order.
func IcebergSinkPoints() []string {
	return []string{IcebergSinkAfterDataFiles, IcebergSinkAfterMetadata, IcebergSinkAfterCommit}
}

// LinesPoints returns the chaos program's JSON-lines sink's points.
func LinesPoints() []string {
	return []string{LinesMidRows, LinesAfterMarker}
}

// All returns every point: the groups above, in the order of this file.
func All() []string {
	var all []string
	for _, g := range [][]string{EnginePoints(), FilesSourcePoints(), KafkaDeadLetterPoints(),
		FileSinkPoints(), KafkaSinkPoints(), PostgresPoints(), IcebergSinkPoints(), LinesPoints()} {
		all = append(all, g...)
	}
	return all
}
