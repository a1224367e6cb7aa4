package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/storage"
)

// countSink counts the rows it is given and keeps nothing.
type countSink struct{ rows int64 }

func (s *countSink) AddBatch(_ context.Context, _ int64, _ *arrow.Schema, recs []arrow.RecordBatch) error {
	for _, r := range recs {
		s.rows += r.NumRows()
	}
	return nil
}

// sumOnlyProc is the processor counterpart of GroupBy.Agg(Sum): a running
// sum per key, emitted every batch the key has rows (update mode's rows).
type sumOnlyProc struct{ sum *ValueState[int64] }

type keySum struct {
	Key string `onceflow:"key"`
	Sum int64  `onceflow:"sum"`
}

func (p *sumOnlyProc) Init(s *ProcessorSpec) error {
	s.Output(keySum{})
	p.sum = NewValueState[int64](s, "sum")
	return nil
}

func (p *sumOnlyProc) Handle(k *KeyContext, rows *Rows) error {
	var in []struct{ Amount int64 }
	if err := rows.Decode(&in); err != nil {
		return err
	}
	s, _ := p.sum.Get(k)
	for _, r := range in {
		s += r.Amount
	}
	p.sum.Set(k, s)
	k.Emit(keySum{Key: k.Key().Values()[0].(string), Sum: s})
	return nil
}

func (p *sumOnlyProc) OnTimer(*KeyContext, Timer) error { return nil }

// BenchmarkRunningSum compares, on the same data in the same run, a
// processor keeping a running sum per key with GroupBy.Agg(Sum): 10
// batches of rowsPerBatch rows over keys keys, 4 state partitions, a
// local checkpoint. The ns/key-batch metric is the time per (key, batch)
// pair, the unit the processor interface is called in.
//
//	go test -run '^$' -bench BenchmarkRunningSum -benchtime 3x ./engine/
func BenchmarkRunningSum(b *testing.B) {
	const batches, rowsPerBatch = 10, 20000
	for _, keys := range []int64{100, 10000} {
		for _, impl := range []string{"agg", "process"} {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, impl), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					src := newSeq(batches*rowsPerBatch, rowsPerBatch, keys)
					g := ReadStream(src).GroupBy("key")
					var s *Stream
					if impl == "agg" {
						s = g.Agg(batch.Sum(batch.Col("amount")).As("sum"))
					} else {
						s = g.Process(&sumOnlyProc{})
					}
					sink := &countSink{}
					q, err := NewQuery(s, WithCheckpoint(localStoreB(b)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(4))
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					b.StartTimer()
					err = q.Run(ctx)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					if sink.rows != batches*min(keys, rowsPerBatch) {
						b.Fatalf("%d rows out, want %d", sink.rows, batches*min(keys, rowsPerBatch))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batches*int(keys)), "ns/key-batch")
				b.ReportMetric(float64(b.N*batches*rowsPerBatch)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

func localStoreB(b *testing.B) storage.Store {
	s, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
