// Package memsink is an in-memory sink for tests and demos. It keeps each
// batch's rows under its batch id: a repeated AddBatch(N) replaces nothing
// and is counted, so a test can check that the engine handed every batch
// over and that repeats were harmless.
//
// It holds copies of the rows as Go values (one []any per row), which is
// slow and meant only for small data. Safe for concurrent use.
package memsink

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/contract"
)

var (
	_ contract.Sink      = (*Sink)(nil)
	_ contract.Describer = (*Sink)(nil)
)

// Sink is an in-memory sink, idempotent in the batch id.
type Sink struct {
	name string
	mu   struct {
		sync.Mutex
		batches map[int64][][]any
		repeats map[int64]int
		schema  *arrow.Schema
	}
}

// New returns an empty sink named name (for progress).
func New(name string) *Sink {
	s := &Sink{name: name}
	s.mu.batches = map[int64][][]any{}
	s.mu.repeats = map[int64]int{}
	return s
}

// Description implements contract.Describer.
func (s *Sink) Description() string { return "memory[" + s.name + "]" }

// AddBatch implements contract.Sink.
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.batches[batchID]; ok {
		s.mu.repeats[batchID]++
		return nil
	}
	rows, err := Rows(records)
	if err != nil {
		return fmt.Errorf("memsink: batch %d: %w", batchID, err)
	}
	s.mu.batches[batchID] = rows
	s.mu.schema = schema
	return nil
}

// BatchIDs returns the batch ids received, ascending.
func (s *Sink) BatchIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.mu.batches))
	for id := range s.mu.batches {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Batch returns batch id's rows.
func (s *Sink) Batch(id int64) [][]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.batches[id]
}

// All returns every row of every batch in batch order.
func (s *Sink) All() [][]any {
	var out [][]any
	for _, id := range s.BatchIDs() {
		out = append(out, s.Batch(id)...)
	}
	return out
}

// Repeats returns how many repeated AddBatch calls each batch id got.
func (s *Sink) Repeats() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]int, len(s.mu.repeats))
	for k, v := range s.mu.repeats {
		out[k] = v
	}
	return out
}

// Schema returns the schema of the last batch received.
func (s *Sink) Schema() *arrow.Schema {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.schema
}

// Rows converts records to rows of Go values (nil for null): int64,
// float64, string, bool, []byte, time.Time (timestamps, UTC), or the
// value's String() for other types.
func Rows(records []arrow.RecordBatch) ([][]any, error) {
	var out [][]any
	for _, rec := range records {
		n := int(rec.NumRows())
		for i := 0; i < n; i++ {
			row := make([]any, rec.NumCols())
			for c := range row {
				row[c] = Value(rec.Column(c), i)
			}
			out = append(out, row)
		}
	}
	return out, nil
}
