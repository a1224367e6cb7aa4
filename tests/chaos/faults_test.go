package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

var paymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// settlementStream is chaosprog's query, in process.
func settlementStream(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).
		Select(
			batch.As(batch.Col("merchant_id"), "merchant_id"),
			batch.As(batch.Col("amount_cents"), "amount_cents"),
		).
		GroupBy("merchant_id").ID("merchant-totals").
		Agg(
			batch.Sum(batch.Col("amount_cents")).PerBatch().As("amount_cents"),
			batch.CountRows().PerBatch().As("payments"),
			batch.Sum(batch.Col("amount_cents")).As("total_cents"),
		).
		WithBatchIDColumn("batch_id")
}

func producePayments(t *testing.T, c *kafkadev.Cluster, rng *rand.Rand, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		m := fmt.Sprint("m-", rng.IntN(13))
		v, _ := json.Marshal(map[string]any{"payment_id": fmt.Sprint("p-", i), "merchant_id": m, "amount_cents": 1 + rng.Int64N(99999)})
		recs = append(recs, &kgo.Record{Topic: "payments", Key: []byte(m), Value: v})
	}
	testenv.KafkaProduce(t, c, recs...)
}

// runInProcess runs the settlement query until the available input is
// done and returns Run's error.
func runInProcess(t *testing.T, cp storage.Store, brokers []string, sinks ...engine.Sink) error {
	t.Helper()
	src, err := kafka.New(kafka.WithBrokers(brokers...), kafka.WithTopics("payments"), kafka.WithValueJSON(paymentSchema), kafka.WithMaxOffsetsPerTrigger(50))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	opts := []engine.Option{engine.WithCheckpoint(cp), engine.WithTrigger(engine.AvailableNow()), engine.WithOutputMode(engine.Update),
		engine.WithStatePartitions(2), engine.WithMinBatchesToRetain(3)}
	for _, s := range sinks {
		opts = append(opts, engine.WithSink(s))
	}
	q, err := engine.NewQuery(settlementStream(src), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return q.Run(ctx)
}

func newKafkaSink(t *testing.T, brokers []string) *kafkasink.Sink {
	t.Helper()
	s, err := kafkasink.New(kafkasink.WithBrokers(brokers...), kafkasink.WithTopic("settlements"), kafkasink.WithName("faults"),
		kafkasink.WithKeyColumn("merchant_id"), kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// transactional reports whether a produce request is part of a
// transaction: here, the Kafka sink's (the test's own producer is not
// transactional). Newer clients name topics by id, so the topic name is
// not a reliable match.
func transactional(req kmsg.Request) bool {
	r, ok := req.(*kmsg.ProduceRequest)
	return ok && r.TransactionID != nil
}

// TestBrokerFaults runs the settlement query in process against kfake and
// makes the broker fail Produce, EndTxn and Fetch requests mid-run, with
// retriable and fatal error codes. The query either rides through the
// fault (the client retries) or stops with an error that names the broker
// error; after a restart the audit is clean either way.
func TestBrokerFaults(t *testing.T) {
	cases := []struct {
		name  string
		key   kmsg.Key
		match func(kmsg.Request) bool
		code  int16
		times int // failures injected
		skip  int // matching requests let through first
	}{
		{"produce retriable", kmsg.Produce, transactional, kerr.NotLeaderForPartition.Code, 1, 2},
		{"produce fatal", kmsg.Produce, transactional, kerr.InvalidRecord.Code, 1, 2},
		{"endtxn retriable", kmsg.EndTxn, func(kmsg.Request) bool { return true }, kerr.CoordinatorNotAvailable.Code, 2, 2},
		{"endtxn fatal", kmsg.EndTxn, func(kmsg.Request) bool { return true }, kerr.InvalidTxnState.Code, 1, 2},
		{"fetch retriable", kmsg.Fetch, func(kmsg.Request) bool { return true }, kerr.NotLeaderForPartition.Code, 2, 3},
		{"fetch fatal", kmsg.Fetch, func(kmsg.Request) bool { return true }, kerr.UnknownServerError.Code, 1, 3},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.Kafka(t, map[string]int32{"payments": 2, "settlements": 2})
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			producePayments(t, c, rng, 0, 400)
			cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer cp.Close()
			var seen, injected atomic.Int64
			fake := c.Fake()
			fake.ControlKey(tc.key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				if !tc.match(req) || seen.Add(1) <= int64(tc.skip) || injected.Load() >= int64(tc.times) {
					return nil, nil, false
				}
				injected.Add(1)
				return testenv.KafkaFailResponse(req, tc.code), nil, true
			})
			sink := newKafkaSink(t, c.Addrs())
			err = runInProcess(t, cp, c.Addrs(), sink)
			_ = sink.Close()
			if injected.Load() == 0 {
				t.Fatalf("no %s request failed: the fault was never injected", tc.key.Name())
			}
			outcome := "rode through the fault"
			if err != nil {
				outcome = "stopped: " + err.Error()
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(kerr.ErrorForCode(tc.code).(*kerr.Error).Message)) &&
					!errors.Is(err, kerr.ErrorForCode(tc.code)) {
					t.Errorf("the query stopped with an error that does not name the broker's %s: %v", kerr.ErrorForCode(tc.code), err)
				}
				producePayments(t, c, rng, 400, 100) // more while it was down
				sink := newKafkaSink(t, c.Addrs())
				if err := runInProcess(t, cp, c.Addrs(), sink); err != nil {
					t.Fatalf("restart: %v", err)
				}
				_ = sink.Close()
			}
			t.Logf("%d %s failures (%s): %s", injected.Load(), tc.key.Name(), kerr.ErrorForCode(tc.code), outcome)
			rep, err := audit.Run(context.Background(), audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"),
				Output: audit.KafkaOutput(c.Addrs(), "settlements"), Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || rep.MatchedBatch != rep.LastCommitted {
				t.Fatalf("audit after %s: %d differences, matched %d of %d: %+v", tc.name, rep.Differences(), rep.MatchedBatch, rep.LastCommitted, rep.Suspects)
			}
		})
	}
}

// TestPGTerminate kills the PostgreSQL sink's server connections
// (pg_terminate_backend) again and again while the query runs. The sink
// retries or the query stops with an error; after restarts the table
// reconciles with the input.
func TestPGTerminate(t *testing.T) {
	pgURL := testenv.PGURL(t)
	app := fmt.Sprintf("chaos-terminate-%d", time.Now().UnixNano())
	admin, err := postgres.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	c := testenv.Kafka(t, map[string]int32{"payments": 2})
	rng := rand.New(rand.NewPCG(5, 5))
	producePayments(t, c, rng, 0, 600)
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()

	var terminated atomic.Int64
	// terminate kills the sink's own backends: other tests share the role.
	terminate := func() {
		var n int64
		err := admin.QueryRow(context.Background(),
			"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()", app).Scan(&n)
		if err == nil {
			terminated.Add(n)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(150 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			terminate()
		}
	}()
	sinkURL := withParam(pgURL, "application_name="+app)
	var errs []string
	for attempt := 0; attempt < 30; attempt++ {
		pool, err := postgres.Connect(context.Background(), sinkURL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		sink, err := postgres.NewOffsetsInSink(pool, "terminate", "totals", postgres.WithCreateTables(true),
			postgres.WithKeyColumns("merchant_id"), postgres.WithMerge(postgres.MergeAdd, "amount_cents", "payments"),
			postgres.WithRetry(5, 10*time.Millisecond, 100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// The ticker alone may miss a run that finishes quickly: kill the
		// pool's idle connection (opened by the table setup) before every
		// run, so the first statement of each run meets a dead backend.
		terminate()
		err = runInProcess(t, cp, c.Addrs(), sink)
		pool.Close()
		if err == nil {
			break
		}
		errs = append(errs, err.Error())
		if strings.Contains(err.Error(), "onceflow-test") {
			t.Errorf("an error shows the database password: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if terminated.Load() == 0 {
		t.Fatal("no backend of the sink was terminated")
	}
	t.Logf("%d backends terminated; %d runs stopped with an error before one finished", terminated.Load(), len(errs))
	kinds := map[string]int{}
	for _, e := range errs {
		k := e
		if i := strings.Index(k, ": "); i > 0 && len(k) > 90 {
			k = k[:90] + "…"
		}
		kinds[k]++
	}
	for k, n := range kinds {
		t.Logf("  %d× stopped: %s", n, k)
	}
	pool, err := postgres.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rep, err := audit.Run(context.Background(), audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"),
		Output: audit.PostgresOutput(pool, "totals"), Key: "merchant_id", Value: "amount_cents"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.InputRows != 600 {
		t.Fatalf("audit after terminated backends: %d differences, %d input rows: %+v", rep.Differences(), rep.InputRows, rep.Suspects)
	}
}
