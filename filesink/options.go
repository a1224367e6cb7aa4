package filesink

import (
	"fmt"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Compression names the codec of the Parquet pages; it also picks the file
// name extension (.zstd.parquet, .snappy.parquet, .parquet).
type Compression string

// The codecs the sink writes.
const (
	Zstd         Compression = "zstd"
	Snappy       Compression = "snappy"
	Uncompressed Compression = "none"
)

func (c Compression) extension() string {
	if c == Uncompressed {
		return ".parquet"
	}
	return "." + string(c) + ".parquet"
}

func (c Compression) codec() compress.Codec {
	switch c {
	case Snappy:
		return &snappy.Codec{}
	case Uncompressed:
		return &uncompressed.Codec{}
	default:
		return &zstd.Codec{Level: zstd.SpeedDefault}
	}
}

// Defaults of the options.
const (
	DefaultCompression    = Zstd
	DefaultTargetFileSize = 128 << 20
	DefaultMaxOpenFiles   = 4
	DefaultCompactEvery   = 10
	// DefaultTombstoneRetention is how long a compacted log keeps the
	// "remove" record of a rewritten file, so Vacuum can tell how long ago
	// it stopped being visible. WithRetention, when set, shortens it.
	DefaultTombstoneRetention = 7 * 24 * time.Hour
)

// Option configures a Sink.
type Option func(*config)

type config struct {
	partitionBy    []string
	compression    Compression
	targetFileSize int64
	maxOpenFiles   int
	minFileSize    int64
	compactEvery   int64
	retention      time.Duration
	clock          func() time.Time
	chunkRows      int // rows converted per column call; unexported test knob
}

func defaultConfig() config {
	return config{
		compression:    DefaultCompression,
		targetFileSize: DefaultTargetFileSize,
		maxOpenFiles:   DefaultMaxOpenFiles,
		compactEvery:   DefaultCompactEvery,
		clock:          time.Now,
		chunkRows:      1024,
	}
}

func (c *config) validate() error {
	var errs []string
	switch c.compression {
	case Zstd, Snappy, Uncompressed:
	default:
		errs = append(errs, fmt.Sprintf("compression %q is not one of zstd, snappy, none", c.compression))
	}
	if c.targetFileSize <= 0 {
		errs = append(errs, fmt.Sprintf("target file size %d is not positive", c.targetFileSize))
	}
	if c.maxOpenFiles <= 0 {
		errs = append(errs, fmt.Sprintf("max open files %d is not positive", c.maxOpenFiles))
	}
	if c.minFileSize < 0 {
		errs = append(errs, fmt.Sprintf("min file size %d is negative", c.minFileSize))
	}
	if c.minFileSize > c.targetFileSize {
		errs = append(errs, fmt.Sprintf("min file size %d exceeds the target file size %d", c.minFileSize, c.targetFileSize))
	}
	if c.compactEvery <= 0 {
		errs = append(errs, fmt.Sprintf("compact every %d is not positive", c.compactEvery))
	}
	if c.retention < 0 {
		errs = append(errs, fmt.Sprintf("retention %s is negative", c.retention))
	}
	if c.clock == nil {
		errs = append(errs, "clock is nil")
	}
	seen := map[string]bool{}
	for _, p := range c.partitionBy {
		if p == "" {
			errs = append(errs, "partition column with an empty name")
		}
		if seen[p] {
			errs = append(errs, fmt.Sprintf("partition column %q given twice", p))
		}
		seen[p] = true
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrBadOption, strings.Join(errs, "; "))
}

// WithPartitionBy lays files out in Hive-style folders by the values of cols, in
// that order: day=2026-11-30/merchant=m1/part-….parquet. Partition columns
// are not stored inside the files (as in Hive and Spark); their values are in
// the folder names and, exactly, in the log. Values are escaped like Hive
// (%2F for '/', %3A for ':', …); a null, and an empty string, go to the
// folder __HIVE_DEFAULT_PARTITION__ (the log still tells them apart).
// Default: no partitioning, all files in the table root.
func WithPartitionBy(cols ...string) Option {
	return func(c *config) { c.partitionBy = append([]string(nil), cols...) }
}

// WithCompression sets the page codec. Default Zstd.
func WithCompression(codec Compression) Option {
	return func(c *config) { c.compression = codec }
}

// WithTargetFileSize rolls to a new file once a file's estimated size
// reaches bytes. The size is checked after every chunk of rows (1024, fewer
// for wide rows: a chunk that adds more than an eighth of the target halves
// the next ones). Default 128 MiB.
func WithTargetFileSize(bytes int64) Option {
	return func(c *config) { c.targetFileSize = bytes }
}

// WithMaxOpenFiles caps the Parquet writers open at once, which bounds the
// memory of a batch to about 2n × the target file size (a worker holds the
// file it writes and the previous one, kept back until it knows whether it
// is the partition's only, possibly small, file). The sink never needs
// one writer per partition: it first groups the batch's rows by partition
// (a counting sort of row indices, no copy of the data), then writes the
// partitions one after the other on n workers, each with a single open
// writer. Default 4.
func WithMaxOpenFiles(n int) Option {
	return func(c *config) { c.maxOpenFiles = n }
}

// WithMinFileSize makes small outputs merge instead of piling up. When a
// batch's new output for a partition is smaller than bytes, the sink
// rewrites that output together with the partition's committed files that
// are also smaller than bytes into one new file (up to the target size), and
// the batch's log entry lists "remove" for the old files and "add" for the
// new one, so a reader sees every row exactly once at every version. The
// removed files stay on storage until Vacuum deletes them.
//
// Trade-off: each batch then re-reads and re-writes up to bytes per
// partition (more latency and write amplification per batch), and in return
// each partition holds at most one file below bytes instead of one per
// batch. Default 0: off, one new file (or more, by target size) per
// partition per batch.
func WithMinFileSize(bytes int64) Option {
	return func(c *config) { c.minFileSize = bytes }
}

// WithCompactEvery compacts the log every n batches (after batches n-1,
// 2n-1, …) into one file holding every live entry, so a reader reads at most
// one compact file and n-1 deltas. Default 10.
func WithCompactEvery(n int64) Option {
	return func(c *config) { c.compactEvery = n }
}

// WithRetention drops, at each compaction, the entries of files added more
// than d before the compacting batch's commit time: from that compaction on
// those files are no longer part of the table (readers stop seeing them, and
// Vacuum may delete them). It keeps the compacted log from growing forever
// on an append-only stream. Default 0: keep every file.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.retention = d }
}

// WithClock sets where commit times come from (the time recorded in each
// log entry, which retention compares). Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.clock = now }
}
