package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/kafka"
)

// idsSink keeps every id it is handed, by batch, and stops q after batch
// stopAt.
type idsSink struct {
	*memsink.Sink
	stopAt int64
	q      atomic.Pointer[Query]
}

func (s *idsSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	if err := s.Sink.AddBatch(ctx, id, sc, recs); err != nil {
		return err
	}
	if id == s.stopAt {
		s.q.Load().Stop()
	}
	return nil
}

// TestReviewKafkaEveryZeroPrefetch: a Kafka source under Every(0), small
// ranges (so every planned range is prefetched, while the previous commit
// or the WAL entry is written), records produced while the query runs;
// Stop, then a restart under AvailableNow: every record exactly once.
func TestReviewKafkaEveryZeroPrefetch(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"pay": 2})
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "pay", Partition: int32(i % 2), Value: []byte(fmt.Sprintf(`{"id":"p%03d","amount_cents":%d}`, i, i))})
		}
		testenv.KafkaProduce(t, c, recs...)
	}
	produce(0, 30)
	newSrc := func() *kafka.Source {
		src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("pay"), kafka.WithValueJSON(kafkaPaySchema), kafka.WithMaxOffsetsPerTrigger(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close() })
		return src
	}
	cp := localStore(t)
	sink := &idsSink{Sink: memsink.New("out"), stopAt: 25}
	q, err := NewQuery(ReadStream(newSrc()), WithCheckpoint(cp), WithSink(sink), WithTrigger(Every(0)))
	if err != nil {
		t.Fatal(err)
	}
	sink.q.Store(q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 30; k < 90; k += 6 {
			produce(k, k+6)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := runQuery(t, ReadStream(newSrc()), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	col := sink.Schema().FieldIndices("id")
	if len(col) != 1 {
		t.Fatalf("no id column in %s", sink.Schema())
	}
	seen := map[string]int{}
	for _, r := range sink.All() {
		id, _ := r[col[0]].(string)
		seen[id]++
	}
	for i := 0; i < 90; i++ {
		if id := fmt.Sprintf("p%03d", i); seen[id] != 1 {
			t.Errorf("%s delivered %d times", id, seen[id])
		}
	}
	if len(seen) != 90 {
		t.Errorf("%d distinct ids, want 90", len(seen))
	}
	ids := sink.BatchIDs()
	for i, id := range ids {
		if int64(i) != id {
			t.Fatalf("batch ids not contiguous: %v", ids)
		}
	}
}
