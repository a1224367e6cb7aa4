// Package consolesink prints each batch to a writer as a small table, for
// demos and debugging. Printing is not idempotent (a re-run prints the batch
// again, marked as a repeat), so it reports the at-least-once guarantee and
// a query must allow that explicitly (engine.WithAtLeastOnce).
package consolesink

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/contract"
)

var (
	_ contract.Sink              = (*Sink)(nil)
	_ contract.GuaranteeReporter = (*Sink)(nil)
	_ contract.Describer         = (*Sink)(nil)
)

// Sink prints batches.
type Sink struct {
	w       io.Writer
	maxRows int
	mu      sync.Mutex
	last    int64
}

// New returns a sink printing at most maxRows rows of each batch to w.
func New(w io.Writer, maxRows int) *Sink { return &Sink{w: w, maxRows: maxRows, last: -1} }

// Description implements contract.Describer.
func (s *Sink) Description() string { return "console" }

// Guarantee implements contract.GuaranteeReporter: at-least-once.
func (s *Sink) Guarantee() contract.Guarantee { return contract.AtLeastOnce }

// AddBatch implements contract.Sink.
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	var total int64
	for _, r := range records {
		total += r.NumRows()
	}
	repeat := ""
	if batchID <= s.last {
		repeat = " (repeat)"
	}
	s.last = max(s.last, batchID)
	fmt.Fprintf(&b, "-------- batch %d: %d rows%s --------\n", batchID, total, repeat)
	names := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		names[i] = f.Name
	}
	b.WriteString(strings.Join(names, " | "))
	b.WriteByte('\n')
	shown := 0
	for _, r := range records {
		for i := 0; i < int(r.NumRows()) && shown < s.maxRows; i++ {
			vals := make([]string, r.NumCols())
			for c := range vals {
				vals[c] = r.Column(c).ValueStr(i)
			}
			b.WriteString(strings.Join(vals, " | "))
			b.WriteByte('\n')
			shown++
		}
	}
	if int64(shown) < total {
		fmt.Fprintf(&b, "… %d more rows\n", total-int64(shown))
	}
	_, err := io.WriteString(s.w, b.String())
	return err
}
