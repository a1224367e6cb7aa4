package cardblock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/engine/processortest"
	"github.com/onceflow/onceflow/examples/cardblock"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/outbox"
	"github.com/onceflow/onceflow/storage"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "card_id", Type: arrow.BinaryTypes.String},
	{Name: "status", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms},
}, nil)

type payment struct {
	card     string
	declined bool
	ts       time.Time
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// payments returns batches of payments in event-time order: 12 cards,
// one payment every 20 s, a card's payment declined with probability 0.35.
func payments(batches, perBatch int) [][]payment {
	rng := rand.New(rand.NewPCG(7, 7))
	var out [][]payment
	n := 0
	for range batches {
		var b []payment
		for range perBatch {
			b = append(b, payment{card: fmt.Sprintf("c%02d", rng.IntN(12)), declined: rng.Float64() < 0.35, ts: t0.Add(time.Duration(n) * 20 * time.Second)})
			n++
		}
		out = append(out, b)
	}
	return out
}

func records(t *testing.T, bs [][]payment) []arrow.RecordBatch {
	var recs []arrow.RecordBatch
	for _, b := range bs {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for _, p := range b {
			rb.Field(0).(*array.StringBuilder).Append(p.card)
			st := "approved"
			if p.declined {
				st = "declined"
			}
			rb.Field(1).(*array.StringBuilder).Append(st)
			rb.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(p.ts.UnixMilli()))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	t.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
	})
	return recs
}

// model applies the rule row by row: the ids of the blocks it sends.
func model(bs [][]payment) []string {
	declines := map[string][]time.Time{}
	until := map[string]time.Time{}
	var ids []string
	for _, b := range bs {
		for _, p := range b {
			if !p.declined {
				continue
			}
			l := append(declines[p.card], p.ts)
			for len(l) > 0 && !l[0].After(p.ts.Add(-10*time.Minute)) {
				l = l[1:]
			}
			declines[p.card] = l
			if u, ok := until[p.card]; ok && p.ts.Before(u) {
				continue
			}
			if len(l) >= 3 {
				ids = append(ids, fmt.Sprintf("block/%s/%d", p.card, l[0].UnixMilli()))
				until[p.card] = p.ts.Add(10 * time.Minute)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

type memSource struct{ recs []arrow.RecordBatch }

func (s *memSource) Schema() *arrow.Schema { return schema }
func (s *memSource) Description() string   { return "payments" }
func (s *memSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *memSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.Atoi(string(start))
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.Itoa(min(n+1, len(s.recs)))), nil
}
func (s *memSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	for _, r := range s.recs[a:b] {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

// TestBlocksReachTheEndpointOnce runs payments → rule → transactional
// Kafka sink → outbox → HTTP receiver and compares the blocks with the
// row-by-row model.
func TestBlocksReachTheEndpointOnce(t *testing.T) {
	bs := payments(8, 60)
	want := model(bs)
	if len(want) < 5 {
		t.Fatalf("the data makes only %d blocks; make it denser", len(want))
	}
	c := testenv.Kafka(t, map[string]int32{"blocks": 3})
	sink, err := kafkasink.New(kafkasink.WithBrokers(c.Addrs()...), kafkasink.WithTopic("blocks"), kafkasink.WithKeyColumn("card_id"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stream := cardblock.AddRule(engine.ReadStream(&memSource{recs: records(t, bs)}).WithWatermark("ts", time.Minute), cardblock.Rule{})
	q, err := engine.NewQuery(stream, engine.WithCheckpoint(cp), engine.WithSink(sink), engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b cardblock.Block
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if k, ok := got[b.ID]; ok && k != r.Header.Get("Idempotency-Key") {
			t.Errorf("intent %s repeated with another key", b.ID)
		}
		got[b.ID] = r.Header.Get("Idempotency-Key")
	}))
	defer srv.Close()
	ocp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(outbox.WithBrokers(c.Addrs()...), outbox.WithTopic("blocks"), outbox.WithCheckpoint(ocp),
		outbox.WithEndpoint(srv.URL), outbox.WithIdleExit(800*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var ids []string
	for id, key := range got {
		ids = append(ids, id)
		if key != outbox.IdempotencyKey(id) {
			t.Errorf("intent %s carried key %s", id, key)
		}
	}
	slices.Sort(ids)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("blocks delivered:\n %v\nwant (row-by-row model):\n %v", ids, want)
	}
}

// TestRuleIsDeterministic runs the rule through processortest.
func TestRuleIsDeterministic(t *testing.T) {
	bs := payments(6, 40)
	processortest.Check(t, processortest.Case{
		Schema: schema, Batches: records(t, bs), Keys: []string{"card_id"}, WatermarkCol: "ts", Delay: time.Minute,
	}, cardblock.NewProcessor(cardblock.Rule{}))
}
