package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/kafka"
)

var kafkaPaySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// kafkaPaySource reads topic "pay", two offsets per batch, bad values to
// the dead-letter topic dlq.
func kafkaPaySource(t *testing.T, c *kafkadev.Cluster, dlq string) *kafka.Source {
	t.Helper()
	src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("pay"), kafka.WithValueJSON(kafkaPaySchema),
		kafka.WithDeadLetterTopic(dlq), kafka.WithMaxOffsetsPerTrigger(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

func topicKeys(t *testing.T, c *kafkadev.Cluster, topic string) []string {
	t.Helper()
	var keys []string
	for _, r := range testenv.KafkaReadCommitted(t, c, topic, 2*time.Second) {
		keys = append(keys, string(r.Key))
	}
	sort.Strings(keys)
	return keys
}

// Regression: ForkCheckpoint copied the Kafka source's
// sources/<i>/deadletter.json, so the fork ran under the original's
// dead-letter transactional id: starting the fork fenced the original's
// dead-letter producer (and the original's restart fences the fork's), and
// with the same dead-letter topic the two wrote their progress markers
// under one key. Now the fork does not copy the file; its source makes an
// id of its own, and the fork's dead-letter topic gets the dead letters of
// the batches it replays, like its other outputs.
func TestForkGetsItsOwnKafkaDeadLetterID(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"pay": 1, "pay-dlq": 1, "fork-dlq": 1})
	testenv.KafkaProduce(t, c,
		&kgo.Record{Topic: "pay", Value: []byte(`{"id":"a","amount_cents":1}`)},
		&kgo.Record{Topic: "pay", Value: []byte(`nope`)}, // pay/0/1
		&kgo.Record{Topic: "pay", Value: []byte(`{"id":"c","amount_cents":3}`)},
		&kgo.Record{Topic: "pay", Value: []byte(`not json`)}, // pay/0/3
	)
	ctx := context.Background()
	cp := localStore(t)
	orig := kafkaPaySource(t, c, "pay-dlq")
	if _, err := runQuery(t, ReadStream(orig), WithCheckpoint(cp), WithSink(memsink.New("orig")), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(topicKeys(t, c, "pay-dlq")); got != "[pay/0/1 pay/0/3]" {
		t.Fatalf("original dead letters %s", got)
	}

	dst := localStore(t)
	stats, err := ForkCheckpoint(ctx, cp, dst, 1)
	if err != nil { // replays batch 1: offsets 2 and 3
		t.Fatal(err)
	}
	if _, err := dst.Get(ctx, "sources/0/"+kafka.DeadLetterIDFile); err == nil {
		t.Errorf("the fork copied sources/0/%s", kafka.DeadLetterIDFile)
	}
	if fmt.Sprint(stats.LeftOut) != "[sources/0/"+kafka.DeadLetterIDFile+"]" {
		t.Errorf("ForkStats.LeftOut %v", stats.LeftOut)
	}
	fork := kafkaPaySource(t, c, "fork-dlq")
	out := memsink.New("fork")
	if _, err := runQuery(t, ReadStream(fork), WithCheckpoint(dst), WithSink(out), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if a, b := orig.DeadLetterTransactionalID(), fork.DeadLetterTransactionalID(); a == b {
		t.Errorf("the fork runs under the original's dead-letter transactional id %s", a)
	}
	if got := fmt.Sprint(out.BatchIDs()); got != "[1]" {
		t.Fatalf("fork batches %s, want [1]", got)
	}
	if got := fmt.Sprint(topicKeys(t, c, "fork-dlq")); got != "[pay/0/3]" {
		t.Fatalf("fork dead letters %s, want the replayed batch's [pay/0/3]", got)
	}
	// The original, still live, sends its next dead letter: not fenced
	// by the fork.
	testenv.KafkaProduce(t, c, &kgo.Record{Topic: "pay", Value: []byte(`{{`)}) // pay/0/4
	err = orig.Read(ctx, json.RawMessage(`{"pay":{"0":4}}`), json.RawMessage(`{"pay":{"0":5}}`), func(arrow.RecordBatch) error { return nil })
	if err != nil {
		t.Fatalf("the original's next dead letter after the fork started: %v", err)
	}
	if got := fmt.Sprint(topicKeys(t, c, "pay-dlq")); got != "[pay/0/1 pay/0/3 pay/0/4]" {
		t.Fatalf("original dead letters %s", got)
	}
}
