package kafkasink_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/kafkasink"
)

// lastStable returns partition 0's last stable offset and high watermark.
func lastStable(t *testing.T, c *kafkadev.Cluster, topic string) (lso, hwm int64) {
	t.Helper()
	ctx := context.Background()
	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	l, _ := committed.Lookup(topic, 0)
	h, _ := ends.Lookup(topic, 0)
	return l.Offset, h.Offset
}

// TestFenceTransactionalID: a transaction left open under a transactional
// id nobody uses any more (a sink whose id changed, after a crash) holds a
// read_committed reader's last stable offset behind it; fencing the id
// aborts it, the reader sees the data committed after it, and the old
// producer can no longer commit.
func TestFenceTransactionalID(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"out": 1})
	abandoned := testenv.KafkaClient(t, c, kgo.TransactionalID("onceflow-q-old"), kgo.TransactionTimeout(5*time.Minute),
		kgo.DefaultProduceTopic("out"))
	if err := abandoned.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := abandoned.ProduceSync(ctx, &kgo.Record{Value: []byte("stalled")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.KafkaProduceTxn(t, c, "onceflow-q-new", true, &kgo.Record{Topic: "out", Value: []byte("later")})
	if lso, hwm := lastStable(t, c, "out"); lso != 0 || hwm < 3 {
		t.Fatalf("before the fence: last stable offset %d, high watermark %d; want the open transaction to hold the LSO at 0", lso, hwm)
	}

	if err := kafkasink.FenceTransactionalID(ctx, "onceflow-q-old", kafkasink.WithBrokers(c.Addrs()...)); err != nil {
		t.Fatal(err)
	}
	recs := testenv.KafkaReadCommitted(t, c, "out", 0)
	if len(recs) != 1 || string(recs[0].Value) != "later" {
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		t.Fatalf("read_committed after the fence: %q, want [later]", got)
	}
	if lso, hwm := lastStable(t, c, "out"); lso != hwm {
		t.Fatalf("after the fence: last stable offset %d, high watermark %d", lso, hwm)
	}
	// The abandoned producer is fenced: its commit fails and its record
	// stays invisible.
	if err := abandoned.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	if recs := testenv.KafkaReadCommitted(t, c, "out", 0); len(recs) != 1 {
		t.Fatalf("after the fenced commit: %d records visible, want 1", len(recs))
	}
}

func TestFenceTransactionalIDValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   string
		opts []kafkasink.Option
	}{
		{"no id", "", []kafkasink.Option{kafkasink.WithBrokers("127.0.0.1:1")}},
		{"no brokers", "x", nil},
		{"short timeout", "x", []kafkasink.Option{kafkasink.WithBrokers("127.0.0.1:1"), kafkasink.WithTransactionTimeout(time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kafkasink.FenceTransactionalID(context.Background(), tc.id, tc.opts...); !errors.Is(err, kafkasink.ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}
