package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
)

// TestFenceAbortsAnAbandonedTransaction: a transaction left open by an
// abandoned transactional id holds read_committed readers back; `onceflow
// fence` aborts it, and the committed records after it become visible.
func TestFenceAbortsAnAbandonedTransaction(t *testing.T) {
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

	code, stdout, stderr := runCLI(ctx, "fence", "--brokers", strings.Join(c.Addrs(), ","), "--transactional-id", "onceflow-q-old")
	if code != 0 || !strings.Contains(stdout, `fenced transactional id "onceflow-q-old"`) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	recs := testenv.KafkaReadCommitted(t, c, "out", 0)
	if len(recs) != 1 || string(recs[0].Value) != "later" {
		t.Fatalf("read_committed after the fence: %d records, want [later]", len(recs))
	}
	if err := abandoned.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
}

func TestFenceNeedsBrokersAndID(t *testing.T) {
	code, _, stderr := runCLI(context.Background(), "fence", "--brokers", "127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "--transactional-id") {
		t.Fatalf("exit %d, stderr %s; want 2 naming the missing flag", code, stderr)
	}
}
