package rate

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/source/internal/options"
)

// DefaultStartTime returns the event time of offset 0 when WithStartTime is
// not given: 2026-01-01T00:00:00Z, a fixed instant, so that every run and
// every replay of the same offsets produces the same timestamps.
func DefaultStartTime() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

type config struct {
	options.Common
	rowsPerSecond int64
	partitions    int32
	keys          int64
	start         time.Time
	maxPerTrigger int64 // 0: no cap
	unbounded     bool
}

func defaults() config {
	return config{
		Common:        options.Defaults(),
		rowsPerSecond: 1000,
		partitions:    1,
		keys:          100,
		start:         DefaultStartTime(),
	}
}

func (c *config) validate() error {
	var errs []error
	if c.rowsPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("%w: rows per second %d is not positive", ErrBadOption, c.rowsPerSecond))
	}
	if c.partitions <= 0 {
		errs = append(errs, fmt.Errorf("%w: partitions %d is not positive", ErrBadOption, c.partitions))
	}
	if c.keys <= 0 {
		errs = append(errs, fmt.Errorf("%w: keys %d is not positive", ErrBadOption, c.keys))
	}
	errs = append(errs, options.MaxPerTrigger(c.maxPerTrigger, "rows", ErrBadOption))
	errs = append(errs, c.Validate(ErrBadOption)...)
	return errors.Join(errs...)
}

// Option configures a Source.
type Option func(*config)

// WithRowsPerSecond sets how many rows become available per second of the
// clock, and the event-time spacing of rows (1/n seconds). Default 1000.
func WithRowsPerSecond(n int64) Option { return func(c *config) { c.rowsPerSecond = n } }

// WithPartitions sets the number of values of the partition column
// (partition = value % n). Default 1.
func WithPartitions(n int32) Option { return func(c *config) { c.partitions = n } }

// WithKeys sets the number of distinct keys of the key column
// (key = "k-" + value % n). Default 100.
func WithKeys(n int64) Option { return func(c *config) { c.keys = n } }

// WithStartTime sets the event time of offset 0. Default
// DefaultStartTime(), a fixed instant, so replays produce the same rows.
// Only its microseconds count.
func WithStartTime(t time.Time) Option { return func(c *config) { c.start = t } }

// WithMaxRowsPerTrigger caps how far one LatestOffset reaches beyond its
// start. Default 0: no cap (everything the clock allows).
func WithMaxRowsPerTrigger(n int64) Option { return func(c *config) { c.maxPerTrigger = n } }

// WithUnbounded makes LatestOffset ignore the clock and advance by the max
// rows per trigger each call (the rows per second when no cap is set): for
// benchmarks that want batches as fast as the engine can take them.
func WithUnbounded() Option { return func(c *config) { c.unbounded = true } }

// WithClock sets the clock that decides how far LatestOffset reaches. It
// never decides what a row contains. Default time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) { c.Clock = now } }

// WithBatchSize sets the most rows in one emitted record. Default 65536.
func WithBatchSize(n int) Option { return func(c *config) { c.BatchSize = n } }

// WithAllocator sets the Arrow allocator of emitted records. Default
// memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.Mem = mem } }
