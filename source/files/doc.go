// Package files is a source over a landing directory of JSON-lines, CSV or
// Parquet files, parsed into a declared Arrow schema. It implements
// contract.Source, SourceCheckpointer, SourceCommitter, AvailableNowSource,
// SourceIdentifier and Describer without importing the engine.
//
// # Landing contract
//
// The directory is listed flat (no subdirectories, no symbolic links). A
// file is taken when its base name matches the glob (WithGlob; default
// "*.json", "*.csv" or "*.parquet") and does not begin with "." or "_" nor
// end in ".tmp". A file that matches is complete: writers write it under a
// name that does not match (name.tmp, .name) and rename it into place.
// Writers that cannot rename can use WithMinFileAge, which makes files
// eligible only once their modification time is that old.
//
// A landed file never changes. The source holds writers to that: it
// records each file it takes with its size, modification time and the
// XXH64 of its bytes, and a batch reads exactly those bytes or fails.
// A taken file found changed is never skipped silently:
//
//   - Read of the batch that took it fails with a *ChangedError
//     (ErrFileChanged) naming the file, the recorded and the present size,
//     and both modification times when they differ, when the file is gone,
//     has another size or modification time, or other bytes (a rewrite that
//     kept size and modification time is caught by the digest). With
//     WithDeadLetter the batch instead reads the taken bytes when they are
//     still there as whole lines (the file only grew, or was touched), so
//     every attempt of the batch emits the same rows; when they are gone
//     (cut short, rewritten, or the last taken line was cut by a writer
//     still writing) it fails even then, since no attempt could emit what
//     an earlier one did.
//   - LatestOffset compares every listed taken name with its newest
//     record. Without a dead-letter directory a difference fails it with a
//     *ChangedError, so the query stops before the bytes no batch read are
//     lost; the way out is to restore the file, move it away, or configure
//     WithDeadLetter. With one, the change is logged in the next entry, and
//     Read of that entry copies the bytes no batch read to the dead-letter
//     directory (see Bad input). A rewrite that kept size and modification
//     time is found only by a Read of its batch.
//
// A file name, once taken, is never taken again as a new file: a file that
// reappears under a taken name is a change of that file. WithMaxFileAge(d)
// trades that for a bounded memory, as Spark's maxFileAge: with N the newest
// modification time of any file taken so far, a file modified before N-d
// is never taken, and names that old are forgotten at the next compaction
// (a file that reappears under a forgotten name with a recent modification
// time is new). The compact entry remembers the newest modification time
// of a forgotten file, and no later run takes a file modified at or before
// it, even with a larger age or without WithMaxFileAge: a forgotten name is
// never taken again under its old modification time.
//
// # Offsets and the files log
//
// The source keeps a log in its checkpoint folder (OpenCheckpoint):
// files/<k> is source batch k's entry, the exact list of files it took
// (name, size, modification time, XXH64 of the taken bytes) in the
// order they are read, and the changed files it dead-letters, written
// put-if-absent with offsetlog. LatestOffset hashes each file it takes, so
// planning reads every new file once. The offset is {"logOffset":k}; the initial
// offset is {"logOffset":-1}. A batch from start to end reads the entries
// start+1 … end.
//
// LatestOffset(start) returns {"logOffset":start+1} if that entry already
// exists — a crash came after this log was written and before the engine
// recorded the batch, or a fork replays — and never plans anew; an entry a
// compaction forgot fails it with ErrBadOffset. Otherwise it lists the
// directory, takes the files no entry took, in (modification time, name)
// order, at most WithMaxFilesPerTrigger of them (default: all, as Spark's
// maxFilesPerTrigger) counting the changed files it logs, writes entry
// start+1, and returns it. With nothing new it returns start.
//
// PrepareAvailableNow lists the directory once; later batches take only
// files from that listing, and log only the changes it saw (a file that
// changes again during the run waits for the next run, so the run ends).
//
// # Compaction
//
// Commit(end), after it cleaned up, compacts the log when end reached a
// boundary c of WithLogCompactInterval(n) (default 10; (c+1) a multiple of
// n) past the newest compact entry: compact/<c> holds every remembered
// entry 0…c with its files (the previous compact entry's plus the plain
// ones after it), written put-if-absent with bytes that depend only on
// those entries and the options, so a second attempt writes the same
// object. Only once it is durable are the plain entries 0…c deleted, then
// the older compact entries; before the first deletion the cleanup object
// is rewritten at version 2, which builds that predate compaction refuse. The checkpoint folder thus holds one compact
// entry and fewer than n plain entries after it (plus the entries of
// batches not committed yet), and OpenCheckpoint reads only those; a crash
// between the steps leaves objects the next Commit deletes. Entries of
// committed batches are the only ones compacted; since the compact entry
// keeps each entry's files, a range can still be read whole after its
// plain entries are gone (a re-run, a fork, an audit), unless WithMaxFileAge
// forgot an entry: a compaction drops an entry whose files are all older
// than the newest modification time among entries 0…c minus the age, and
// a Read that needs it fails with ErrBadOffset. A checkpoint written
// before compaction existed (plain entries only) is read whole once and
// compacted at its next boundary.
//
// # Parsing
//
// JSON lines: one object per line; lines of only spaces, tabs and carriage
// returns are skipped; keys match
// column names exactly; undeclared keys are skipped (their structure is
// checked, not their contents); a key twice in one object is an error; a
// missing or null value is null for a nullable column and an error
// otherwise. Numbers go to integer and float columns, strings to string
// columns. Timestamps are strings in the WithTimestampLayout layout
// (default RFC 3339 with optional fraction, e.g. "2026-11-30T10:00:00.123Z")
// or integers counting the column's unit since the epoch; dates are
// "YYYY-MM-DD". Supported column types: int8…int64, uint8…uint64, float32,
// float64, string, bool, timestamp (any unit, UTC or no zone), date32.
//
// CSV: encoding/csv (RFC 4180, fields may be quoted and span lines). With a
// header (default) columns map by name: undeclared columns are ignored, a
// declared nullable column the header lacks is null, a declared
// non-nullable one fails the file. Without a header (WithCSVHeader(false))
// fields map to the declared columns by position. Every row must have as
// many fields as the header (or the schema). An empty field is null for
// non-string columns and "" for string columns; booleans are true/false
// (also TRUE, True, 1, 0). A CSV file is held in memory while it is parsed.
//
// Parquet: flat files; columns map by name; undeclared file columns are
// ignored; a declared nullable column the file lacks is null. A declared
// column's file type must fit: integers of the same signedness (INT64 only
// into 64-bit columns, INT32 into any width, range-checked per value),
// FLOAT or DOUBLE for floats, BYTE_ARRAY (plain or STRING) for strings,
// INT64 TIMESTAMP of any unit for timestamps (converted to the declared
// unit, rounded down), INT32 DATE for dates. A type that does not fit
// rejects the file naming the column; a null or out-of-range value
// rejects the row. Row numbers (1-based across row groups) stand in for
// line numbers.
//
// # Bad input
//
// Without a dead-letter directory the first bad line fails Read with an
// *InputError naming the file, the 1-based line (0 for the whole file), the
// column when one is at fault, and the reason:
//
//	files: /landing/p-3.json line 17: column amount_cents: "12x" is not an int64
//
// With WithDeadLetter(dir) each bad line goes to dir/deadletter-<k>.jsonl
// (k = files log entry, 20 digits) as {"file","line","column","reason","raw"},
// and every good line, before and after it, is emitted. The file is
// written whole (temp file, fsync, rename) once the entry's files are
// read, and overwritten on a replay, so a replay never duplicates it. A
// file-level problem (unreadable Parquet, a header without a required
// column) sends one dead letter with line 0 and skips the file.
//
// A changed file that entry k logged goes there too: its bytes no batch
// read are copied, exactly, to dir/deadletter-<k>-<i>.changed (i its
// place among the entry's changed files; ChangedName) and noted in
// deadletter-<k>.jsonl with line 0, a reason naming both records, and
// "copy" naming the file. The bytes no batch read are those after the
// previously recorded size when the file's first bytes are still the
// recorded ones (it grew), else all of them (it was cut short or
// replaced); a file only touched has none, and gets the note alone. Read
// checks the bytes against the digest the listing recorded and fails when
// they are not those, so every attempt of the entry writes the same bytes;
// the next change of the file is logged by a later entry and copies only
// what came after. The copy is held in memory while it is written. An
// entry that logged changed files cannot be read without WithDeadLetter.
//
// # Cleanup
//
// WithCleanup(Archive(dir)) or WithCleanup(Delete()): Commit, called by the
// engine after a batch committed, moves or deletes the files of every entry
// up to that batch, then records how far it got in the object "cleanup" of
// the checkpoint folder. It only touches a file whose size and modification
// time still match the record, skips files already gone, never replaces an
// archived file of another size or modification time (an earlier file of
// the same name: it stays in place), and so may run again after a crash.
// A copy across file systems keeps the modification time. Read also looks
// for a taken file in the archive (there, only its size and digest are
// compared), so a range can be read again after its files were moved.
//
// # Lifecycle and concurrency
//
// New, OpenCheckpoint, then LatestOffset / Read / Commit as the engine
// plans, runs and commits batches. The taken set (each name's newest
// record, digest included) and every remembered entry's file list are
// kept in memory (rebuilt by OpenCheckpoint, which writes nothing and may
// run next to a live query, as the audit does: when a compaction of that
// query deletes what it was reading, it reads again from the newer compact
// entry); without WithMaxFileAge they grow with the number of files ever
// taken, as does the compact entry. A Source is safe
// for concurrent use; Read emits records of at most WithBatchSize rows
// (default 65536), spanning files, and releases each after emit returns.
//
// Fault points files-after-log, files-mid-cleanup, files-after-compact and
// files-after-log-purge (internal/fault) let crash tests kill a process right
// after a log entry is written, in the middle of a cleanup, right after a
// compact entry is written, and between the deletion of the plain entries
// it covers and that of the older compact entries.
//
// The on-disk formats are described in docs/format/files-source.md.
package files
