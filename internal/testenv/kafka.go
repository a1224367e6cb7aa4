package testenv

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// stops after a poll that brings nothing for quiet (default 300ms) once
// every partition holding data below its last stable offset has returned
// a record, or, for partitions that return none (all of their data may be
// aborted), after unseenWait more: on a busy machine one partition's fetch
// can come well after another's, and a quiet gap alone would cut it off.
func KafkaReadCommitted(t testing.TB, c *kafkadev.Cluster, topic string, quiet time.Duration) []*kgo.Record {
	t.Helper()
	if quiet <= 0 {
		quiet = 300 * time.Millisecond
	}
	need := stablePartitions(t, c, topic)
	// The first record of a topic with data gets firstWait, so a slow
	// start is not read as an empty topic.
	wait := quiet
	if len(need) > 0 {
		wait = max(quiet, firstWait)
	}
	cl := KafkaClient(t, c,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	var out []*kgo.Record
	seen := map[int32]bool{}
	var unseenSince time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("consume %s: %v", topic, fe.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r); seen[r.Partition] = true; n++ })
		if n > 0 {
			wait = quiet
			continue
		}
		missing := false
		for p := range need {
			missing = missing || !seen[p]
		}
		if !missing || len(out) == 0 {
			break
		}
		if unseenSince.IsZero() {
			unseenSince = time.Now()
		} else if time.Since(unseenSince) > unseenWait {
			break
		}
		wait = quiet
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

// firstWait bounds how long KafkaReadCommitted waits for the first record
// of a topic that has data below its last stable offset; unseenWait, how
// much longer it waits for a partition with such data that has returned
// nothing yet (3 s once missed a partition whose committed records sat
// behind aborted ones, under the CI's two test lanes with -race:
// TestDeadLetterZombieFenced). Both are spent only when records are late.
const (
	firstWait  = 10 * time.Second
	unseenWait = 10 * time.Second
)

// stablePartitions returns the partitions of topic that have records
// below their last stable offset (they may still all be aborted ones).
func stablePartitions(t testing.TB, c *kafkadev.Cluster, topic string) map[int32]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(KafkaClient(t, c))
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list last stable offsets of %s: %v", topic, err)
	}
	out := map[int32]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			out[o.Partition] = true
		}
	})
	return out
}

// KafkaFailResponse answers a produce, end-transaction or fetch request
// with code in every place its response has one: the body of a kfake
// ControlKey function that injects a broker error.
func KafkaFailResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	case *kmsg.EndTxnRequest:
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.FetchRequest:
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	panic(fmt.Sprintf("no failure response for %T", req))
}
