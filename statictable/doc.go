// Package statictable holds the static tables of a stream-static join
// (engine.Stream.JoinStatic, contract.StaticTable): a table written by the
// files sink, read at a batch id of its log (Lake), and a directory of
// Parquet, CSV or JSON-lines files, read at a listing (Dir). Each version
// is what the engine records in offsets/N, so a re-run of a batch reads
// the table the first attempt read, or fails with an error that names the
// table and the version; it never joins other data.
//
// The package implements contract.StaticTable without importing the
// engine, and reads through the files sink's log reader and the files
// source's readers: it parses nothing itself.
package statictable
