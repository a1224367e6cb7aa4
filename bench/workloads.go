package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/source/nexmark"
	"github.com/onceflow/onceflow/source/rate"
)

// input is the data a workload reads.
type input int

const (
	nexmarkBids   input = iota // Nexmark bids (bids-only mode), table bids
	nexmarkEvents              // every Nexmark event (persons, auctions, bids), table events (nexmark_joins.go)
	payments                   // rate rows keyed by merchant, table payments
	intPayments                // (k int64, amount_cents) rows, table int_payments (kernel.go)
)

// workload is one benchmark query: its engine definition, a sink that
// keeps its answer, and the reference query computing the same answer.
type workload struct {
	name   string
	what   string
	input  input
	stream func(src engine.Source) *engine.Stream
	// join, set instead of stream, builds a query of two sides, each
	// reading a source of its own over the same events (a join's right
	// side has sources of its own): the engine reads, and with
	// -preload=false generates, the input twice.
	join func(c *config, left, right engine.Source) *engine.Stream
	mode engine.OutputMode
	sink func(c *config) resultSink
	// sql is the DuckDB query over table bids or payments.
	sql func(c *config) string
	// scan reads DuckDB's result rows into an answer.
	scan func(c *config) (func(*sql.Rows) error, func() answer)
	// goRef, if set, computes the answer with a plain Go loop over the
	// input records. Only the call is timed; the function it returns
	// builds the answer.
	goRef refFunc
	// kernel, if set, replaces the engine run: the onceflow figures are of
	// this call over the preloaded input records (timed as goRef is).
	kernel refFunc
	// pebble runs the engine with its state on the pebble backend
	// (statestore/pebblestore) instead of in memory.
	pebble bool
}

// sides is the number of sources the query reads: 2 for a join.
func (w workload) sides() int {
	if w.join != nil {
		return 2
	}
	return 1
}

// refFunc computes a workload's answer over records in memory and returns
// a function that hands it over as an answer (not timed).
type refFunc func(recs []arrow.RecordBatch) (func() answer, error)

var baseMs = nexmark.DefaultBaseTime().UnixMilli()

func checksumWorkload(name, what string, cols []colSum, inner string, stream func(s *engine.Stream) *engine.Stream) workload {
	return workload{
		name:   name,
		what:   what,
		input:  nexmarkBids,
		stream: func(src engine.Source) *engine.Stream { return stream(engine.ReadStream(src)) },
		mode:   engine.Append,
		sink:   func(*config) resultSink { return newChecksumSink(cols, baseMs) },
		sql:    func(*config) string { return checksumSQL(inner, cols, baseMs) },
		scan:   func(*config) (func(*sql.Rows) error, func() answer) { return scanChecksum(cols) },
	}
}

func col(name string) batch.Named { return batch.As(batch.Col(name), name) }

// workloads returns every workload, in the order they run.
func workloads() []workload {
	q0cols := []colSum{{"auction", kInt}, {"bidder", kInt}, {"price", kInt}, {"channel", kStr}, {"url", kStr}, {"date_time", kTime}, {"extra", kStr}}
	q1cols := []colSum{{"auction", kInt}, {"bidder", kInt}, {"price", kFloat}, {"date_time", kTime}, {"extra", kStr}}
	q2cols := []colSum{{"auction", kInt}, {"price", kInt}}
	out := []workload{
		checksumWorkload("q0", "pass-through of every bid column", q0cols,
			"SELECT auction, bidder, price, channel, url, date_time, extra FROM bids",
			func(s *engine.Stream) *engine.Stream {
				return s.Select(col("auction"), col("bidder"), col("price"), col("channel"), col("url"), col("date_time"), col("extra"))
			}),
		checksumWorkload("q1", "currency conversion: 0.908 * price (float64)", q1cols,
			"SELECT auction, bidder, 0.908::DOUBLE * price AS price, date_time, extra FROM bids",
			func(s *engine.Stream) *engine.Stream {
				return s.Select(col("auction"), col("bidder"), batch.As(batch.Mul(batch.Lit(0.908), batch.Col("price")), "price"), col("date_time"), col("extra"))
			}),
		checksumWorkload("q2", "selection: auction % 123 = 0", q2cols,
			"SELECT auction, price FROM bids WHERE auction % 123 = 0",
			func(s *engine.Stream) *engine.Stream {
				return s.Where(batch.Eq(batch.Mod(batch.Col("auction"), batch.Lit(123)), batch.Lit(0))).Select(col("auction"), col("price"))
			}),
	}
	joins := joinWorkloads() // q3, q4, q6, q7, q8
	out = append(out, joins[:2]...)
	out = append(out, []workload{
		{
			name:  "q5",
			what:  "hot items: bids per auction over sliding 10s/2s windows, top auctions per window",
			input: nexmarkBids,
			// Both steps in the engine: bids per auction per window, then
			// the auctions with the most bids of each window (ties kept),
			// each window emitted once when the watermark closes it.
			stream: func(src engine.Source) *engine.Stream {
				return engine.ReadStream(src).WithWatermark("date_time", 0).
					GroupByWindow(engine.SlidingWindow("date_time", 10*time.Second, 2*time.Second), "auction").ID("q5").
					Agg(batch.CountRows().As("bids")).
					GroupBy("window_start", "window_end").ID("q5-top").Top(1, "bids", engine.Desc)
			},
			mode: engine.Append,
			sink: func(*config) resultSink {
				return newWindowSink("auction", "bids", hotFromTop)
			},
			sql: func(*config) string {
				return `WITH counts AS (
  SELECT (epoch_ms(date_time) // 2000) * 2000 - r.k * 2000 AS ws, auction, count(*) AS c
  FROM bids, range(0, 5) r(k) GROUP BY ALL
), ranked AS (SELECT ws, auction, c, max(c) OVER (PARTITION BY ws) AS m FROM counts)
SELECT ws, max(c)::BIGINT, count(*)::BIGINT, sum(auction)::BIGINT FROM ranked WHERE c = m
  AND ws + 10000 <= (SELECT max(epoch_ms(date_time)) FROM bids) -- append: the windows the final watermark closed
GROUP BY ws`
			},
			scan: func(*config) (func(*sql.Rows) error, func() answer) {
				h := hotItems{}
				return func(rs *sql.Rows) error {
					var ws int64
					var v [3]int64
					if err := rs.Scan(&ws, &v[0], &v[1], &v[2]); err != nil {
						return err
					}
					h[ws] = v
					return nil
				}, func() answer { return h }
			},
		},
	}...)
	out = append(out, joins[2:]...)
	return append(out, []workload{
		{
			name:  "q7-max",
			what:  "highest bid, first half: max price per tumbling 10s window (update mode, no join back to the bids; q7 is the whole query)",
			input: nexmarkBids,
			stream: func(src engine.Source) *engine.Stream {
				return engine.ReadStream(src).WithWatermark("date_time", 0).
					GroupByWindow(engine.TumblingWindow("date_time", 10*time.Second)).ID("q7-max").
					Agg(batch.Max(batch.Col("price")).As("max_price"))
			},
			mode: engine.Update,
			sink: func(*config) resultSink { return newWindowSink("", "max_price", maxPerWindow) },
			sql: func(*config) string {
				return "SELECT (epoch_ms(date_time) // 10000) * 10000 AS ws, max(price)::BIGINT FROM bids GROUP BY ws"
			},
			scan: func(*config) (func(*sql.Rows) error, func() answer) {
				m := maxPrices{}
				return func(rs *sql.Rows) error {
					var ws, p int64
					if err := rs.Scan(&ws, &p); err != nil {
						return err
					}
					m[ws] = [3]int64{p}
					return nil
				}, func() answer { return m }
			},
		},
		{
			name:  "agg",
			what:  "settlement: sum and count of amount_cents per merchant (rate source keys)",
			input: payments,
			stream: func(src engine.Source) *engine.Stream {
				return engine.ReadStream(src).GroupBy("key").ID("settlement").
					Agg(batch.Sum(batch.Col("amount_cents")).As("total_cents"), batch.CountRows().As("payments"))
			},
			mode: engine.Update,
			sink: func(*config) resultSink { return newTotalsSink("key", "total_cents", "payments") },
			sql: func(*config) string {
				return "SELECT key, sum(amount_cents)::BIGINT, count(*)::BIGINT FROM payments GROUP BY key"
			},
			scan:  func(*config) (func(*sql.Rows) error, func() answer) { return scanTotals[string]() },
			goRef: goMapTotals,
		},
		{
			name:   "kernel",
			what:   "group-by kernel alone: kernel.GroupBy sum and count of amount_cents per int64 merchant id, one goroutine",
			input:  intPayments,
			sql:    intTotalsSQL,
			scan:   func(*config) (func(*sql.Rows) error, func() answer) { return scanTotals[int64]() },
			goRef:  goMapInt64Totals,
			kernel: kernelTotals,
		},
		{
			name:  "agg-int64",
			what:  "settlement over the kernel's data: sum and count of amount_cents per int64 merchant id",
			input: intPayments,
			stream: func(src engine.Source) *engine.Stream {
				return engine.ReadStream(src).GroupBy("k").ID("settlement-int64").Agg(kernelAggs()...)
			},
			mode:  engine.Update,
			sink:  func(*config) resultSink { return newTotalsSink("k", "total_cents", "payments") },
			sql:   intTotalsSQL,
			scan:  func(*config) (func(*sql.Rows) error, func() answer) { return scanTotals[int64]() },
			goRef: goMapInt64Totals,
		},
		{
			name:  "agg-int64-pebble",
			what:  "agg-int64 with the state on the pebble backend (statestore/pebblestore) instead of in memory",
			input: intPayments,
			stream: func(src engine.Source) *engine.Stream {
				return engine.ReadStream(src).GroupBy("k").ID("settlement-int64").Agg(kernelAggs()...)
			},
			mode:   engine.Update,
			sink:   func(*config) resultSink { return newTotalsSink("k", "total_cents", "payments") },
			sql:    intTotalsSQL,
			scan:   func(*config) (func(*sql.Rows) error, func() answer) { return scanTotals[int64]() },
			goRef:  goMapInt64Totals,
			pebble: true,
		},
	}...)
}

func intTotalsSQL(*config) string {
	return "SELECT k, sum(amount_cents)::BIGINT, count(*)::BIGINT FROM int_payments GROUP BY k"
}

// scanTotals reads DuckDB's (key, sum, count) rows.
func scanTotals[K comparable]() (func(*sql.Rows) error, func() answer) {
	g := totalsBy[K]{}
	return func(rs *sql.Rows) error {
		var k K
		var t totals
		if err := rs.Scan(&k, &t.sum, &t.count); err != nil {
			return err
		}
		g[k] = t
		return nil
	}, func() answer { return g }
}

// goMapTotals is the plain-Go reference of the settlement aggregation: one
// map lookup per row. The map is the result; the returned function copies
// it into an answer.
func goMapTotals(recs []arrow.RecordBatch) (func() answer, error) {
	type acc struct{ sum, count int64 }
	m := make(map[string]*acc)
	for _, rec := range recs {
		keys := rec.Column(3).(*array.String)
		amounts := rec.Column(4).(*array.Int64).Int64Values()
		for i, amt := range amounts {
			a := m[keys.Value(i)]
			if a == nil {
				a = &acc{}
				m[string([]byte(keys.Value(i)))] = a
			}
			a.sum += amt
			a.count++
		}
	}
	return func() answer {
		out := make(groupTotals, len(m))
		for k, a := range m {
			out[k] = totals{sum: a.sum, count: a.count}
		}
		return out
	}, nil
}

// newSource returns a fresh source of the workload's input and the number
// of events it holds (Nexmark event numbers, or payment rows).
func newSource(c *config, in input) (engine.Source, int64, error) {
	switch in {
	case nexmarkBids:
		s, err := nexmark.New(nexmark.WithBidsOnly(), nexmark.WithEventsPerSecond(c.eventRate), nexmark.WithTotalEvents(c.events), nexmark.WithMaxEventsPerTrigger(c.batchEvents))
		return s, c.events, err
	case nexmarkEvents:
		s, err := nexmark.New(nexmark.WithEventsPerSecond(c.eventRate), nexmark.WithTotalEvents(c.events), nexmark.WithMaxEventsPerTrigger(c.batchEvents))
		return s, c.events, err
	case payments:
		// The rate source is clock-driven: a clock that stands at the
		// start while New runs and then jumps rows/1e6 seconds later
		// makes exactly c.rows rows available, so AvailableNow ends.
		now := rate.DefaultStartTime()
		s, err := rate.New(rate.WithKeys(c.merchants), rate.WithRowsPerSecond(1_000_000),
			rate.WithMaxRowsPerTrigger(c.batchRows), rate.WithClock(func() time.Time { return now }))
		now = now.Add(time.Duration(c.rows) * time.Microsecond)
		return s, c.rows, err
	case intPayments:
		return newIntPaySource(c.rows, c.merchants, c.batchRows, inputChunkFor(c, in), c.denseIDs), c.rows, nil
	}
	return nil, 0, fmt.Errorf("input %d", in)
}

// inputChunk is how many event numbers (or rows) one input record covers.
const inputChunk = 64 * 1024

// inputChunkFor is the records' size: inputChunk, or a batch if smaller,
// so a preloaded input still makes several batches; for the kernel's input,
// one batch (-batch-rows), the records the kernel is fed.
func inputChunkFor(c *config, in input) int64 {
	switch in {
	case intPayments:
		return c.batchRows
	case payments:
		return min(inputChunk, c.batchRows)
	}
	return min(inputChunk, c.batchEvents)
}

// inputRecords returns an iterator over the whole input as records (nil at
// the end), generated by the same source code the engine reads.
func inputRecords(ctx context.Context, c *config, in input) (func() arrow.RecordBatch, error) {
	src, total, err := newSource(c, in)
	if err != nil {
		return nil, err
	}
	chunk := inputChunkFor(c, in)
	var next int64
	switch s := src.(type) {
	case *nexmark.Source:
		return func() arrow.RecordBatch {
			if next >= total {
				return nil
			}
			end := min(next+chunk, total)
			var rec arrow.RecordBatch
			if in == nexmarkEvents {
				rec = s.EventRecord(next, end)
			} else {
				rec = s.BidRecord(next, end)
			}
			next = end
			return rec
		}, nil
	case *intPaySource:
		return func() arrow.RecordBatch {
			if next >= total {
				return nil
			}
			end := min(next+chunk, total)
			rec := s.record(next, end)
			next = end
			return rec
		}, nil
	case *rate.Source:
		// Read the rate source through its contract, one chunk at a time.
		return func() arrow.RecordBatch {
			if next >= total {
				return nil
			}
			end := min(next+chunk, total)
			var out arrow.RecordBatch
			_ = s.Read(ctx, rate.EncodeOffset(next), rate.EncodeOffset(end), func(rec arrow.RecordBatch) error {
				rec.Retain()
				out = rec
				return nil
			})
			next = end
			return out
		}, nil
	}
	return nil, fmt.Errorf("input %d: source %T", in, src)
}
