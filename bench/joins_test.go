package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/source/nexmark"
	"github.com/onceflow/onceflow/storage"
)

var (
	joinEvents      = flag.Int64("joins.events", 200_000, "Nexmark events (all kinds) of TestNexmarkJoins")
	joinBatchEvents = flag.Int64("joins.batch-events", 50_000, "events per batch of TestNexmarkJoins")
)

// joinAnswer is a join's result as rows, a sum of one id column and a sum
// of another: equal multisets agree on all three.
type joinAnswer struct {
	rows, a, b int64
}

// joinSink keeps a joinAnswer of the rows it takes (batch ids are unique in
// a run without failures).
type joinSink struct {
	mu   sync.Mutex
	a, b string
	ans  joinAnswer
}

func (s *joinSink) Description() string { return "join-checksum" }
func (s *joinSink) AddBatch(_ context.Context, _ int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ai, bi := sc.FieldIndices(s.a)[0], sc.FieldIndices(s.b)[0]
	for _, r := range recs {
		s.ans.rows += r.NumRows()
		for _, v := range r.Column(ai).(*array.Int64).Int64Values() {
			s.ans.a += v
		}
		for _, v := range r.Column(bi).(*array.Int64).Int64Values() {
			s.ans.b += v
		}
	}
	return nil
}

// latestSink keeps, per key, the newest (n, sum) of an update-mode
// aggregation, and answers with the number of keys and the sums of both.
type latestSink struct {
	mu     sync.Mutex
	latest map[int64][2]int64
}

func (s *latestSink) Description() string { return "latest-per-key" }
func (s *latestSink) AddBatch(_ context.Context, _ int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ki, ni, si := sc.FieldIndices("category")[0], sc.FieldIndices("n")[0], sc.FieldIndices("s")[0]
	for _, r := range recs {
		k, n, v := r.Column(ki).(*array.Int64), r.Column(ni).(*array.Int64), r.Column(si).(*array.Int64)
		for i := range int(r.NumRows()) {
			s.latest[k.Value(i)] = [2]int64{n.Value(i), v.Value(i)}
		}
	}
	return nil
}

func (s *latestSink) answer() joinAnswer {
	var a joinAnswer
	for _, v := range s.latest {
		a.rows++
		a.a += v[0]
		a.b += v[1]
	}
	return a
}

// TestNexmarkJoins runs Nexmark q3 (persons in OR/ID/CA joined with their
// category-10 auctions: an unbounded inner stream-stream join), q8 (new
// persons with the auctions they opened in the same 10 s tumbling window: a
// stream-stream join on (person, window) bounded by Within and watermarks)
// q4 (auctions joined with their bids of the first 20 s, then the average
// price per category: a join feeding an aggregation) and q7 in full (the highest price of each 10 s window joined back to the
// bids of that price in it: a window aggregation, then a join, one chain)
// through the engine, over the same events as DuckDB's hash join, checks
// that the answers agree, and logs each side's throughput per CPU second.
//
//	cd bench && go test -run TestNexmarkJoins -v -joins.events 2000000 -joins.batch-events 250000
func TestNexmarkJoins(t *testing.T) {
	ctx := context.Background()
	src, err := nexmark.New(nexmark.WithTotalEvents(*joinEvents))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for from := int64(0); from < *joinEvents; from += 64 * 1024 {
		recs = append(recs, src.EventRecord(from, min(from+64*1024, *joinEvents)))
	}
	defer releaseAll(recs)
	d, err := openDuck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	i := 0
	all := make([]int, recs[0].NumCols())
	for c := range all {
		all[c] = c
	}
	if err := d.load(ctx, t.TempDir(), "events", func() arrow.RecordBatch {
		if i >= len(recs) {
			return nil
		}
		recs[i].Retain()
		i++
		return recs[i-1]
	}, all); err != nil {
		t.Fatal(err)
	}
	col := func(n string) batch.Named { return batch.As(batch.Col(n), n) }
	kind := func(k int64) batch.Expr {
		return batch.Eq(batch.Cast(batch.Col(nexmark.ColEventType), arrow.PrimitiveTypes.Int64), batch.Lit(k))
	}
	perTrigger := int(max(*joinBatchEvents/(64*1024), 1))
	window := func(ts string) batch.Expr { // the 10 s tumbling window of ts, as a number
		return batch.Div(batch.Cast(batch.Col(ts), arrow.PrimitiveTypes.Int64), batch.Lit(int64(10_000_000)))
	}
	queries := []struct {
		name   string
		stream func(events, events2 engine.Source) *engine.Stream
		a, b   string
		sql    string
		update bool // the last operator aggregates: latestSink
	}{
		{
			name: "q3",
			stream: func(events, events2 engine.Source) *engine.Stream {
				persons := engine.ReadStream(events2).Where(kind(0)).
					Where(batch.In(batch.Col(nexmark.ColState), "OR", "ID", "CA")).
					Select(col("person_id"), col("name"), col("city"), col("state"))
				return engine.ReadStream(events).Where(kind(1)).Where(batch.Eq(batch.Col("category"), batch.Lit(int64(10)))).
					Select(col("auction_id"), col("seller")).
					Join(persons, engine.Inner, engine.On("seller", "person_id")).ID("q3").
					Select(col("name"), col("city"), col("state"), col("auction_id"), col("person_id"))
			},
			a: "auction_id", b: "person_id",
			sql: `SELECT count(*)::BIGINT, sum(a.auction_id)::BIGINT, sum(p.person_id)::BIGINT
FROM events a JOIN events p ON a.seller = p.person_id
WHERE a.event_type = 1 AND a.category = 10 AND p.event_type = 0 AND p.state IN ('OR', 'ID', 'CA')`,
		},
		{
			name: "q8",
			stream: func(events, events2 engine.Source) *engine.Stream {
				persons := engine.ReadStream(events2).Where(kind(0)).
					Select(col("person_id"), col("name"), batch.As(batch.Col("date_time"), "p_ts")).
					WithWatermark("p_ts", time.Second).
					WithColumn("p_win", window("p_ts"))
				return engine.ReadStream(events).Where(kind(1)).
					Select(col("auction_id"), col("seller"), batch.As(batch.Col("date_time"), "a_ts")).
					WithWatermark("a_ts", time.Second).
					WithColumn("a_win", window("a_ts")).
					Join(persons, engine.Inner, engine.On("seller", "person_id"), engine.On("a_win", "p_win"),
						engine.Within("a_ts", "p_ts", -10*time.Second, 10*time.Second)).ID("q8")
			},
			a: "auction_id", b: "person_id",
			sql: `SELECT count(*)::BIGINT, sum(a.auction_id)::BIGINT, sum(p.person_id)::BIGINT
FROM events a JOIN events p ON a.seller = p.person_id
  AND epoch_us(a.date_time) // 10000000 = epoch_us(p.date_time) // 10000000
WHERE a.event_type = 1 AND p.event_type = 0`,
		},
		{
			name: "q4",
			stream: func(events, events2 engine.Source) *engine.Stream {
				bids := engine.ReadStream(events2).Where(kind(2)).
					Select(col("auction"), col("price"), batch.As(batch.Col("date_time"), "b_ts")).
					WithWatermark("b_ts", time.Second)
				return engine.ReadStream(events).Where(kind(1)).
					Select(col("auction_id"), col("category"), batch.As(batch.Col("date_time"), "a_ts")).
					WithWatermark("a_ts", time.Second).
					Join(bids, engine.Inner, engine.On("auction_id", "auction"), engine.Within("a_ts", "b_ts", 0, 20*time.Second)).ID("q4-join").
					GroupBy("category").ID("q4-avg").
					Agg(batch.CountRows().As("n"), batch.Sum(batch.Col("price")).As("s"), batch.Avg(batch.Col("price")).As("avg_price"))
			},
			update: true,
			sql: `SELECT count(*)::BIGINT, sum(n)::BIGINT, sum(s)::BIGINT FROM (
  SELECT a.category, count(*) AS n, sum(b.price) AS s
  FROM events a JOIN events b ON b.auction = a.auction_id
    AND b.date_time BETWEEN a.date_time AND a.date_time + INTERVAL 20 SECOND
  WHERE a.event_type = 1 AND b.event_type = 2 GROUP BY a.category)`,
		},
		{
			name: "q7",
			stream: func(events, events2 engine.Source) *engine.Stream {
				bids := engine.ReadStream(events2).Where(kind(2)).
					Select(col("auction"), col("price"), col("date_time")).
					WithWatermark("date_time", time.Second).
					WithColumn("bid_win", window("date_time"))
				return engine.ReadStream(events).Where(kind(2)).
					Select(col("price"), col("date_time")).
					WithWatermark("date_time", time.Second).
					GroupByWindow(engine.TumblingWindow("date_time", 10*time.Second)).ID("q7-max").
					Agg(batch.Max(batch.Col("price")).As("max_price")).
					WithColumn("win", window("window_start")).
					Join(bids, engine.Inner, engine.On("win", "bid_win"), engine.On("max_price", "price"),
						engine.Within("window_end", "date_time", -10*time.Second, 0)).ID("q7")
			},
			a: "auction", b: "price",
			sql: `WITH m AS (
  SELECT epoch_us(date_time) // 10000000 AS w, max(price) AS p FROM events WHERE event_type = 2 GROUP BY 1
)
SELECT count(*)::BIGINT, sum(b.auction)::BIGINT, sum(b.price)::BIGINT
FROM events b JOIN m ON epoch_us(b.date_time) // 10000000 = m.w AND b.price = m.p
WHERE b.event_type = 2
  AND (m.w + 1) * 10000000 <= (SELECT max(epoch_us(date_time)) - 1000000 FROM events) -- the windows the final watermark closed`,
		},
	}
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			for _, r := range recs {
				r.Retain()
				r.Retain()
			}
			left, right := newMemSource(recs, perTrigger), newMemSource(recs, perTrigger)
			defer left.release()
			defer right.release()
			sink := &joinSink{a: q.a, b: q.b}
			latest := &latestSink{latest: map[int64][2]int64{}}
			var out engine.Sink = sink
			mode := engine.Append
			if q.update {
				out, mode = latest, engine.Update
			}
			cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			query, err := engine.NewQuery(q.stream(left, right), engine.WithCheckpoint(cp), engine.WithSink(out),
				engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(8), engine.WithOutputMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			sp := start()
			if err := query.Run(ctx); err != nil {
				t.Fatal(err)
			}
			wall, cpu := sp.stop()
			dw, dcpu, err := d.timedQuery(ctx, 1, q.sql)
			if err != nil {
				t.Fatal(err)
			}
			var ref joinAnswer
			if err := d.rows(ctx, func(rs *sql.Rows) error {
				var a, b sql.NullInt64
				if err := rs.Scan(&ref.rows, &a, &b); err != nil {
					return err
				}
				ref.a, ref.b = a.Int64, b.Int64
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			got := sink.ans
			if q.update {
				got = latest.answer()
			}
			if got != ref {
				t.Fatalf("engine %+v, DuckDB %+v", got, ref)
			}
			if ref.rows == 0 {
				t.Fatal("the join matched nothing")
			}
			ev := float64(*joinEvents)
			t.Logf("%s: %d rows agree; engine %s wall, %s CPU: %.0f events per CPU second; DuckDB (1 thread, data loaded) %s CPU: %.0f events per CPU second; DuckDB/engine %.1f×",
				q.name, ref.rows, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), ev/cpu.Seconds(),
				dcpu.Round(time.Millisecond), ev/dcpu.Seconds(), cpu.Seconds()/dcpu.Seconds())
			_ = dw
			_ = fmt.Sprint
		})
	}
}
