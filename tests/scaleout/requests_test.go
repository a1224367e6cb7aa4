package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

// counting is a store that counts the requests of each kind, as an
// object store would bill them. It has no Unwrap, so the engine treats it
// as object storage (no local lock), as it does S3.
type counting struct {
	storage.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *counting) count(op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

func (c *counting) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	c.count("PUT (conditional)")
	return c.Store.PutIfAbsent(ctx, name, data)
}

func (c *counting) Put(ctx context.Context, name string, data []byte) error {
	c.count("PUT")
	return c.Store.Put(ctx, name, data)
}

func (c *counting) Get(ctx context.Context, name string) ([]byte, error) {
	c.count("GET")
	return c.Store.Get(ctx, name)
}

func (c *counting) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	c.count("LIST")
	return c.Store.List(ctx, prefix)
}

func (c *counting) Delete(ctx context.Context, names ...string) error {
	c.count("DELETE")
	return c.Store.Delete(ctx, names...)
}

// TestRequestsPerBatchPerTask counts the object-store requests one task of
// the settlement query makes per batch in steady state (one state
// partition, snapshots every 10 versions, 10 batches retained), the
// figure docs/scale-out.md prices. It pins the two conditional PUTs per
// batch (offsets/N and commits/N) and logs the rest:
//
//	go test -run TestRequestsPerBatchPerTask -v ./tests/scaleout/
func TestRequestsPerBatchPerTask(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 1})
	cl := testenv.KafkaClient(t, c)
	const batches, per = 60, 50
	var recs []*kgo.Record
	for i := range batches * per {
		v, _ := json.Marshal(map[string]any{"payment_id": fmt.Sprint("p-", i), "merchant_id": fmt.Sprintf("m-%02d", i%48), "amount_cents": i})
		recs = append(recs, &kgo.Record{Topic: "payments", Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	local, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := &counting{Store: local, n: map[string]int{}}
	src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("payments"), kafka.WithPartitions(0),
		kafka.WithValueJSON(paymentSchemaForCount), kafka.WithMaxOffsetsPerTrigger(per))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var mu sync.Mutex
	var before map[string]int
	q, err := engine.NewQuery(settlement(src),
		engine.WithCheckpoint(store), engine.WithSink(memsink.New("out")), engine.WithOutputMode(engine.Update),
		engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(1), engine.WithMinBatchesToRetain(10),
		engine.WithProgressListener(func(p engine.Progress) {
			if p.BatchID == batches/2-1 { // steady state from here: purges and snapshots running
				mu.Lock()
				store.mu.Lock()
				before = map[string]int{}
				for k, v := range store.n {
					before[k] = v
				}
				store.mu.Unlock()
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := q.LastProgress(); p == nil || p.BatchID != batches-1 {
		t.Fatalf("last batch %v, want %d", p, batches-1)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	n := float64(batches / 2)
	for _, op := range []string{"PUT (conditional)", "PUT", "GET", "LIST", "DELETE"} {
		t.Logf("%-18s %.2f per batch", op, float64(store.n[op]-before[op])/n)
	}
	if got := store.n["PUT (conditional)"] - before["PUT (conditional)"]; got != 2*batches/2 {
		t.Errorf("%d conditional PUTs over %d batches, want 2 per batch (offsets/N, commits/N)", got, batches/2)
	}
}

var paymentSchemaForCount = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// settlement is workerprog's query.
func settlement(src engine.Source) *engine.Stream {
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
