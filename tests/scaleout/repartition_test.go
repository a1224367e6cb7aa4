package scaleout

import (
	"context"
	"flag"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// TestRepartitionKillsAndAudit groups payments by customer, which is not
// the payments topic's partitioning (merchant), in two scaled-out stages:
// stage 1 writes each payment keyed by customer through the transactional
// Kafka sink into the repartition topic by-customer, stage 2 reads it and
// sums per customer into Kafka and PostgreSQL. A worker of each stage is
// SIGKILLed at random and replaced, one of stage 2 leaves with SIGTERM.
// Then stage 2 is audited task by task against the repartition topic, both
// stages' commit logs are checked as in TestScaleOutKillsJoinsAndLeaves,
// and the final per-customer totals equal what was produced, on both
// outputs: exactly once end to end.
//
// It takes 75–110 s, so it runs only with -scaleout.repartition (the
// package's default budget is TestScaleOutKillsJoinsAndLeaves):
//
//	go test -race -count=1 -run TestRepartitionKillsAndAudit -v ./tests/scaleout/ -scaleout.repartition
func TestRepartitionKillsAndAudit(t *testing.T) {
	if !*repartitionFlag {
		t.Skip("the repartition test runs with -scaleout.repartition (75–110 s)")
	}
	loc := testenv.S3Bucket(t)
	pgURL := testenv.PGURL(t)
	brokerBin, workerBin := programs(t)
	ctx := context.Background()
	rng, seed := newRand(t)
	brokers := startBroker(t, brokerBin, "payments", "by-customer", "customer-totals")
	pool := pgTables(t, pgURL, "customer_totals", "customer_id")
	s1 := newCluster(t, workerBin, "r", "repartition", brokers, loc, pgURL)
	s2 := newCluster(t, workerBin, "c", "customers", brokers, loc, pgURL)
	prod, stopProducing := startProducer(t, brokers, seed)
	defer stopProducing()

	for range 2 {
		s1.start()
		s2.start()
	}
	s1.waitFor("stage 1 balanced", 60*time.Second, s1.balanced)
	s2.waitFor("stage 2 balanced", 60*time.Second, s2.balanced)
	pause := func() { time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond) }
	for _, c := range []*cluster{s1, s2} {
		pause()
		alive := c.alive()
		victim := alive[rng.IntN(len(alive))]
		tasks := c.tasksOf(victim)
		killed := c.kill(victim, syscall.SIGKILL)
		c.start()
		c.waitFor(fmt.Sprintf("the tasks of SIGKILLed %s to resume", victim), 60*time.Second, func() bool { return c.resumedAfter(killed, tasks) > 0 })
		t.Logf("%s: SIGKILL of %s (%d tasks) → resumed: %dms", c.stage, victim, len(tasks), c.resumedAfter(killed, tasks)-killed)
		c.waitFor(c.stage+" balanced", 60*time.Second, c.balanced)
	}
	pause()
	alive := s2.alive()
	leaver := alive[rng.IntN(len(alive))]
	tasks := s2.tasksOf(leaver)
	left := s2.kill(leaver, syscall.SIGTERM)
	s2.waitFor("the tasks of "+leaver+" to resume", 60*time.Second, func() bool { return s2.resumedAfter(left, tasks) > 0 })

	// Drain: stage 1 to the end of payments, then stage 2 to the end of
	// the repartition topic, which no open transaction holds back once
	// stage 1 has stopped.
	stopProducing()
	s1.waitFor("stage 1 to read all payments", 60*time.Second, func() bool {
		s1.mu.Lock()
		defer s1.mu.Unlock()
		prod.mu.Lock()
		defer prod.mu.Unlock()
		for p := range partitions {
			if s1.lastEnd[p] != prod.sent[p] {
				return false
			}
		}
		return true
	})
	for _, name := range s1.alive() {
		s1.kill(name, syscall.SIGTERM)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, "by-customer")
	if err != nil {
		t.Fatal(err)
	}
	s2.waitFor("stage 2 to read the whole repartition topic", 60*time.Second, func() bool {
		s2.mu.Lock()
		defer s2.mu.Unlock()
		for p := range int32(partitions) {
			e, ok := ends.Lookup("by-customer", p)
			if !ok || s2.lastEnd[p] != e.Offset {
				return false
			}
		}
		return true
	})
	for _, name := range s2.alive() {
		s2.kill(name, syscall.SIGTERM)
	}
	t.Logf("%d payments; %d stage-1 and %d stage-2 batches committed", prod.n, len(s1.commits), len(s2.commits))

	for _, c := range []*cluster{s1, s2} {
		root := c.root(ctx, loc)
		checkCommitsOnce(t, c, root)
		checkNoOverlap(t, c)
	}
	root2 := s2.root(ctx, loc)
	checkProgressRows(t, root2, pool, "customers")
	auditTasks(t, root2, brokers, "by-customer", pool, customerPartition, "customer_id", "customer-totals", "customer_totals")
	checkEndToEnd(t, ctx, brokers, pool, prod)
}

var repartitionFlag = flag.Bool("scaleout.repartition", false, "run TestRepartitionKillsAndAudit")

// checkEndToEnd compares the per-customer totals of both outputs with the
// sums of the payments produced.
func checkEndToEnd(t *testing.T, ctx context.Context, brokers string, pool *pgxpool.Pool, prod *producer) {
	rows, err := pool.Query(ctx, "SELECT customer_id, total_cents FROM customer_totals")
	if err != nil {
		t.Fatal(err)
	}
	pg := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		pg[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	kafkaSums := readTotals(t, ctx, brokers, "customer-totals")
	prod.mu.Lock()
	defer prod.mu.Unlock()
	for name, got := range map[string]map[string]int64{"postgres": pg, "kafka": kafkaSums} {
		if len(got) != len(prod.byCustomer) {
			t.Errorf("%s holds %d customers, %d produced", name, len(got), len(prod.byCustomer))
		}
		for k, want := range prod.byCustomer {
			if got[k] != want {
				t.Errorf("%s: customer %s total %d, produced %d", name, k, got[k], want)
			}
		}
	}
}

// readTotals sums amount_cents per customer_id over the committed records
// of topic, read with the Kafka source (read_committed, earliest to the
// last stable offset).
func readTotals(t *testing.T, ctx context.Context, brokers, topic string) map[string]int64 {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "customer_id", Type: arrow.BinaryTypes.String},
		{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	src, err := kafka.New(kafka.WithBrokers(brokers), kafka.WithTopics(topic), kafka.WithValueJSON(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	start, err := src.InitialOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := src.LatestOffset(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	err = src.Read(ctx, start, end, func(rec arrow.RecordBatch) error {
		sc := rec.Schema()
		keys := rec.Column(sc.FieldIndices("customer_id")[0]).(*array.String)
		amounts := rec.Column(sc.FieldIndices("amount_cents")[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			sums[keys.Value(i)] += amounts.Value(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}
