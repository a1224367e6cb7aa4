package testenv

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkadev"
)

// Kafka starts an embedded kfake cluster (one broker on a free loopback
// port) with the given topics (name → partitions), closed when the test
// ends. extra are further kfake options (BrokerConfigs, ...).
func Kafka(t testing.TB, topics map[string]int32, extra ...kfake.Opt) *kafkadev.Cluster {
	t.Helper()
	c, err := kafkadev.Start(context.Background(), kafkadev.Options{Topics: topics, Extra: extra})
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// KafkaClient returns a franz-go client on c, closed when the test ends.
func KafkaClient(t testing.TB, c *kafkadev.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// KafkaProduce produces recs synchronously, outside any transaction.
func KafkaProduce(t testing.TB, c *kafkadev.Cluster, recs ...*kgo.Record) {
	t.Helper()
	cl := KafkaClient(t, c)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// KafkaProduceTxn produces recs in one transaction of txnID and commits it
// (commit) or aborts it.
func KafkaProduceTxn(t testing.TB, c *kafkadev.Cluster, txnID string, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx := context.Background()
	cl := KafkaClient(t, c, kgo.TransactionalID(txnID))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin transaction: %v", err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce in transaction: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
	cl.Close()
}

// KafkaReadCommitted reads every committed record of topic with a
// read_committed consumer, returning them in partition, offset order. It
// stops after a poll that brings nothing for quiet (default 300ms).
func KafkaReadCommitted(t testing.TB, c *kafkadev.Cluster, topic string, quiet time.Duration) []*kgo.Record {
	t.Helper()
	if quiet <= 0 {
		quiet = 300 * time.Millisecond
	}
	cl := KafkaClient(t, c,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("consume %s: %v", topic, fe.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r); n++ })
		if n == 0 {
			break
		}
	}
	cl.Close()
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}
