package kafkasink_test

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
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
)

// BenchmarkPipeline moves records from a Kafka topic through the source
// (JSON values into Arrow) into the sink, batch by batch as the engine
// would, once with transactions and once at-least-once, on one kfake
// cluster:
//
//	go test -run '^$' -bench Pipeline -benchtime 3x ./kafkasink/
func BenchmarkPipeline(b *testing.B) {
	const (
		records    = 100_000
		partitions = 4
		perBatch   = 20_000
	)
	c := testenv.Kafka(b, map[string]int32{"in": partitions, "out": partitions})
	cl := testenv.KafkaClient(b, c, kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for i := 0; i < records; {
		var recs []*kgo.Record
		for j := 0; j < 5000 && i < records; j, i = j+1, i+1 {
			v := fmt.Sprintf(`{"id":"p-%d","amount_cents":%d,"at":"%s"}`, i, 100+i%9000, base.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano))
			recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("k", i%1000)), Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us},
	}, nil)
	for _, mode := range []struct {
		name string
		opts []kafkasink.Option
	}{
		{"transactional", nil},
		{"at-least-once", []kafkasink.Option{kafkasink.WithAtLeastOnce()}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			mem := memory.NewGoAllocator()
			src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("in"), kafka.WithValueJSON(schema),
				kafka.WithMaxOffsetsPerTrigger(perBatch), kafka.WithAllocator(mem))
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			total := 0
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				sink, err := kafkasink.New(append([]kafkasink.Option{kafkasink.WithBrokers(c.Addrs()...), kafkasink.WithTopic("out"),
					kafkasink.WithKeyColumn(kafka.ColKey), kafkasink.WithValueJSON("id", "amount_cents", "at")}, mode.opts...)...)
				if err != nil {
					b.Fatal(err)
				}
				if err := sink.Start(ctx, fmt.Sprintf("bench-%s-%d", mode.name, n)); err != nil {
					b.Fatal(err)
				}
				start, err := src.InitialOffset(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for batch := int64(0); ; batch++ {
					end, err := src.LatestOffset(ctx, start)
					if err != nil {
						b.Fatal(err)
					}
					if string(end) == string(start) {
						break
					}
					var recs []arrow.RecordBatch
					err = src.Read(ctx, start, end, func(r arrow.RecordBatch) error {
						r.Retain()
						recs = append(recs, r)
						total += int(r.NumRows())
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					if err := sink.AddBatch(ctx, batch, src.Schema(), recs); err != nil {
						b.Fatal(err)
					}
					for _, r := range recs {
						r.Release()
					}
					start = json.RawMessage(end)
				}
				_ = sink.Close()
			}
			if total != records*b.N {
				b.Fatalf("moved %d records, want %d", total, records*b.N)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
