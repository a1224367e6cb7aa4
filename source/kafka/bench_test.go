package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// BenchmarkRead reads 100,000 records of 4 partitions from kfake into Arrow:
//
//	go test -run '^$' -bench Read -benchtime 3x ./source/kafka/
func BenchmarkRead(b *testing.B) {
	const records = 100_000
	c := testenv.Kafka(b, map[string]int32{"in": 4})
	cl := testenv.KafkaClient(b, c, kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	for i := 0; i < records; {
		var recs []*kgo.Record
		for j := 0; j < 5000 && i < records; j, i = j+1, i+1 {
			recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("k", i%1000)),
				Value: []byte(fmt.Sprintf(`{"id":"p-%d","amount_cents":%d,"at":"2026-11-30T10:00:00.%06dZ"}`, i, i, i%1000000))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []struct {
		name string
		opt  kafka.Option
	}{
		{"raw", kafka.WithValueRaw()},
		{"json", kafka.WithValueJSON(paymentSchema)},
	} {
		b.Run(mode.name, func(b *testing.B) {
			src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("in"), mode.opt, kafka.WithAllocator(memory.NewGoAllocator()))
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			start, err := src.InitialOffset(ctx)
			if err != nil {
				b.Fatal(err)
			}
			end, err := src.LatestOffset(ctx, start)
			if err != nil {
				b.Fatal(err)
			}
			total := 0
			b.ResetTimer()
			for range b.N {
				if err := src.Read(ctx, start, end, func(r arrow.RecordBatch) error {
					total += int(r.NumRows())
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			if total != records*b.N {
				b.Fatalf("read %d, want %d", total, records*b.N)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkDeadLetterBatch measures one Read of a 1,000-record range of 4
// partitions with 10 bad values: the dead letters and their markers go out
// in one transaction per Read ("txn"), against the same range without bad
// values ("clean"). Each iteration reads a new range, so nothing is skipped:
//
//	go test -run '^$' -bench DeadLetterBatch -benchtime 50x ./source/kafka/
func BenchmarkDeadLetterBatch(b *testing.B) {
	const perBatch, badPerBatch = 1000, 10
	for _, bad := range []int{0, badPerBatch} {
		name := "clean"
		if bad > 0 {
			name = "txn"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			c := testenv.Kafka(b, map[string]int32{"in": 4, "in-dlq": 4})
			cl := testenv.KafkaClient(b, c, manual, kgo.ProducerLinger(5*time.Millisecond))
			for i := 0; i < b.N*perBatch; {
				var recs []*kgo.Record
				for j := 0; j < 5000 && i < b.N*perBatch; j, i = j+1, i+1 {
					v := fmt.Sprintf(`{"id":"p-%d","amount_cents":%d,"at":"2026-11-30T10:00:00Z"}`, i, i)
					if i%perBatch < bad {
						v = "not json"
					}
					recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 4), Value: []byte(v)})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("in"), kafka.WithValueJSON(paymentSchema),
				kafka.WithDeadLetterTopic("in-dlq"), kafka.WithDeadLetterTransactionalID("bench"), kafka.WithAllocator(memory.NewGoAllocator()))
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			ranges := make([]json.RawMessage, b.N+1)
			for k := range ranges {
				ranges[k] = json.RawMessage(fmt.Sprintf(`{"in":{"0":%[1]d,"1":%[1]d,"2":%[1]d,"3":%[1]d}}`, k*perBatch/4))
			}
			b.ResetTimer()
			for k := range b.N {
				if err := src.Read(ctx, ranges[k], ranges[k+1], func(arrow.RecordBatch) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if st := src.Stats(); st.DeadLetters != int64(bad*b.N) {
				b.Fatalf("dead letters %d, want %d", st.DeadLetters, bad*b.N)
			}
		})
	}
}
