// Package iceberg is onceflow's Apache Iceberg sink and source: batch N of
// a query becomes one Iceberg snapshot, exactly once in effect however
// often AddBatch(N) runs, in a table that Spark, Trino, Flink, DuckDB and
// PyIceberg read with snapshot isolation; and a table's appends stream
// into a query, batch by batch, replayable. It is its own Go module
// (github.com/onceflow/onceflow/iceberg), built on
// github.com/apache/iceberg-go, so that the engine's go.mod never carries
// iceberg-go's SQL drivers and cloud SDKs. It imports contract and the
// fault points, never the engine.
//
// # Catalogs and storage
//
// OpenCatalog opens the SQL catalog on SQLite (sqlite:PATH, embedded, pure
// Go: modernc.org/sqlite) or PostgreSQL (postgres://…), or a REST catalog
// (rest+http(s)://…, settings passed through with WithCatalogProperties).
// Metadata and data live under the warehouse: a local directory or
// s3://bucket/prefix (WithS3). The catalog commit is a compare-and-swap of
// the table's metadata location. Credentials (S3 keys, database and REST
// secrets) are scrubbed from every error and never part of a description.
//
// # Sink protocol
//
// Every snapshot the sink commits carries the summary properties
// onceflow.query-id (the checkpoint's query id, given to Start) and
// onceflow.batch-id (N), and the same commit sets the table property
// onceflow.last-batch.<query-id> = N, so a batch without rows leaves a
// trace too (docs/format/iceberg.md).
//
//  1. Start(ctx, queryID) records the query id. ValidateSchema refuses a
//     schema the table cannot take, with a diff; only a new nullable column
//     is accepted (the table evolves at the next batch). LastBatchID
//     (SinkPosition) answers the newest batch of the query the table holds,
//     so the engine's sink-behind and sink-ahead checks cover the table.
//  2. AddBatch(N) loads the table (creating it from the query's schema and
//     WithPartitionSpec on the first batch, with fresh field ids 1, 2, … in
//     column order) and looks for N: the property at or above N, or a
//     snapshot of the main branch's ancestry with this query and batch N.
//     Found: the batch is in; the call returns (Skipped counts it). This is
//     what Flink's Iceberg committer does with flink.max-committed-
//     checkpoint-id and Spark's with the epoch id.
//  3. Otherwise it writes the rows as Parquet data files named
//     {partition}-{task}-{WriteID(query, N)}-{n}.parquet under data/. The
//     names are the same in every attempt of N, so a replay overwrites its
//     own leftovers and maintenance knows the batch in flight by name.
//     [fault point iceberg-sink-after-data-files]
//  4. It stages one transaction on the loaded table: a requirement that the
//     main branch's head is still the loaded one (assert-ref-snapshot-id,
//     pinned, so iceberg-go's own retry can never rebase it), the property,
//     and the snapshot (fast append; in Update mode a row delta of an
//     equality-delete file of the batch's keys plus its rows; in Complete
//     mode a replacement of every live data file). Staging writes the
//     manifests and the manifest list. [iceberg-sink-after-metadata]
//  5. It commits: the catalog writes the new metadata.json and swaps the
//     table's pointer if the head is unchanged. [iceberg-sink-after-commit]
//  6. A commit error of any kind (another writer moved the head; a lost
//     response; a dropped connection) is settled the same way: reload the
//     table and look for N as in step 2. Found: done, nothing re-appended.
//     Not found: the commit did not take effect, so it is staged again on
//     the fresh head with the same data files and committed, at most
//     WithCommitRetries times. Another connector re-appended a batch's
//     files after an unknown outcome; here the look comes before every
//     retry, and the head requirement means an old attempt that lands late
//     makes the retry fail (and be found) rather than both succeed. Tables
//     the sink creates set commit.retry.num-retries = 0 so iceberg-go does
//     not retry behind the sink's back.
//
// Why this order: data files first and the catalog swap last means a crash
// anywhere leaves either no snapshot (the replay writes the same files
// again) or the whole snapshot, which step 2 finds. The engine writes
// commits/N only after AddBatch returns, so a crash between the catalog
// swap and commits/N re-runs N and step 2 skips it.
//
// # Source
//
// Source offsets are snapshot ids of the main branch, {"snapshot":ID}, 0
// before the first. Batch (start, end] reads the data files added by the
// append snapshots after start up to end, snapshot by snapshot in commit
// order, each snapshot's files in path order: a replay of the range reads
// the same files in the same order. Replace snapshots (compaction) carry
// no new rows and are passed over; overwrite and delete snapshots stop the
// query with ErrRewrittenSnapshot unless WithSkipOverwrites. A recorded
// snapshot that was expired is a *DataLossError.
//
// # Maintenance
//
// Compact rewrites small data files into a replace snapshot and Expire
// expires old snapshots and deletes orphan files. Both pin the branch head
// they planned on, so they lose a race with a running writer instead of
// rewriting under it; Expire never deletes a file a retained snapshot
// references, nor a file younger than its orphan age, nor one named with
// the write id of any query's next three batches (the batch in flight).
//
// # Durability on local disk
//
// iceberg-go's local file IO does not fsync. A SIGKILL loses nothing (the
// page cache survives; the crash tests prove it), but a power loss may
// leave a committed snapshot whose files are torn. Put tables whose
// durability matters on S3, or on a file system that commits on close.
//
// Sinks are not safe for overlapping AddBatch calls (the engine makes
// none); Catalog and Source are safe for concurrent use.
package iceberg
