// Package options holds what the options of the sources under source/ have
// in common: the batch size, the clock and the Arrow allocator, with one
// set of defaults and one validation, and the check of a per-trigger cap.
// Each source keeps its own Option type and With… functions (their docs
// name these defaults); its config embeds Common.
package options

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultBatchSize is the most rows (or event numbers) in one emitted
// record unless a source's WithBatchSize says otherwise.
const DefaultBatchSize = 64 * 1024

// Common is the part of a source's configuration every source has.
type Common struct {
	BatchSize int              // most rows in one emitted record
	Clock     func() time.Time // what the source's planning measures time by
	Mem       memory.Allocator // allocator of emitted records
}

// Defaults returns DefaultBatchSize, time.Now and memory.DefaultAllocator.
func Defaults() Common {
	return Common{BatchSize: DefaultBatchSize, Clock: time.Now, Mem: memory.DefaultAllocator}
}

// Validate returns one error per bad field, each wrapping bad (the source's
// ErrBadOption).
func (c Common) Validate(bad error) []error {
	var errs []error
	if c.BatchSize <= 0 {
		errs = append(errs, fmt.Errorf("%w: batch size %d is not positive", bad, c.BatchSize))
	}
	if c.Clock == nil {
		errs = append(errs, fmt.Errorf("%w: nil clock", bad))
	}
	if c.Mem == nil {
		errs = append(errs, fmt.Errorf("%w: nil allocator", bad))
	}
	return errs
}

// MaxPerTrigger returns the error of a negative cap on how far one trigger
// reaches (what names its unit: "rows", "events"), or nil; 0 means no cap.
func MaxPerTrigger(n int64, what string, bad error) error {
	if n < 0 {
		return fmt.Errorf("%w: max %s per trigger %d is negative", bad, what, n)
	}
	return nil
}
