package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var paySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

var base = time.Date(2026, 11, 30, 10, 0, 0, 123000000, time.UTC)

// payments builds one record of n rows whose ids are prefix-0, prefix-1...
func payments(t *testing.T, mem memory.Allocator, prefix string, n int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, paySchema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d", prefix, i))
		b.Field(1).(*array.Int64Builder).Append(int64(1250 + i))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(i) * time.Second).UnixMicro()))
		if i%2 == 0 {
			b.Field(3).(*array.StringBuilder).Append("x")
		} else {
			b.Field(3).AppendNull()
		}
	}
	return b.NewRecordBatch()
}

func testenvKafka(t *testing.T) *kafkadev.Cluster {
	return testenv.Kafka(t, map[string]int32{"out": 2})
}

func newSink(t *testing.T, c *kafkadev.Cluster, opts ...Option) *Sink {
	t.Helper()
	s, err := New(append([]Option{WithBrokers(c.Addrs()...), WithTopic("out"), WithKeyColumn("id")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func start(t *testing.T, s *Sink, query string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Start(ctx, query); err != nil {
		t.Fatal(err)
	}
}

func add(s *Sink, id int64, recs ...arrow.RecordBatch) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return s.AddBatch(ctx, id, paySchema, recs)
}

// visible returns the committed output: key → count.
func visible(t *testing.T, c *kafkadev.Cluster) (map[string]int, []string) {
	t.Helper()
	counts := map[string]int{}
	var values []string
	for _, r := range testenv.KafkaReadCommitted(t, c, "out", 0) {
		counts[string(r.Key)]++
		values = append(values, string(r.Value))
	}
	return counts, values
}

func wantOnce(t *testing.T, counts map[string]int, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if counts[k] != 1 {
			t.Errorf("key %q visible %d times, want once", k, counts[k])
		}
	}
	if len(counts) != len(keys) {
		t.Errorf("%d keys visible, want %d: %v", len(counts), len(keys), counts)
	}
}

func TestExactlyOnceAcrossRepeatsAndRestart(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testenv.Kafka(t, map[string]int32{"out": 3})
	b0, b1, b2 := payments(t, mem, "b0", 3), payments(t, mem, "b1", 2), payments(t, mem, "b2", 1)
	defer b0.Release()
	defer b1.Release()
	defer b2.Release()

	s := newSink(t, c)
	start(t, s, "q1")
	if got := s.TransactionalID(); got != "onceflow-q1-out" {
		t.Fatalf("transactional id %q", got)
	}
	if s.Guarantee() != contract.ExactlyOnce {
		t.Fatalf("guarantee %q", s.Guarantee())
	}
	for _, step := range []struct {
		id  int64
		rec arrow.RecordBatch
	}{{0, b0}, {0, b0}, {1, b1}} {
		if err := add(s, step.id, step.rec); err != nil {
			t.Fatal(err)
		}
	}
	if s.Skipped() != 1 {
		t.Fatalf("skipped %d, want 1", s.Skipped())
	}
	// A restarted instance learns the last committed batch from the marker.
	s2 := newSink(t, c, WithTimestampColumn("at"))
	start(t, s2, "q1")
	if s2.LastCommitted() != 1 {
		t.Fatalf("last committed %d, want 1", s2.LastCommitted())
	}
	if err := add(s2, 1, b1); err != nil {
		t.Fatal(err)
	}
	if err := add(s2, 2, b2); err != nil {
		t.Fatal(err)
	}
	if s2.Skipped() != 1 {
		t.Fatalf("restarted sink skipped %d, want 1", s2.Skipped())
	}
	counts, values := visible(t, c)
	wantOnce(t, counts, "b0-0", "b0-1", "b0-2", "b1-0", "b1-1", "b2-0")
	found := false
	for _, v := range values {
		if v == `{"id":"b0-0","amount_cents":1250,"at":"2026-11-30T10:00:00.123000Z","note":"x"}` {
			found = true
		}
	}
	if !found {
		t.Fatalf("no record encodes b0-0 as expected; values %q", values)
	}
	for _, r := range testenv.KafkaReadCommitted(t, c, "out", 0) {
		if string(r.Key) == "b2-0" && !r.Timestamp.Equal(base) {
			t.Errorf("b2-0 timestamp %v, want %v from WithTimestampColumn", r.Timestamp, base)
		}
	}
	// A different query never shares the transactional id or its marker.
	s3 := newSink(t, c)
	start(t, s3, "q2")
	if s3.LastCommitted() != -1 || s3.TransactionalID() == s.TransactionalID() {
		t.Fatalf("q2 sees last committed %d, id %q", s3.LastCommitted(), s3.TransactionalID())
	}
	// The progress topic is compacted.
	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	rcs, err := adm.DescribeTopicConfigs(context.Background(), DefaultProgressTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(DefaultProgressTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := ""
	for _, cfg := range rc.Configs {
		if cfg.Key == "cleanup.policy" && cfg.Value != nil {
			policy = *cfg.Value
		}
	}
	if policy != "compact" {
		t.Fatalf("progress topic cleanup.policy %q", policy)
	}
}

func TestZombieIsFenced(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testenv.Kafka(t, map[string]int32{"out": 2})
	zb, nb := payments(t, mem, "zombie", 2), payments(t, mem, "new", 2)
	defer zb.Release()
	defer nb.Release()

	old := newSink(t, c)
	start(t, old, "q")
	var fresh *Sink
	// The old instance has produced into an open transaction when a new
	// instance with the same transactional id starts.
	old.beforeCommit = func() {
		fresh = newSink(t, c)
		start(t, fresh, "q")
	}
	// The old instance's commit fails: kfake answers INVALID_TXN_STATE
	// (the new instance's InitProducerID aborted the transaction), Kafka
	// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH.
	if err := add(old, 0, zb); err == nil {
		t.Fatal("zombie commit succeeded")
	}
	if err := add(fresh, 0, nb); err != nil {
		t.Fatal(err)
	}
	counts, _ := visible(t, c)
	wantOnce(t, counts, "new-0", "new-1")

	// Fenced before producing anything: the first produce fails, and the
	// error is kept (the instance writes nothing more until Start).
	late := newSink(t, c)
	start(t, late, "q")
	err := add(fresh, 1, nb)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced before produce: err = %v", err)
	}
	if err := add(fresh, 1, nb); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced sink writes again: err = %v", err)
	}
	counts, _ = visible(t, c)
	wantOnce(t, counts, "new-0", "new-1")
}

func TestSharedTransactionalIDRefused(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testenv.Kafka(t, map[string]int32{"out": 1})
	b0 := payments(t, mem, "b0", 1)
	defer b0.Release()
	a := newSink(t, c, WithTransactionalID("shared"))
	start(t, a, "qa")
	if err := add(a, 0, b0); err != nil {
		t.Fatal(err)
	}
	b := newSink(t, c, WithTransactionalID("shared"))
	err := b.Start(context.Background(), "qb")
	if err == nil || !strings.Contains(err.Error(), `marker of query "qa", not "qb"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestTransactionTimeoutAboveBrokerMax(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"out": 1}, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "30000"}))
	s := newSink(t, c, WithTransactionTimeout(time.Minute))
	err := s.Start(context.Background(), "q")
	if !errors.Is(err, ErrTimeoutTooLarge) || !strings.Contains(err.Error(), "60000") || !strings.Contains(err.Error(), "30000") {
		t.Fatalf("err = %v, want both numbers", err)
	}
	t.Log(err)
	ok := newSink(t, c, WithTransactionTimeout(30*time.Second))
	start(t, ok, "q")
}

// endTxnFails makes the next EndTxn answer with code, unprocessed.
func endTxnFails(c *kafkadev.Cluster, code int16, hits *atomic.Int32) {
	c.Fake().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hits.Add(1)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp, nil, true
	})
}

// produceFails makes the next produce request fail with code on every
// partition it names.
func produceFails(c *kafkadev.Cluster, code int16, hits *atomic.Int32) {
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hits.Add(1)
		return testenv.KafkaFailResponse(req, code), nil, true
	})
}

func TestInjectedBrokerErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*kafkadev.Cluster, *atomic.Int32)
	}{
		{"end txn invalid state", func(c *kafkadev.Cluster, h *atomic.Int32) { endTxnFails(c, kerr.InvalidTxnState.Code, h) }},
		{"end txn unknown server error", func(c *kafkadev.Cluster, h *atomic.Int32) { endTxnFails(c, kerr.UnknownServerError.Code, h) }},
		{"produce invalid record", func(c *kafkadev.Cluster, h *atomic.Int32) { produceFails(c, kerr.InvalidRecord.Code, h) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			c := testenv.Kafka(t, map[string]int32{"out": 2})
			b0, b1 := payments(t, mem, "b0", 3), payments(t, mem, "b1", 2)
			defer b0.Release()
			defer b1.Release()
			s := newSink(t, c)
			start(t, s, "q")
			var hits atomic.Int32
			tc.inject(c, &hits)
			if err := add(s, 0, b0); err == nil {
				t.Fatal("AddBatch succeeded despite the injected error")
			}
			if hits.Load() != 1 {
				t.Fatalf("injection hit %d times", hits.Load())
			}
			if err := add(s, 0, b0); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if err := add(s, 1, b1); err != nil {
				t.Fatal(err)
			}
			counts, _ := visible(t, c)
			wantOnce(t, counts, "b0-0", "b0-1", "b0-2", "b1-0", "b1-1")
		})
	}
}

func TestAtLeastOnce(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testenv.Kafka(t, map[string]int32{"out": 1})
	b0 := payments(t, mem, "b0", 2)
	defer b0.Release()
	s := newSink(t, c, WithAtLeastOnce())
	start(t, s, "q")
	if s.Guarantee() != contract.AtLeastOnce {
		t.Fatalf("guarantee %q", s.Guarantee())
	}
	for range 2 {
		if err := add(s, 0, b0); err != nil {
			t.Fatal(err)
		}
	}
	counts, _ := visible(t, c)
	if counts["b0-0"] != 2 {
		t.Fatalf("at-least-once repeat: %v", counts)
	}
}

func TestValidateSchema(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"ok", nil, ""},
		{"missing key", []Option{WithKeyColumn("nope")}, `key column "nope" not in the output`},
		{"raw value of int", []Option{WithValueColumn("amount_cents")}, `value column "amount_cents" has type int64`},
		{"chosen columns", []Option{WithValueJSON("id", "at")}, ""},
		{"unsupported", []Option{WithValueJSON("id", "missing")}, `value column "missing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(append([]Option{WithBrokers("127.0.0.1:1"), WithTopic("out"), WithKeyColumn("id")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.ValidateSchema(paySchema)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(WithBrokers("x:1")); !errors.Is(err, ErrConfig) {
		t.Fatalf("no topic: %v", err)
	}
}

// TestTimedOutTransactionIsReRun: the broker aborts a transaction that
// outlives the timeout; the commit fails, and the re-run writes the batch
// once.
func TestTimedOutTransactionIsReRun(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testenv.Kafka(t, map[string]int32{"out": 1})
	b0 := payments(t, mem, "b0", 2)
	defer b0.Release()
	s := newSink(t, c, WithTransactionTimeout(time.Second))
	start(t, s, "q")
	s.beforeCommit = func() { time.Sleep(2500 * time.Millisecond) }
	err := add(s, 0, b0)
	if err == nil {
		t.Fatal("a transaction older than its timeout committed")
	}
	s.beforeCommit = nil
	t.Logf("commit after timeout: %v", err)
	if err := s.Start(context.Background(), "q"); err != nil { // the engine's restart
		t.Fatal(err)
	}
	if err := add(s, 0, b0); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	counts, _ := visible(t, c)
	wantOnce(t, counts, "b0-0", "b0-1")
}
