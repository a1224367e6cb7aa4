package tests

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

// Environment of the helper process TestKafkaDeadLetterChild.
const (
	dlqBrokersEnv    = "ONCEFLOW_TEST_DLQ_BROKERS"
	dlqCheckpointEnv = "ONCEFLOW_TEST_DLQ_CHECKPOINT"
)

var dlqSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// TestKafkaDeadLetterCrash runs a query whose Kafka source sends bad values
// to a dead-letter topic in a process of its own (this test binary, as
// TestKafkaDeadLetterChild), kills it with SIGKILL inside the dead-letter
// transaction (after produce, after commit) and at engine steps around
// the read, restarts it on the same checkpoint, and checks that a
// read_committed reader of the dead-letter topic sees every bad payment
// exactly once. The broker (kfake) lives in this process, so it outlives
// the kills.
func TestKafkaDeadLetterCrash(t *testing.T) {
	faulttest.Require(t)
	c := testenv.Kafka(t, map[string]int32{"payments": 2, "payments-dlq": 2})
	t.Setenv(dlqBrokersEnv, strings.Join(c.Addrs(), ","))
	t.Setenv(dlqCheckpointEnv, t.TempDir())
	run := crashRun{bin: os.Args[0], args: []string{"-test.run=^TestKafkaDeadLetterChild$", "-test.count=1"}}

	cl := testenv.KafkaClient(t, c, kgo.DefaultProduceTopic("payments"))
	bad := map[string]bool{} // dead-letter keys expected: "payments/<partition>/<offset>"
	sent := 0
	produceSome := func(n int) {
		t.Helper()
		recs := make([]*kgo.Record, 0, n)
		for i := sent; i < sent+n; i++ {
			v := fmt.Sprintf(`{"payment_id":"p-%d","amount_cents":%d}`, i, 100+i)
			switch i % 9 {
			case 4:
				v = fmt.Sprintf(`{"payment_id":"p-%d","amount_cents":%d.5}`, i, i) // not an integer
			case 7:
				v = "not json"
			}
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("p-", i)), Value: []byte(v)})
		}
		res := cl.ProduceSync(context.Background(), recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range res { // in completion order, not input order
			if v := string(r.Record.Value); v == "not json" || strings.Contains(v, ".5}") {
				bad[fmt.Sprintf("payments/%d/%d", r.Record.Partition, r.Record.Offset)] = true
			}
		}
		sent += n
	}

	points := []string{fault.KafkaDeadLetterAfterProduce, fault.KafkaDeadLetterAfterCommit,
		fault.EngineAfterWAL, fault.EngineMidRead, fault.EngineAfterSink}
	kills := map[string]int{}
	for round := 0; round < 2; round++ {
		for _, p := range points {
			produceSome(120)
			killed, stderr := run.once(t, p+"@2", 0)
			if killed {
				if !strings.Contains(stderr, "onceflow-fault: "+p) {
					t.Fatalf("killed without reaching %s:\n%s", p, stderr)
				}
				kills[p]++
			}
		}
	}
	produceSome(50)
	if killed, stderr := run.once(t, "", 0); killed {
		t.Fatalf("final run killed:\n%s", stderr)
	}
	t.Logf("kills per fault point: %v", kills)
	for _, p := range []string{fault.KafkaDeadLetterAfterProduce, fault.KafkaDeadLetterAfterCommit} {
		if kills[p] == 0 {
			t.Errorf("fault point %s never killed the process", p)
		}
	}

	seen := map[string]int{}
	committed := testenv.KafkaReadCommitted(t, c, "payments-dlq", 0)
	for _, r := range committed {
		seen[string(r.Key)]++
	}
	var dup, missing, extra []string
	for k, n := range seen {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%s×%d", k, n))
		}
		if !bad[k] {
			extra = append(extra, k)
		}
	}
	for k := range bad {
		if seen[k] == 0 {
			missing = append(missing, k)
		}
	}
	sort.Strings(dup)
	sort.Strings(missing)
	sort.Strings(extra)
	if len(dup)+len(missing)+len(extra) > 0 {
		t.Fatalf("dead letters under read_committed: duplicated %v, missing %v, unexpected %v", dup, missing, extra)
	}
	// The kills inside the transaction left aborted copies that only a
	// read_uncommitted reader sees: the check above had something to catch.
	all := readTopic(t, c.Addrs()[0], "payments-dlq", false)
	t.Logf("%d payments, %d bad; dead-letter topic: %d records committed, %d in all", sent, len(bad), len(committed), len(all))
	if len(all) <= len(committed) {
		t.Errorf("no aborted dead letters in the topic: the kill inside the transaction did not leave one open")
	}
}

// TestKafkaDeadLetterChild is the query process of TestKafkaDeadLetterCrash;
// it does nothing unless that test started it.
func TestKafkaDeadLetterChild(t *testing.T) {
	brokers := os.Getenv(dlqBrokersEnv)
	if brokers == "" {
		t.Skip("the helper process of TestKafkaDeadLetterCrash")
	}
	if err := runDeadLetterQuery(strings.Split(brokers, ","), os.Getenv(dlqCheckpointEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "dead-letter query:", err) // the parent shows stderr
		os.Exit(1)
	}
}

func runDeadLetterQuery(brokers []string, cpDir string) error {
	ctx := context.Background()
	cp, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	defer cp.Close()
	src, err := kafka.New(kafka.WithBrokers(brokers...), kafka.WithTopics("payments"), kafka.WithValueJSON(dlqSchema),
		kafka.WithDeadLetterTopic("payments-dlq"), kafka.WithMaxOffsetsPerTrigger(40))
	if err != nil {
		return err
	}
	defer src.Close()
	q, err := engine.NewQuery(engine.ReadStream(src),
		engine.WithName("dead-letters"),
		engine.WithOutputMode(engine.Append),
		engine.WithCheckpoint(cp),
		engine.WithSink(discard{}),
		engine.WithTrigger(engine.AvailableNow()),
	)
	if err != nil {
		return err
	}
	return q.Run(ctx)
}

// discard is a sink that keeps nothing: the test looks at the dead-letter
// topic only.
type discard struct{}

func (discard) Description() string { return "discard" }

func (discard) AddBatch(context.Context, int64, *arrow.Schema, []arrow.RecordBatch) error { return nil }

// failOnce is a sink whose first AddBatch fails, after the source's Read
// (and its dead-letter transaction) has returned.
type failOnce struct{ failed bool }

func (*failOnce) Description() string { return "fail-once" }

func (s *failOnce) AddBatch(context.Context, int64, *arrow.Schema, []arrow.RecordBatch) error {
	if !s.failed {
		s.failed = true
		return fmt.Errorf("sink down")
	}
	return nil
}

// TestKafkaDeadLetterRunAgainInProcess: a batch fails in the sink after
// its dead letters were committed; the same Query (and Source) is run
// again in the same process, re-runs the batch from the offset log and
// produces no dead letter twice.
func TestKafkaDeadLetterRunAgainInProcess(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 2, "payments-dlq": 1})
	cl := testenv.KafkaClient(t, c, kgo.DefaultProduceTopic("payments"))
	var recs []*kgo.Record
	for i := range 20 {
		v := fmt.Sprintf(`{"payment_id":"p-%d","amount_cents":%d}`, i, i)
		if i%4 == 1 {
			v = "not json"
		}
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("p-", i)), Value: []byte(v)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("payments"), kafka.WithValueJSON(dlqSchema),
		kafka.WithDeadLetterTopic("payments-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	q, err := engine.NewQuery(engine.ReadStream(src), engine.WithName("dlq-again"), engine.WithOutputMode(engine.Append),
		engine.WithCheckpoint(cp), engine.WithSink(&failOnce{}), engine.WithTrigger(engine.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "sink down") {
		t.Fatalf("first run: err = %v", err)
	}
	if err := q.Run(context.Background()); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if st := src.Stats(); st.DeadLetters != 5 || st.DeadLettersSkipped != 5 {
		t.Fatalf("stats %+v: want 5 dead letters produced once and skipped once", st)
	}
	committed := testenv.KafkaReadCommitted(t, c, "payments-dlq", 0)
	if len(committed) < 5 { // the first poll may outlast the default quiet time on a busy machine
		committed = testenv.KafkaReadCommitted(t, c, "payments-dlq", 2*time.Second)
	}
	seen := map[string]int{}
	for _, r := range committed {
		seen[string(r.Key)]++
	}
	if len(seen) != 5 {
		t.Fatalf("dead letters under read_committed: %v, want 5 distinct", seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("dead letter %s seen %d times", k, n)
		}
	}
}
