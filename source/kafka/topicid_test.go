package kafka_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// offs returns the offsets of a position in the version-1 form
// ({"t":{"0":42}}), for comparing positions without their topic ids.
func offs(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	p, err := kafka.ParsePosition(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Offsets.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// froms returns the "from" entries of a position, in the same form.
func froms(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	p, err := kafka.ParsePosition(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.From.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// topicID returns the topic's current id in hex, as the source names it.
func topicID(t *testing.T, c *kafkadev.Cluster, topic string) string {
	t.Helper()
	md, err := kadm.NewClient(testenv.KafkaClient(t, c)).Metadata(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		t.Fatalf("topic %s: %v", topic, td.Err)
	}
	return hex.EncodeToString(td.ID[:])
}

// recreate deletes topic and creates it again with partitions partitions.
func recreate(t *testing.T, c *kafkadev.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx := context.Background()
	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	if resp, err := adm.DeleteTopic(ctx, topic); err != nil || resp.Err != nil {
		t.Fatalf("delete %s: %v %v", topic, err, resp.Err)
	}
	if resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

// trim deletes the records of topic/partition below offset.
func trim(t *testing.T, c *kafkadev.Cluster, topic string, partition int32, offset int64) {
	t.Helper()
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: partition, At: offset})
	resp, err := kadm.NewClient(testenv.KafkaClient(t, c)).DeleteRecords(context.Background(), del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records of %s/%d below %d: %v", topic, partition, offset, err)
	}
}

func seq(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// drain plans and reads batches from start until nothing is new, as the
// engine does, and returns the rows and the last position.
func drain(t *testing.T, src *kafka.Source, start json.RawMessage) ([]row, json.RawMessage, error) {
	t.Helper()
	var rows []row
	for range 10 {
		end, err := src.LatestOffset(context.Background(), start)
		if err != nil {
			return rows, start, err
		}
		if string(end) == string(start) {
			return rows, start, nil
		}
		got, err := readRows(t, src, start, end)
		rows = append(rows, got...)
		if err != nil {
			return rows, start, err
		}
		start = end
	}
	t.Fatal("no end after 10 batches")
	return nil, nil, nil
}

// TestRecreatedTopicIsDataLoss: a topic deleted and created again under
// the same name, with more records than the recorded offset, is data loss
// named by both topic ids; WithFailOnDataLoss(false) reads the new topic
// from its start and counts it.
//
// Regression: offsets carried no topic id, so planning went on at the
// recorded offset in the new topic and its first records were skipped
// silently, even with WithFailOnDataLoss(true); now offsets/N records each
// topic's id and a different one is caught.
func TestRecreatedTopicIsDataLoss(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*kafkadev.Cluster, json.RawMessage, string) {
		c := testenv.Kafka(t, map[string]int32{"pay": 1})
		for _, v := range seq(3, "old") {
			produce(t, c, rec("pay", 0, "", v))
		}
		src := newSource(t, c, memory.DefaultAllocator, kafka.WithTopics("pay"))
		rows, end, err := drain(t, src, must(t)(src.InitialOffset(ctx)))
		if err != nil || !reflect.DeepEqual(values(rows), seq(3, "old")) {
			t.Fatalf("first run: %v, err %v", values(rows), err)
		}
		oldID := topicID(t, c, "pay")
		recreate(t, c, "pay", 1)
		for _, v := range seq(5, "new") {
			produce(t, c, rec("pay", 0, "", v))
		}
		return c, end, oldID
	}

	t.Run("fail", func(t *testing.T) {
		c, end, oldID := setup(t)
		newID := topicID(t, c, "pay")
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c, mem, kafka.WithTopics("pay"))
		got, err := src.LatestOffset(ctx, end)
		var dl *kafka.DataLossError
		if !errors.As(err, &dl) || !errors.Is(err, kafka.ErrDataLoss) {
			t.Fatalf("LatestOffset after the topic was recreated = %s, err %v; want a DataLossError", got, err)
		}
		for _, want := range []string{`topic "pay"`, oldID, newID, "WithFailOnDataLoss(false)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
		if dl.RecordedTopicID != oldID || dl.TopicID != newID {
			t.Errorf("DataLossError ids %q, %q; want %q, %q", dl.RecordedTopicID, dl.TopicID, oldID, newID)
		}
	})
	t.Run("restart from earliest", func(t *testing.T) {
		c, end, oldID := setup(t)
		newID := topicID(t, c, "pay")
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		var log syncBuffer
		src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithFailOnDataLoss(false),
			kafka.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		rows, _, err := drain(t, src, end)
		if err != nil {
			t.Fatal(err)
		}
		if got := values(rows); !reflect.DeepEqual(got, seq(5, "new")) {
			t.Fatalf("read %v from the recreated topic, want all of %v", got, seq(5, "new"))
		}
		if st := src.Stats(); st.TopicsRecreated != 1 {
			t.Fatalf("Stats().TopicsRecreated = %d, want 1", st.TopicsRecreated)
		}
		if got := src.Metrics()["topicsRecreated"]; got != int64(1) {
			t.Fatalf(`Metrics()["topicsRecreated"] = %v, want 1`, got)
		}
		for _, want := range []string{"level=WARN", "topic deleted and created again", "recordedTopicId=" + oldID, "topicId=" + newID} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("log %q lacks %q", log.String(), want)
			}
		}
	})
	t.Run("recreated between plan and read", func(t *testing.T) {
		c := testenv.Kafka(t, map[string]int32{"pay": 1})
		for _, v := range seq(3, "old") {
			produce(t, c, rec("pay", 0, "", v))
		}
		oldID := topicID(t, c, "pay")
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c, mem, kafka.WithTopics("pay"))
		start := must(t)(src.InitialOffset(ctx))
		end := must(t)(src.LatestOffset(ctx, start))
		recreate(t, c, "pay", 1)
		for _, v := range seq(5, "new") {
			produce(t, c, rec("pay", 0, "", v))
		}
		newID := topicID(t, c, "pay")
		rows, err := readRows(t, src, start, end)
		if !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), oldID) || !strings.Contains(err.Error(), newID) {
			t.Fatalf("Read of a range planned in the old topic = %v, err %v; want data loss naming %s and %s", values(rows), err, oldID, newID)
		}
		skip := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithFailOnDataLoss(false))
		rows, err = readRows(t, skip, start, end)
		if err != nil || len(rows) != 0 {
			t.Fatalf("WithFailOnDataLoss(false): rows %v, err %v; want the old topic's range skipped", values(rows), err)
		}
		if st := skip.Stats(); st.DataLossGaps != 1 || st.SkippedOffsets != 3 {
			t.Fatalf("stats %+v, want one gap of 3 offsets", st)
		}
	})
}

// TestPositionWithoutTopicIDs: a position of the first offsets format (no
// topic ids, as checkpoints written before version 2 hold) is accepted as
// the start of a batch; the end records the id from then on.
func TestPositionWithoutTopicIDs(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"pay": 2})
	produce(t, c, rec("pay", 0, "", "a"), rec("pay", 0, "", "b"), rec("pay", 1, "", "c"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("pay"))
	start := json.RawMessage(`{"pay":{"0":1,"1":0}}`)
	end := must(t)(src.LatestOffset(ctx, start))
	p, err := kafka.ParsePosition(end)
	if err != nil {
		t.Fatal(err)
	}
	if id := topicID(t, c, "pay"); p.TopicIDs["pay"] != id {
		t.Fatalf("end %s records topic id %q, want %q", end, p.TopicIDs["pay"], id)
	}
	rows, err := readRows(t, src, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(rows); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Fatalf("values %v", got)
	}
	// Nothing new since a version-1 position: the answer is that position
	// itself, so an upgrade alone does not make a batch.
	if again := must(t)(src.LatestOffset(ctx, json.RawMessage(`{"pay":{"0":2,"1":1}}`))); string(again) != `{"pay":{"0":2,"1":1}}` {
		t.Fatalf("LatestOffset of an up-to-date version-1 position = %s", again)
	}
}

// TestNewPartitionsStartAtLogStart: a partition found at planning (a new
// topic matching the pattern, or partition growth) whose records below
// some offset are already gone starts at its log start offset, recorded
// in the plan, so the batch and its re-runs read the same range.
//
// Regression: new partitions were read from offset 0, so a new partition
// already trimmed by retention failed every run of the batch with a
// DataLossError (the query was stuck); now the plan starts it at its log
// start offset.
func TestNewPartitionsStartAtLogStart(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"ev-a": 1})
	produce(t, c, rec("ev-a", 0, "", "a0"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopicPattern(`^ev-`))
	_, end, err := drain(t, src, must(t)(src.InitialOffset(ctx)))
	if err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	if _, err := adm.CreatePartitions(ctx, 1, "ev-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ev-b"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, rec("ev-a", 1, "", fmt.Sprint("a1-", i)), rec("ev-b", 0, "", fmt.Sprint("b-", i)))
	}
	produce(t, c, recs...)
	trim(t, c, "ev-a", 1, 3)
	trim(t, c, "ev-b", 0, 2)

	next := must(t)(src.LatestOffset(ctx, end))
	if got := froms(t, next); got != `{"ev-a":{"1":3},"ev-b":{"0":2}}` {
		t.Fatalf("plan %s starts the new partitions at %s, want their log start offsets", next, got)
	}
	want := []string{"a1-3", "a1-4", "b-2", "b-3", "b-4"}
	for attempt := range 2 { // a re-run reads the same range
		rows, err := readRows(t, src, end, next)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if got := values(rows); !reflect.DeepEqual(got, want) {
			t.Fatalf("attempt %d: values %v, want %v", attempt, got, want)
		}
	}
	if st := src.Stats(); st.DataLossGaps != 0 {
		t.Fatalf("stats %+v: records trimmed before the partition was planned are no gap", st)
	}
	// The start is planned, not looked up again: records trimmed after
	// planning are lost data for a re-run.
	trim(t, c, "ev-b", 0, 4)
	if _, err := readRows(t, src, end, next); !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), "expected offset 2, available from offset 4") {
		t.Fatalf("re-run after a further trim: err = %v, want data loss from the planned start 2", err)
	}
}
