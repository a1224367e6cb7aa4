package nexmark

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/source/internal/options"
)

// DefaultBaseTime returns the event time of event 0 when WithBaseTime is not
// given: 2026-01-01T00:00:00Z, a fixed instant, so every run and every
// replay of the same offsets produces the same events.
func DefaultBaseTime() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// DefaultEventsPerSecond is Nexmark's default event rate (firstEventRate):
// an inter-event delay of 100µs of event time.
const DefaultEventsPerSecond = 10_000

type config struct {
	options.Common
	eventsPerSecond int64
	base            time.Time
	total           int64 // -1: unbounded
	maxPerTrigger   int64 // 0: no cap
	bidsOnly        bool
}

func defaults() config {
	return config{
		Common:          options.Defaults(),
		eventsPerSecond: DefaultEventsPerSecond,
		base:            DefaultBaseTime(),
		total:           -1,
	}
}

func (c *config) validate() error {
	var errs []error
	if c.eventsPerSecond <= 0 || c.eventsPerSecond > int64(time.Second) {
		errs = append(errs, fmt.Errorf("%w: events per second %d is not in 1..1e9", ErrBadOption, c.eventsPerSecond))
	}
	if c.total < -1 {
		errs = append(errs, fmt.Errorf("%w: total events %d is negative", ErrBadOption, c.total))
	}
	errs = append(errs, options.MaxPerTrigger(c.maxPerTrigger, "events", ErrBadOption))
	errs = append(errs, c.Validate(ErrBadOption)...)
	return errors.Join(errs...)
}

// Option configures a Source.
type Option func(*config)

// WithEventsPerSecond sets the event rate: the event-time spacing of events
// (an inter-event delay of 1/n seconds, Nexmark's firstEventRate) and, for
// an unbounded source, how fast events become available by the clock.
// Default DefaultEventsPerSecond.
func WithEventsPerSecond(n int64) Option { return func(c *config) { c.eventsPerSecond = n } }

// WithBaseTime sets the event time of event 0. Default DefaultBaseTime().
// Only its milliseconds count.
func WithBaseTime(t time.Time) Option { return func(c *config) { c.base = t } }

// WithTotalEvents bounds the source to events 0..n-1, all available at
// once: LatestOffset never goes beyond {"events":n} and ignores the clock,
// so an AvailableNow query over it terminates. Default: unbounded, events
// arriving by the clock at the events-per-second rate.
func WithTotalEvents(n int64) Option { return func(c *config) { c.total = n } }

// WithMaxEventsPerTrigger caps how many event numbers one batch covers.
// Default 0: no cap.
func WithMaxEventsPerTrigger(n int64) Option { return func(c *config) { c.maxPerTrigger = n } }

// WithBatchSize sets the most event numbers one emitted record covers (in
// bids-only mode a record holds about 46/50 of that). Default 65536.
func WithBatchSize(n int) Option { return func(c *config) { c.BatchSize = n } }

// WithBidsOnly emits only bids, with the BidSchema. Event numbering, and so
// offsets and every bid's fields, are those of the full stream.
func WithBidsOnly() Option { return func(c *config) { c.bidsOnly = true } }

// WithClock sets the clock that decides how far an unbounded source's
// LatestOffset reaches. It never decides what an event contains. Default
// time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) { c.Clock = now } }

// WithAllocator sets the Arrow allocator of emitted records. Default
// memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.Mem = mem } }
