package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
)

// memSource replays records held in memory, so that the engine reads
// already-built columns as the references do. An offset is {"records":i};
// a batch covers at most perTrigger records. It follows the engine's source
// contract and holds one reference to each record until release.
type memSource struct {
	schema     *arrow.Schema
	recs       []arrow.RecordBatch
	perTrigger int
}

func newMemSource(recs []arrow.RecordBatch, perTrigger int) *memSource {
	return &memSource{schema: recs[0].Schema(), recs: recs, perTrigger: max(perTrigger, 1)}
}

func (m *memSource) Schema() *arrow.Schema { return m.schema }
func (m *memSource) Description() string   { return fmt.Sprintf("memory[%d records]", len(m.recs)) }

func (m *memSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return memOffset(0), nil
}

func memOffset(i int) json.RawMessage {
	return json.RawMessage(`{"records":` + strconv.Itoa(i) + `}`)
}

func parseMemOffset(off json.RawMessage) (int, error) {
	var o struct {
		Records *int `json:"records"`
	}
	if err := json.Unmarshal(off, &o); err != nil || o.Records == nil || *o.Records < 0 {
		return 0, fmt.Errorf("memory source: bad offset %q", off)
	}
	return *o.Records, nil
}

func (m *memSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	i, err := parseMemOffset(start)
	if err != nil {
		return nil, err
	}
	end := min(i+m.perTrigger, len(m.recs))
	if end <= i {
		return start, nil
	}
	return memOffset(end), nil
}

func (m *memSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, err := parseMemOffset(start)
	if err != nil {
		return err
	}
	b, err := parseMemOffset(end)
	if err != nil {
		return err
	}
	if b < a || b > len(m.recs) {
		return fmt.Errorf("memory source: range [%d, %d) outside [0, %d]", a, b, len(m.recs))
	}
	for _, rec := range m.recs[a:b] {
		rec.Retain() // the engine releases what it is handed
		if err := emit(rec); err != nil {
			return err
		}
	}
	return nil
}

func (m *memSource) release() {
	for _, r := range m.recs {
		r.Release()
	}
	m.recs = nil
}

// recordBytes is the Arrow buffer size of recs.
func recordBytes(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		for _, c := range r.Columns() {
			for _, b := range c.Data().Buffers() {
				if b != nil {
					n += int64(b.Len())
				}
			}
		}
	}
	return n
}
