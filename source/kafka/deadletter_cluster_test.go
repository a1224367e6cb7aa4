package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

var leastBatch = [2]json.RawMessage{json.RawMessage(`{"pay":{"0":0}}`), json.RawMessage(`{"pay":{"0":2}}`)}

// Regression: on a cluster with ACLs, OpenCheckpoint failed for a user who
// may neither describe the cluster's configs nor create topics (it asked
// for the configs, and created the progress topic even when it existed);
// now such a user's query opens, a restart re-runs its batch, and its one
// dead letter is in the dead-letter topic once.
//
// TestDeadLetterLeastPrivilege: on a cluster with ACLs, a query whose
// user may read the source, write the dead-letter topic, read and write
// the progress topic (created by the operators) and use its transactional
// ids, but may neither describe the cluster's configs nor create topics,
// starts and delivers its dead letters once. The transaction timeout is
// then enforced by InitProducerID alone.
func TestDeadLetterLeastPrivilege(t *testing.T) {
	allow := func(rt kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: pattern, Operation: op, Allow: true}
	}
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	topic, txn := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeTransactionalId
	c := testenv.Kafka(t, map[string]int32{"pay": 1, "pay-dlq": 1, "pay-dlq-progress": 1},
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "app", "secret",
			allow(topic, "pay", lit, kmsg.ACLOperationRead),
			allow(topic, "pay-dlq", lit, kmsg.ACLOperationWrite),
			allow(topic, "pay-dlq-progress", lit, kmsg.ACLOperationRead),
			allow(topic, "pay-dlq-progress", lit, kmsg.ACLOperationWrite),
			allow(txn, "onceflow-deadletter-", pre, kmsg.ACLOperationWrite),
		))
	admin := kgo.SASL(plain.Auth{User: "admin", Pass: "admin"}.AsMechanism())
	ctx := context.Background()
	pcl := testenv.KafkaClient(t, c, admin, manual)
	if err := pcl.ProduceSync(ctx, rec("pay", 0, "a", `{"id":"a","amount_cents":1,"at":"2026-11-30T10:00:00Z"}`), rec("pay", 0, "b", `bad`)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	open := func() *kafka.Source {
		src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema), kafka.WithDeadLetterTopic("pay-dlq"),
			kafka.WithSASL(plain.Auth{User: "app", Pass: "secret"}.AsMechanism()))
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := src.OpenCheckpoint(octx, store); err != nil {
			t.Fatalf("open checkpoint as a least-privilege user: %v", err)
		}
		return src
	}
	readBatch(t, open(), leastBatch)
	readBatch(t, open(), leastBatch) // a restart re-runs the batch
	ccl := testenv.KafkaClient(t, c, admin, kgo.ConsumeTopics("pay-dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var keys []string
	for tries := 0; ; tries++ {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := ccl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatal(fe.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) { keys = append(keys, string(r.Key)); n++ })
		if n == 0 && (len(keys) > 0 || tries >= 10) { // a first empty poll may just be slow
			break
		}
	}
	sort.Strings(keys)
	wantKeys(t, keys, "pay/0/1")
}

// Regression: another query sharing the progress topic that died inside
// its dead-letter transaction held this query's restart for that
// transaction's whole timeout (the markers were read up to the last stable
// offset) and then failed it; now the restart opens within 5 s and its
// re-run skips its 3 dead letters, each in the topic once.
//
// TestDeadLetterOtherQueryOpenTransaction: another query that shares the
// progress topic died inside its dead-letter transaction (open until its
// own, longer, timeout). A restart of this query neither waits for that
// transaction nor fails, and still finds its own markers, which lie above
// the other transaction's first offset (the last stable offset).
func TestDeadLetterOtherQueryOpenTransaction(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	ctx := context.Background()
	readBatch(t, f.open(t), [2]json.RawMessage{batch0[0], json.RawMessage(`{"pay":{"0":2,"1":0}}`)}) // creates the progress topic
	other := testenv.KafkaClient(t, f.c, kgo.TransactionalID("onceflow-deadletter-other"), kgo.TransactionTimeout(5*time.Minute))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	marker := `{"v":1,"transactionalId":"onceflow-deadletter-other","topic":"pay","topicId":"00000000000000000000000000000000","partition":0,"end":4,"source":"kafka[pay]"}`
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: "pay-dlq-progress", Key: []byte("onceflow-deadletter-other/pay/0"), Value: []byte(marker)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The other query's process dies here: its transaction stays open.
	readBatch(t, f.open(t), batch0) // our markers now lie above the other's open transaction

	began := time.Now()
	src := f.open(t, kafka.WithDeadLetterTransactionTimeout(time.Second))
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("OpenCheckpoint waited %s for another query's transaction", d)
	}
	readBatch(t, src, batch0)
	if st := src.Stats(); st.DeadLetters != 0 || st.DeadLettersSkipped != 3 {
		t.Fatalf("re-run after restart: stats %+v", st)
	}
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}

// TestDeadLetterCommitOutcomeUnknown: the commit reaches the broker and
// commits, but the Read's context ends before the answer, so the Read
// fails. The engine's re-run in the same process must find the marker and
// produce nothing twice.
func TestDeadLetterCommitOutcomeUnknown(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	src := f.open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hits atomic.Int32
	f.c.Fake().ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		hits.Add(1)
		cancel() // the Read gives up waiting for the answer
		f.c.Fake().SleepControl(func() { time.Sleep(200 * time.Millisecond) })
		return nil, nil, false // then processed normally: the commit lands
	})
	err := src.Read(ctx, batch0[0], batch0[1], func(rec arrow.RecordBatch) error { rec.Release(); return nil })
	if err == nil || hits.Load() != 1 {
		t.Fatalf("Read with a late commit answer: err = %v, EndTxn seen %d times", err, hits.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(deadKeys(t, f.c, true)) < len(dead0) { // wait until the commit is visible
		if time.Now().After(deadline) {
			t.Fatal("the delayed commit never became visible")
		}
	}
	readBatch(t, src, batch0)
	if st := src.Stats(); st.DeadLetters != 0 || st.DeadLettersSkipped != 3 {
		t.Fatalf("re-run: stats %+v", st)
	}
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}

// Regression: after partitions were added to an operator-created progress
// topic, a marker key hashed to another partition, the older marker was
// read after the newer one, and a re-run produced its dead letters again;
// now the re-run produces none (1 skipped) and each is in the topic once.
//
// TestDeadLetterProgressTopicGrows: the operators created the progress
// topic with three partitions and later added a fourth, so a marker key
// hashes elsewhere than before. A re-run must still see the newest marker
// of each key (not the older one left in another partition) and produce
// nothing twice.
func TestDeadLetterProgressTopicGrows(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	ctx := context.Background()
	// An id whose key for pay/0 moves from partition 2 (of 3) to 0 (of 4).
	hash := kgo.StickyKeyPartitioner(nil).ForTopic("x")
	id := ""
	for i := 0; id == ""; i++ {
		cand := fmt.Sprintf("grow-%d", i)
		k := &kgo.Record{Key: []byte(cand + "/pay/0")}
		if hash.Partition(k, 3) == 2 && hash.Partition(k, 4) == 0 {
			id = cand
		}
	}
	adm := kadm.NewClient(testenv.KafkaClient(t, f.c))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "pay-dlq-progress"); err != nil {
		t.Fatal(err)
	}
	open := func() *kafka.Source { return f.open(t, kafka.WithDeadLetterTransactionalID(id)) }
	readBatch(t, open(), [2]json.RawMessage{batch0[0], json.RawMessage(`{"pay":{"0":2,"1":0}}`)}) // pay/0/1
	if _, err := adm.CreatePartitions(ctx, 1, "pay-dlq-progress"); err != nil {
		t.Fatal(err)
	}
	next := [2]json.RawMessage{json.RawMessage(`{"pay":{"0":2,"1":0}}`), json.RawMessage(`{"pay":{"0":4,"1":0}}`)}
	readBatch(t, open(), next) // pay/0/3; then the process dies before the engine's commit
	src := open()
	readBatch(t, src, next)
	if st := src.Stats(); st.DeadLetters != 0 || st.DeadLettersSkipped != 1 {
		t.Fatalf("re-run after restart: stats %+v", st)
	}
	wantKeys(t, deadKeys(t, f.c, true), "pay/0/1", "pay/0/3")
}

// Regression: the progress topic was created with the default segment
// roll (a week or 1 GiB), so every start read all the superseded markers
// of the active segment; now it is created with cleanup.policy=compact and
// segment.ms=3600000.
//
// TestDeadLetterProgressTopicRolls: the progress topic the source creates
// rolls its segment hourly. Kafka never compacts the active segment, and
// the default roll is a week (or 1 GiB), so every start would read a
// week of superseded markers.
func TestDeadLetterProgressTopicRolls(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	f.open(t)
	rcs, err := kadm.NewClient(testenv.KafkaClient(t, f.c)).DescribeTopicConfigs(context.Background(), "pay-dlq-progress")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("pay-dlq-progress", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cfg := range rc.Configs {
		if cfg.Value != nil {
			got[cfg.Key] = *cfg.Value
		}
	}
	if got["cleanup.policy"] != "compact" || got["segment.ms"] != "3600000" {
		t.Fatalf("progress topic cleanup.policy=%q segment.ms=%q, want compact and 3600000", got["cleanup.policy"], got["segment.ms"])
	}
}

// TestDeadLetterStatsConcurrent: Stats may be called while OpenCheckpoint
// and a Read with its dead-letter transaction run (the race detector
// checks the locking).
func TestDeadLetterStatsConcurrent(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	src := newSource(t, f.c, f.mem, kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema), kafka.WithDeadLetterTopic("pay-dlq"))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = src.Stats()
			}
		}
	}()
	if err := src.OpenCheckpoint(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	readBatch(t, src, batch0)
	readBatch(t, src, batch0)
	close(stop)
	<-done
	if st := src.Stats(); st.DeadLetters != 3 || st.DeadLettersSkipped != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// Regression: once the brokers had forgotten the transactional id of a
// query idle longer than transactional.id.expiration.ms, its next bad
// value failed the batch and stopped the query; now that value goes to the
// dead-letter topic.
//
// TestDeadLetterIdleTransactionalIDExpired: a query whose values are all
// good for longer than the brokers' transactional.id.expiration.ms (a
// week by default) loses its producer id on the brokers; its next bad
// value must still go to the dead-letter topic, not fail the batch.
func TestDeadLetterIdleTransactionalIDExpired(t *testing.T) {
	f := newDLQFixture(t, kfake.BrokerConfigs(map[string]string{"transactional.id.expiration.ms": "500"}))
	defer f.mem.AssertSize(t, 0)
	src := f.open(t)
	time.Sleep(1500 * time.Millisecond) // idle: the brokers forget the id
	readBatch(t, src, batch0)
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}

// Regression: a WithTopicPattern matching the dead-letter topic and its
// progress topic read them back (dead letters sent again batch after
// batch, markers as rows); now only topic pay is planned, and WithTopics
// naming the dead-letter topic fails with ErrConfig.
//
// TestDeadLetterPatternExcludesItsOwnTopics: a WithTopicPattern that matches
// the dead-letter topic and its progress topic ("pay.*" with "pay-dlq")
// must not read them: the source would read back its dead letters (and
// send them to the dead-letter topic again, batch after batch) and its
// markers as rows. Naming one in WithTopics is refused.
func TestDeadLetterPatternExcludesItsOwnTopics(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	ctx := context.Background()
	src := newSource(t, f.c, f.mem, kafka.WithTopicPattern("^pay"), kafka.WithValueJSON(paymentSchema), kafka.WithDeadLetterTopic("pay-dlq"))
	if err := src.OpenCheckpoint(ctx, f.store); err != nil {
		t.Fatal(err)
	}
	start := must(t)(src.InitialOffset(ctx))
	end := must(t)(src.LatestOffset(ctx, start))
	readBatch(t, src, [2]json.RawMessage{start, end}) // dead letters and markers now exist
	next := must(t)(src.LatestOffset(ctx, end))
	if offs(t, start) != `{"pay":{"0":0,"1":0}}` || offs(t, next) != `{"pay":{"0":4,"1":2}}` {
		t.Fatalf("planned %s then %s: only topic pay may be read", start, next)
	}
	if _, err := kafka.New(kafka.WithBrokers("x:1"), kafka.WithTopics("pay", "pay-dlq"), kafka.WithDeadLetterTopic("pay-dlq")); !errors.Is(err, kafka.ErrConfig) {
		t.Fatalf("WithTopics naming the dead-letter topic: err = %v", err)
	}
}

// Regression: a Source reopened by a restart kept its once-only topic
// check, so a progress topic deleted meanwhile was never created again and
// every restart failed; now the reopen succeeds and the batch's dead
// letters reach the dead-letter topic.
//
// TestDeadLetterReopenRechecksTopics: OpenCheckpoint (a restart of the
// query, possibly on the same Source) checks the topics again, so a
// progress topic an operator deleted is created again instead of failing
// every restart until the process is replaced.
func TestDeadLetterReopenRechecksTopics(t *testing.T) {
	f := newDLQFixture(t)
	defer f.mem.AssertSize(t, 0)
	ctx := context.Background()
	src := f.open(t)
	adm := kadm.NewClient(testenv.KafkaClient(t, f.c))
	if resp, err := adm.DeleteTopic(ctx, "pay-dlq-progress"); err != nil || resp.Err != nil {
		t.Fatal(err, resp.Err)
	}
	time.Sleep(100 * time.Millisecond) // the restart comes later than the source's metadata cache age
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := src.OpenCheckpoint(octx, f.store); err != nil {
		t.Fatalf("reopen after the progress topic was deleted: %v", err)
	}
	readBatch(t, src, batch0)
	wantKeys(t, deadKeys(t, f.c, true), dead0...)
}
