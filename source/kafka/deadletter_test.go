package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

// dlqFixture is a cluster with a payments topic "pay" (2 partitions)
// holding bad values, its dead-letter topic "pay-dlq", and one checkpoint
// folder shared by the successive Source instances of one query.
type dlqFixture struct {
	c     *kafkadev.Cluster
	store storage.Store
	mem   *memory.CheckedAllocator
}

func newDLQFixture(t *testing.T, extra ...kfake.Opt) *dlqFixture {
	t.Helper()
	c := testenv.Kafka(t, map[string]int32{"pay": 2, "pay-dlq": 3}, extra...)
	produce(t, c,
		rec("pay", 0, "a", `{"id":"a","amount_cents":1,"at":"2026-11-30T10:00:00Z"}`),
		rec("pay", 0, "b", `{"id":"b","amount_cents":1.5,"at":"2026-11-30T10:00:00Z"}`), // 0/1 bad
		rec("pay", 0, "c", `{"id":"c","amount_cents":3,"at":"2026-11-30T10:00:00Z"}`),
		rec("pay", 0, "d", `nope`), // 0/3 bad
		rec("pay", 1, "e", `{"id":"e","amount_cents":5,"at":"2026-11-30T10:00:00Z"}`),
		rec("pay", 1, "", `{"id":"f"}`), // 1/1 bad: amount_cents missing; no key
	)
	store, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &dlqFixture{c: c, store: store, mem: memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

// open is one process's Source: New, then OpenCheckpoint on the query's
// checkpoint folder, as the engine does at start.
func (f *dlqFixture) open(t *testing.T, opts ...kafka.Option) *kafka.Source {
	t.Helper()
	src := newSource(t, f.c, f.mem, append([]kafka.Option{kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema),
		kafka.WithDeadLetterTopic("pay-dlq")}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := src.OpenCheckpoint(ctx, f.store); err != nil {
		t.Fatal(err)
	}
	return src
}

var (
	batch0 = [2]json.RawMessage{json.RawMessage(`{"pay":{"0":0,"1":0}}`), json.RawMessage(`{"pay":{"0":4,"1":2}}`)}
	good0  = []string{"a|1|2026-11-30T10:00:00Z|(null)", "c|3|2026-11-30T10:00:00Z|(null)", "e|5|2026-11-30T10:00:00Z|(null)"}
	dead0  = []string{"pay/0/1", "pay/0/3", "pay/1/1"}
)

// deadKeys returns the keys of the dead-letter topic's records, sorted,
// read with read_committed (or read_uncommitted).
func deadKeys(t *testing.T, c *kafkadev.Cluster, committed bool) []string {
	t.Helper()
	return deadKeysAtLeast(t, c, committed, 0)
}

// deadKeysAtLeast is deadKeys that, reading uncommitted, keeps polling
// for up to 10 s while it has fewer than atLeast records: one quiet poll
// of 300 ms ended the read too early under -race on a loaded machine
// (4 of 6 records seen, the other partition's fetch still to come).
func deadKeysAtLeast(t *testing.T, c *kafkadev.Cluster, committed bool, atLeast int) []string {
	t.Helper()
	var recs []*kgo.Record
	if committed {
		recs = testenv.KafkaReadCommitted(t, c, "pay-dlq", 0)
		if len(recs) == 0 { // the first poll may outlast the default quiet time on a busy machine
			recs = testenv.KafkaReadCommitted(t, c, "pay-dlq", 2*time.Second)
		}
	} else {
		cl := testenv.KafkaClient(t, c, kgo.ConsumeTopics("pay-dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		deadline := time.Now().Add(10 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			n := 0
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r); n++ })
			if n == 0 && (len(recs) >= atLeast || time.Now().After(deadline)) {
				break
			}
		}
	}
	keys := make([]string, 0, len(recs))
	for _, r := range recs {
		keys = append(keys, string(r.Key))
	}
	sort.Strings(keys)
	return keys
}

func wantKeys(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("dead-letter keys under read_committed %v, want each of %v once", got, want)
	}
}

// readBatch reads the range r; for batch0 it checks the rows.
func readBatch(t *testing.T, src *kafka.Source, r [2]json.RawMessage) {
	t.Helper()
	rows, err := readRows(t, src, r[0], r[1])
	if err != nil {
		t.Fatal(err)
	}
	if string(r[0]) == string(batch0[0]) && string(r[1]) == string(batch0[1]) && !reflect.DeepEqual(values(rows), good0) {
		t.Fatalf("rows %v, want %v", values(rows), good0)
	}
}

// TestDeadLetterReRunAfterCommit: the process dies after the dead
// letters' transaction committed and before the engine's commit; the new
// process (a fresh Source on the same checkpoint) runs the batch again
// from the offset log and produces no dead letter twice.
func TestDeadLetterReRunAfterCommit(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	first := f.open(t)
	readBatch(t, first, batch0)
	if st := first.Stats(); st.DeadLetters != 3 || st.DeadLettersSkipped != 0 {
		t.Fatalf("first run: stats %+v", st)
	}
	// The same Source re-running the batch (the engine's retry) skips too.
	readBatch(t, first, batch0)
	if st := first.Stats(); st.DeadLetters != 3 || st.DeadLettersSkipped != 3 {
		t.Fatalf("retry in process: stats %+v", st)
	}
	second := f.open(t)
	if second.DeadLetterTransactionalID() != first.DeadLetterTransactionalID() || !strings.HasPrefix(first.DeadLetterTransactionalID(), "onceflow-deadletter-") {
		t.Fatalf("transactional ids %q, %q: not stable across restarts", first.DeadLetterTransactionalID(), second.DeadLetterTransactionalID())
	}
	readBatch(t, second, batch0)
	if st := second.Stats(); st.DeadLetters != 0 || st.DeadLettersSkipped != 3 {
		t.Fatalf("re-run: stats %+v", st)
	}
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
	// Nothing was produced outside a committed transaction either.
	wantKeys(t, deadKeysAtLeast(t, f.c, false, len(dead0)), dead0...)

	// The next batch's dead letters go out once, with their record shape.
	r := rec("pay", 1, "g", `{"id":"g"}`)
	r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte("7")}}
	produce(t, f.c, r)
	readBatch(t, second, [2]json.RawMessage{batch0[1], json.RawMessage(`{"pay":{"0":4,"1":3}}`)})
	recs := testenv.KafkaReadCommitted(t, f.c, "pay-dlq", 0)
	var g *kgo.Record
	for _, r := range recs {
		if string(r.Key) == "pay/1/2" {
			g = r
		}
	}
	if len(recs) != 4 || g == nil || string(g.Value) != `{"id":"g"}` {
		t.Fatalf("dead letters after batch 1: %d records, pay/1/2 = %v", len(recs), g)
	}
	hdr := map[string]string{}
	var order []string
	for _, h := range g.Headers {
		hdr[h.Key] = string(h.Value)
		order = append(order, h.Key)
	}
	if want := []string{"trace", kafka.HeaderError, kafka.HeaderSource, kafka.HeaderOriginalKey}; !reflect.DeepEqual(order, want) ||
		hdr[kafka.HeaderSource] != "pay/1/2" || hdr[kafka.HeaderOriginalKey] != "g" || !strings.Contains(hdr[kafka.HeaderError], `field "amount_cents"`) {
		t.Fatalf("headers %v", g.Headers)
	}
}

// TestDeadLetterPartialRange: a committed marker inside a range (the
// earlier run covered a shorter range) skips only the dead letters below
// it.
func TestDeadLetterPartialRange(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	readBatch(t, f.open(t), [2]json.RawMessage{batch0[0], json.RawMessage(`{"pay":{"0":2,"1":0}}`)})
	src := f.open(t)
	readBatch(t, src, batch0)
	if st := src.Stats(); st.DeadLetters != 2 || st.DeadLettersSkipped != 1 {
		t.Fatalf("stats %+v", st)
	}
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}

// TestDeadLetterCrashBeforeCommit: the process dies inside the dead
// letters' transaction. Nothing of it is visible under read_committed; the
// new process aborts it when it starts and produces the dead letters once.
func TestDeadLetterCrashBeforeCommit(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	dying := f.open(t)
	kafka.SetBeforeDeadLetterCommit(dying, runtime.Goexit) // the process stops here: no abort, no commit
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = readRows(t, dying, batch0[0], batch0[1])
		t.Error("Read returned through the crash point")
	}()
	<-done
	if got := deadKeys(t, f.c, true); len(got) != 0 {
		t.Fatalf("open transaction visible under read_committed: %v", got)
	}
	if got := deadKeysAtLeast(t, f.c, false, len(dead0)); len(got) != len(dead0) {
		t.Fatalf("the crashed run produced %v", got) // the test must see the aborted copies to mean anything
	}
	readBatch(t, f.open(t), batch0)
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
	if got := deadKeysAtLeast(t, f.c, false, 2*len(dead0)); len(got) != 2*len(dead0) {
		t.Fatalf("read_uncommitted sees %v: expected the aborted copies and the committed ones", got)
	}
}

// TestDeadLetterZombieFenced: an old instance that produced into an open
// transaction when the new one started cannot commit, and is fenced for
// good once the new one has produced.
func TestDeadLetterZombieFenced(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	zombie := f.open(t)
	var fresh *kafka.Source
	kafka.SetBeforeDeadLetterCommit(zombie, func() { fresh = f.open(t) })
	_, err := readRows(t, zombie, batch0[0], batch0[1])
	if err == nil {
		t.Fatal("the zombie's dead-letter transaction committed")
	}
	t.Logf("zombie: %v", err)
	kafka.SetBeforeDeadLetterCommit(zombie, nil)
	readBatch(t, fresh, batch0)
	wantKeys(t, deadKeys(t, f.c, true), dead0...)

	// A later instance fences the current one before it produces: its
	// next transaction fails with ErrFenced, and it stays fenced.
	late := f.open(t)
	produce(t, f.c, rec("pay", 0, "h", `{"id":"h"}`))
	next := [2]json.RawMessage{batch0[1], json.RawMessage(`{"pay":{"0":5,"1":2}}`)}
	for range 2 {
		if _, err := readRows(t, fresh, next[0], next[1]); !errors.Is(err, kafka.ErrFenced) {
			t.Fatalf("fenced instance: err = %v", err)
		}
	}
	readBatch(t, late, next)
	all := append(append([]string(nil), dead0[:2]...), "pay/0/4", dead0[2])
	wantKeys(t, deadKeys(t, f.c, true), all...)

	// A restart (OpenCheckpoint) of the fenced instance takes over again:
	// it finds the batch committed.
	if err := fresh.OpenCheckpoint(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	readBatch(t, fresh, next)
	if st := fresh.Stats(); st.DeadLettersSkipped != 1 {
		t.Fatalf("restarted instance: stats %+v", st)
	}
	wantKeys(t, deadKeys(t, f.c, true), all...)
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

// produceFails makes every produce request fail with code on every
// partition it names, until *off is set. (One attempt of a Read may send
// its dead letters and its markers in more than one request, so a
// one-shot failure per request cannot say how many attempts it fails.)
func produceFails(c *kafkadev.Cluster, code int16, hits *atomic.Int32, off *atomic.Bool) {
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if off.Load() {
			return nil, nil, false
		}
		c.Fake().KeepControl()
		hits.Add(1)
		return testenv.KafkaFailResponse(req, code), nil, true
	})
}

// TestDeadLetterBrokerErrors: a failed transaction fails the Read; the
// engine's re-run (the same Source) produces each dead letter once.
func TestDeadLetterBrokerErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*kafkadev.Cluster, *atomic.Int32, *atomic.Bool)
		hits   int32 // at least
	}{
		{"end txn invalid state", func(c *kafkadev.Cluster, h *atomic.Int32, _ *atomic.Bool) {
			endTxnFails(c, kerr.InvalidTxnState.Code, h)
		}, 1},
		{"end txn unknown server error", func(c *kafkadev.Cluster, h *atomic.Int32, _ *atomic.Bool) {
			endTxnFails(c, kerr.UnknownServerError.Code, h)
		}, 1},
		// A failure before the commit is tried once more within the Read:
		// every produce fails until the Read has given up, so both attempts
		// (at least one request each) fail.
		{"produce invalid record", func(c *kafkadev.Cluster, h *atomic.Int32, off *atomic.Bool) {
			produceFails(c, kerr.InvalidRecord.Code, h, off)
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDLQFixture(t)
			defer f.mem.AssertSize(t, 0)
			src := f.open(t)
			var hits atomic.Int32
			var off atomic.Bool
			tc.inject(f.c, &hits, &off)
			if _, err := readRows(t, src, batch0[0], batch0[1]); err == nil {
				t.Fatal("Read succeeded despite the injected error")
			}
			off.Store(true)
			if hits.Load() < tc.hits {
				t.Fatalf("injection hit %d times, want at least %d", hits.Load(), tc.hits)
			}
			readBatch(t, src, batch0)
			wantKeys(t, deadKeys(t, f.c, true), dead0...)
		})
	}
}

// TestDeadLetterMarkerReadRetried: a leader change answered to the fetch
// of the progress topic at start is retried.
func TestDeadLetterMarkerReadRetried(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	readBatch(t, f.open(t), batch0)
	md, err := kadm.NewClient(testenv.KafkaClient(t, f.c)).Metadata(context.Background(), "pay-dlq-progress")
	if err != nil {
		t.Fatal(err)
	}
	progressID := md.Topics["pay-dlq-progress"].ID // fetch requests name topics by id
	var hits atomic.Int32
	f.c.Fake().ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || fr.Topics[0].TopicID != progressID {
			return nil, nil, false // not handled: processed normally, the control function stays
		}
		if hits.Load() >= 3 {
			return nil, nil, false
		}
		hits.Add(1)
		f.c.Fake().KeepControl()
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range fr.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	src := f.open(t)
	if hits.Load() != 3 {
		t.Fatalf("progress fetch failed %d times, want 3", hits.Load())
	}
	readBatch(t, src, batch0)
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}

// TestDeadLetterRecreatedTopic: a marker of a topic that was deleted and
// created again (another topic id) does not cover the new topic's records.
func TestDeadLetterRecreatedTopic(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	readBatch(t, f.open(t), batch0)
	adm := kadm.NewClient(testenv.KafkaClient(t, f.c))
	ctx := context.Background()
	if _, err := adm.DeleteTopic(ctx, "pay"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "pay"); err != nil {
		t.Fatal(err)
	}
	produce(t, f.c, rec("pay", 0, "x", `bad`))
	readBatch(t, f.open(t), [2]json.RawMessage{json.RawMessage(`{"pay":{"0":0}}`), json.RawMessage(`{"pay":{"0":1}}`)})
	wantKeys(t, deadKeys(t, f.c, true), "pay/0/0", "pay/0/1", "pay/0/3", "pay/1/1")
}

// TestDeadLetterTransactionalID: the id is kept in the checkpoint, differs
// between checkpoints, can be set, and is required.
func TestDeadLetterTransactionalID(t *testing.T) {
	ctx := context.Background()
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	a := f.open(t)
	raw, err := f.store.Get(ctx, kafka.DeadLetterIDFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"v":1,"transactionalId":%q}`, a.DeadLetterTransactionalID()); string(raw) != want {
		t.Fatalf("%s holds %s, want %s", kafka.DeadLetterIDFile, raw, want)
	}
	other, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := newSource(t, f.c, f.mem, kafka.WithTopics("pay"), kafka.WithDeadLetterTopic("pay-dlq"))
	if err := b.OpenCheckpoint(ctx, other); err != nil {
		t.Fatal(err)
	}
	if b.DeadLetterTransactionalID() == a.DeadLetterTransactionalID() {
		t.Fatal("two checkpoints share a transactional id")
	}
	set := f.open(t, kafka.WithDeadLetterTransactionalID("mine"))
	if got := set.DeadLetterTransactionalID(); got != "mine" {
		t.Fatalf("explicit id: %q", got)
	}
	none := newSource(t, f.c, f.mem, kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema), kafka.WithDeadLetterTopic("pay-dlq"))
	if _, err := readRows(t, none, batch0[0], batch0[1]); !errors.Is(err, kafka.ErrNoTransactionalID) {
		t.Fatalf("no id: err = %v", err)
	}
	// The progress topic was created compacted, under its default name.
	rcs, err := kadm.NewClient(testenv.KafkaClient(t, f.c)).DescribeTopicConfigs(ctx, "pay-dlq-progress")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("pay-dlq-progress", nil)
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
	if _, err := kafka.New(kafka.WithBrokers("x:1"), kafka.WithTopics("t"), kafka.WithDeadLetterTransactionalID("x")); !errors.Is(err, kafka.ErrConfig) {
		t.Fatalf("id without topic: err = %v", err)
	}
}

// TestDeadLetterQueriesShareProgressTopic: two queries (two checkpoints)
// reading the same range each deliver their dead letters once: the markers
// of one do not cover the other.
func TestDeadLetterQueriesShareProgressTopic(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	readBatch(t, f.open(t), batch0)
	other, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	f.store = other
	src := f.open(t)
	readBatch(t, src, batch0)
	if st := src.Stats(); st.DeadLetters != 3 || st.DeadLettersSkipped != 0 {
		t.Fatalf("second query: stats %+v", st)
	}
	readBatch(t, f.open(t), batch0) // the second query's restart skips
	wantKeys(t, deadKeys(t, f.c, true), "pay/0/1", "pay/0/1", "pay/0/3", "pay/0/3", "pay/1/1", "pay/1/1")
}

// TestDeadLetterOpenCheckpointErrors: what OpenCheckpoint refuses, each
// error naming the thing at fault.
func TestDeadLetterOpenCheckpointErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  *string // content of DeadLetterIDFile, nil for none
		opts  []kafka.Option
		extra []kfake.Opt
		want  string
		is    error
	}{
		{name: "timeout above the brokers' maximum", opts: []kafka.Option{kafka.WithDeadLetterTransactionTimeout(time.Minute)},
			extra: []kfake.Opt{kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "30000"})},
			want:  "WithDeadLetterTransactionTimeout is 60000 ms, broker 0 has transaction.max.timeout.ms=30000", is: kafka.ErrConfig},
		{name: "missing dead-letter topic", opts: []kafka.Option{kafka.WithDeadLetterTopic("nowhere")}, want: `dead-letter topic "nowhere" does not exist`},
		{name: "empty id file", file: ptr(""), want: "is not a version 1 dead-letter id"},
		{name: "torn id file", file: ptr(`{"v":1,"transactionalId":"onceflow-dead`), want: "is not a version 1 dead-letter id"},
		{name: "future version", file: ptr(`{"v":2,"transactionalId":"x"}`), want: "is not a version 1 dead-letter id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newDLQFixture(t, tc.extra...)
			if tc.file != nil {
				if err := f.store.PutIfAbsent(ctx, kafka.DeadLetterIDFile, []byte(*tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			src := newSource(t, f.c, f.mem, append([]kafka.Option{kafka.WithTopics("pay"), kafka.WithDeadLetterTopic("pay-dlq")}, tc.opts...)...)
			err := src.OpenCheckpoint(ctx, f.store)
			if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestDeadLetterTimedOutTransaction: the broker aborts a dead-letter
// transaction that outlives its timeout; the commit fails, nothing of it
// is visible, and after the engine's restart (OpenCheckpoint) the re-run
// produces the dead letters once.
func TestDeadLetterTimedOutTransaction(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	src := f.open(t, kafka.WithDeadLetterTransactionTimeout(time.Second))
	kafka.SetBeforeDeadLetterCommit(src, func() { time.Sleep(2500 * time.Millisecond) })
	_, err := readRows(t, src, batch0[0], batch0[1])
	if err == nil {
		t.Fatal("a transaction older than its timeout committed")
	}
	t.Logf("commit after the timeout: %v", err)
	kafka.SetBeforeDeadLetterCommit(src, nil)
	if got := deadKeys(t, f.c, true); len(got) != 0 {
		t.Fatalf("timed-out transaction visible: %v", got)
	}
	if err := src.OpenCheckpoint(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	readBatch(t, src, batch0)
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}
