// Package e2e_test runs the Kafka source under the engine, on kfake.
package e2e_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runResult is what one AvailableNow run of the query left.
type runResult struct {
	values   []string
	progress []engine.Progress
	err      error
}

// run runs kafka "pay" → memory sink with the AvailableNow trigger on the
// checkpoint in dir.
func run(t *testing.T, c *kafkadev.Cluster, dir string, opts ...kafka.Option) runResult {
	t.Helper()
	src, err := kafka.New(append([]kafka.Option{kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("pay"),
		kafka.WithValueString(), kafka.WithAllocator(memory.NewGoAllocator())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	store, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sink := memsink.New("out")
	var mu sync.Mutex
	var res runResult
	q, err := engine.NewQuery(engine.ReadStream(src),
		engine.WithName("kafka-recreated"), engine.WithCheckpoint(store), engine.WithSink(sink),
		engine.WithTrigger(engine.AvailableNow()),
		engine.WithProgressListener(func(p engine.Progress) {
			mu.Lock()
			res.progress = append(res.progress, p)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res.err = q.Run(ctx)
	col := src.Schema().FieldIndices(kafka.ColValue)[0]
	for _, r := range sink.All() {
		res.values = append(res.values, r[col].(string))
	}
	mu.Lock()
	defer mu.Unlock()
	return res
}

func produce(t *testing.T, c *kafkadev.Cluster, prefix string, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "pay", Value: []byte(fmt.Sprint(prefix, i))})
	}
	testenv.KafkaProduce(t, c, recs...)
}

// topicID asks with a new client each time: kadm answers from the client's
// metadata cache.
func topicID(t *testing.T, c *kafkadev.Cluster, topic string) string {
	t.Helper()
	md, err := kadm.NewClient(testenv.KafkaClient(t, c)).Metadata(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics[topic].ID
	return hex.EncodeToString(id[:])
}

func seq(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint(prefix, i))
	}
	return out
}

// TestRecreatedTopicUnderTheEngine: a query has read topic "pay"; the
// topic is deleted and created again with more records than the query had
// read. The next run stops with a DataLossError naming both topic ids;
// a run with WithFailOnDataLoss(false) reads every record of the new topic
// and reports the recreated topic in its progress.
//
// Regression: offsets/N held no topic id, so the run went on at the old
// offset in the new topic and skipped its first records without a word;
// now the id is recorded and compared.
func TestRecreatedTopicUnderTheEngine(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"pay": 1})
	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	dir := t.TempDir()
	produce(t, c, "old", 3)
	if r := run(t, c, dir); r.err != nil || !reflect.DeepEqual(r.values, seq("old", 3)) {
		t.Fatalf("first run: %v, err %v", r.values, r.err)
	}
	oldID := topicID(t, c, "pay")
	ctx := context.Background()
	if _, err := adm.DeleteTopic(ctx, "pay"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "pay"); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "new", 5)
	newID := topicID(t, c, "pay")

	r := run(t, c, dir)
	if !errors.Is(r.err, kafka.ErrDataLoss) || !strings.Contains(r.err.Error(), oldID) || !strings.Contains(r.err.Error(), newID) {
		t.Fatalf("run after the topic was recreated: rows %v, err %v; want a DataLossError naming %s and %s", r.values, r.err, oldID, newID)
	}
	if len(r.values) != 0 {
		t.Fatalf("the failed run delivered %v", r.values)
	}

	r = run(t, c, dir, kafka.WithFailOnDataLoss(false))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !reflect.DeepEqual(r.values, seq("new", 5)) {
		t.Fatalf("WithFailOnDataLoss(false) read %v, want every record of the new topic %v", r.values, seq("new", 5))
	}
	var counted bool
	for _, p := range r.progress {
		if len(p.Sources) == 1 && p.Sources[0].Metrics["topicsRecreated"] == int64(1) {
			counted = true
		}
	}
	if !counted {
		t.Fatalf("no progress record reports topicsRecreated 1: %+v", r.progress)
	}
}
