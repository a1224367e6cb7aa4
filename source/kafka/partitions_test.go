package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// TestWithPartitionsPlansAndReadsOnlyThose pins what a scale-out task
// relies on: a source restricted to some partitions plans only them (its
// initial and latest offsets name no other partition), reads only their
// records, names them in its identity, and refuses a partition a topic
// lacks.
func TestWithPartitionsPlansAndReadsOnlyThose(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"pay": 4, "refunds": 4})
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs,
			&kgo.Record{Topic: "pay", Partition: int32(i % 4), Value: []byte("p")},
			&kgo.Record{Topic: "refunds", Partition: int32(i % 4), Value: []byte("r")})
	}
	ctx := context.Background()
	cl := testenv.KafkaClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)

	src := newSource(t, c, mem, kafka.WithTopics("pay", "refunds"), kafka.WithPartitions(2, 1))
	if got, want := src.Description(), "kafka[pay,refunds;partitions=1,2]"; got != want {
		t.Errorf("Description() = %q, want %q", got, want)
	}
	start, err := src.InitialOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := src.LatestOffset(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := kafka.ParsePosition(end)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"pay", "refunds"} {
		if got := len(pos.Offsets[topic]); got != 2 {
			t.Errorf("planned end of %s names %d partitions, want 2 (1 and 2): %s", topic, got, end)
		}
		for _, p := range []int32{1, 2} {
			if got := pos.Offsets[topic][p]; got != 10 {
				t.Errorf("planned end of %s/%d = %d, want 10", topic, p, got)
			}
		}
	}
	rows, err := readRows(t, src, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 40 {
		t.Errorf("read %d rows, want 40 (2 topics × 2 partitions × 10)", len(rows))
	}
	for _, r := range rows {
		if r.Partition != 1 && r.Partition != 2 {
			t.Fatalf("read a row of partition %d: %+v", r.Partition, r)
		}
	}

	// A partition the topic lacks fails the first planning, naming both.
	bad := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithPartitions(7))
	if _, err := bad.InitialOffset(ctx); err == nil || !strings.Contains(err.Error(), `topic "pay" has no partition 7`) {
		t.Errorf("InitialOffset with a missing partition: err = %v, want one naming topic pay and partition 7", err)
	}
	for name, opt := range map[string]kafka.Option{"none": kafka.WithPartitions(), "negative": kafka.WithPartitions(-1)} {
		_, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("pay"), opt)
		if !errors.Is(err, kafka.ErrConfig) {
			t.Errorf("%s: New err = %v, want ErrConfig", name, err)
		}
	}
}
