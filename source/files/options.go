package files

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/source/internal/options"
)

// Format is the encoding of the landing files.
type Format int

// The formats a files source reads.
const (
	JSON    Format = iota + 1 // JSON lines: one object per line
	CSV                       // RFC 4180 CSV, with or without a header row
	Parquet                   // Apache Parquet, flat schema
)

func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case CSV:
		return "csv"
	case Parquet:
		return "parquet"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

func (f Format) defaultGlob() string {
	switch f {
	case JSON:
		return "*.json"
	case CSV:
		return "*.csv"
	case Parquet:
		return "*.parquet"
	}
	return ""
}

// Cleanup is what happens to the files of a batch once the batch has
// committed: Archive(dir) or Delete().
type Cleanup struct {
	archive string
	remove  bool
}

// Archive moves each file of a committed batch into dir (created if
// needed), keeping its name: a rename on the same file system, otherwise a
// copy (fsynced) followed by a removal.
func Archive(dir string) Cleanup { return Cleanup{archive: dir} }

// Delete removes each file of a committed batch.
func Delete() Cleanup { return Cleanup{remove: true} }

type config struct {
	options.Common
	glob         string
	maxFiles     int
	minAge       time.Duration
	maxAge       time.Duration
	compactEvery int
	cleanup      Cleanup
	deadLetter   string
	layout       string
	csvHeader    bool
	csvDelimiter rune
}

func defaults(f Format) config {
	return config{
		Common:       options.Defaults(),
		glob:         f.defaultGlob(),
		layout:       time.RFC3339Nano,
		csvHeader:    true,
		csvDelimiter: ',',
		compactEvery: DefaultLogCompactInterval,
	}
}

func (c *config) validate() error {
	var errs []error
	if _, err := filepath.Match(c.glob, "x"); err != nil || c.glob == "" {
		errs = append(errs, fmt.Errorf("%w: glob %q is not a valid pattern", ErrBadOption, c.glob))
	}
	if c.maxFiles < 0 {
		errs = append(errs, fmt.Errorf("%w: max files per trigger %d is negative", ErrBadOption, c.maxFiles))
	}
	if c.minAge < 0 {
		errs = append(errs, fmt.Errorf("%w: min file age %v is negative", ErrBadOption, c.minAge))
	}
	if c.maxAge < 0 {
		errs = append(errs, fmt.Errorf("%w: max file age %v is negative", ErrBadOption, c.maxAge))
	}
	if c.compactEvery < 1 {
		errs = append(errs, fmt.Errorf("%w: log compact interval %d is not positive", ErrBadOption, c.compactEvery))
	}
	if c.cleanup.archive == "" && c.cleanup != (Cleanup{}) && !c.cleanup.remove {
		errs = append(errs, fmt.Errorf("%w: bad cleanup", ErrBadOption))
	}
	if c.layout == "" {
		errs = append(errs, fmt.Errorf("%w: empty timestamp layout", ErrBadOption))
	}
	if c.csvDelimiter == '"' || c.csvDelimiter == '\r' || c.csvDelimiter == '\n' || c.csvDelimiter == 0 {
		errs = append(errs, fmt.Errorf("%w: CSV delimiter %q", ErrBadOption, c.csvDelimiter))
	}
	errs = append(errs, c.Validate(ErrBadOption)...)
	return errors.Join(errs...)
}

// Option configures a Source.
type Option func(*config)

// WithGlob sets the pattern (filepath.Match syntax, matched against the
// base name) a landing file must match. Default by format: "*.json",
// "*.csv", "*.parquet". Names beginning with "." or "_" and names ending in
// ".tmp" never match.
func WithGlob(pattern string) Option { return func(c *config) { c.glob = pattern } }

// WithMaxFilesPerTrigger caps the files one batch takes. Default 0: no cap,
// a batch takes every new file (as Spark's maxFilesPerTrigger default).
func WithMaxFilesPerTrigger(n int) Option { return func(c *config) { c.maxFiles = n } }

// WithMinFileAge makes LatestOffset skip files modified less than d ago
// (by the WithClock clock), for writers that cannot rename. Default 0.
func WithMinFileAge(d time.Duration) Option { return func(c *config) { c.minAge = d } }

// DefaultLogCompactInterval is how many files log entries lie between two
// compactions unless WithLogCompactInterval says otherwise.
const DefaultLogCompactInterval = 10

// WithLogCompactInterval makes Commit compact the files log every n
// entries: entry k with (k+1) a multiple of n, once committed, is folded
// with everything before it into compact/<k>, and the plain entries it
// covers are deleted, so the checkpoint folder holds O(n) objects and
// OpenCheckpoint reads at most one compact entry and the plain entries
// after it. Default DefaultLogCompactInterval (10); n must be at least 1.
// The interval may change between runs.
func WithLogCompactInterval(n int) Option { return func(c *config) { c.compactEvery = n } }

// WithMaxFileAge bounds the memory of taken names, as Spark's maxFileAge:
// with N the newest modification time of any file taken so far, a file
// modified before N-d is never taken (listing ignores it), and a
// compaction forgets every committed entry whose files are all older than
// N-d (N over the entries it compacts). A forgotten name is no longer
// remembered, so a file that reappears under it with a recent modification
// time is taken as new, and a Read of a forgotten entry fails with
// ErrBadOffset. Raising or removing the age in a later run brings no
// forgotten file back: a file modified at or before the newest forgotten
// one is never taken. Files the age rule skips are skipped silently, as in
// Spark: use it only when files land in modification-time order within d
// of each other, and beware that one file with a modification time far in
// the future moves N and makes every later file ineligible. Default 0:
// every name is remembered for as long as the checkpoint lives and a name
// once taken is never taken again.
func WithMaxFileAge(d time.Duration) Option { return func(c *config) { c.maxAge = d } }

// WithCleanup archives or deletes the files of each batch after it commits
// (see Commit). Default: files stay where they are.
func WithCleanup(cl Cleanup) Option { return func(c *config) { c.cleanup = cl } }

// WithDeadLetter sends bad lines to JSON-lines files in dir instead of
// failing the batch. Default: a bad line fails the batch with *InputError.
func WithDeadLetter(dir string) Option { return func(c *config) { c.deadLetter = dir } }

// WithTimestampLayout sets the time.Parse layout of timestamp values given
// as strings. Default time.RFC3339Nano (which also accepts no fraction);
// values without a zone are UTC.
func WithTimestampLayout(layout string) Option { return func(c *config) { c.layout = layout } }

// WithCSVHeader says whether the first row of each CSV file names the
// columns (default true). Without a header, fields map to the declared
// columns by position.
func WithCSVHeader(on bool) Option { return func(c *config) { c.csvHeader = on } }

// WithCSVDelimiter sets the CSV field delimiter. Default ','.
func WithCSVDelimiter(r rune) Option { return func(c *config) { c.csvDelimiter = r } }

// WithBatchSize sets the most rows in one emitted record. Default 65536.
func WithBatchSize(n int) Option { return func(c *config) { c.BatchSize = n } }

// WithClock sets the clock WithMinFileAge measures against. It decides only
// which files a new batch takes (and that choice is logged), never what a
// row contains. Default time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) { c.Clock = now } }

// WithAllocator sets the Arrow allocator of emitted records. Default
// memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.Mem = mem } }
