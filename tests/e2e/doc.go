// Package e2e holds the end-to-end crash tests of the landing-directory
// examples: examples/lake (JSON-lines payments into a day-partitioned
// Parquet lake, on local disk and on S3) and examples/pgtotals (the same
// payments into per-merchant totals in PostgreSQL under the offsets-in-sink
// guard). Each test builds the example with go build (with -race when the
// test binary has it), runs it as a real process, kills it with SIGKILL at
// every named fault point and at random moments while more files land,
// restarts it until it exits 0, and then checks the sink against the input
// computed independently of the code under test.
//
// S3 tests need ONCEFLOW_TEST_S3_ENDPOINT (scripts/s3-server.sh) and
// PostgreSQL tests ONCEFLOW_TEST_PG_URL (scripts/pg-setup.sh); without them
// they skip. -e2e.long runs more kills per fault point and more random kills.
package e2e
