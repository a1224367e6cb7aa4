package engine_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/source/rate"
	"github.com/onceflow/onceflow/storage"
)

// The README's Go snippets, each verbatim (indented one tab) inside a
// function here, so they compile with the package's tests;
// TestReadmeSnippetsCompile fails when a snippet in the README is not
// found here, i.e. when one was edited without its compiled copy.

// readmeQuery is "A query in Go".
func readmeQuery(ctx context.Context, mySink engine.Sink) error {
	src, err := rate.New(rate.WithRowsPerSecond(10_000), rate.WithKeys(100))
	if err != nil {
		return err
	}
	cp, err := storage.Open(ctx, "/var/lib/onceflow/totals", nil) // or s3://bucket/prefix with s3store
	if err != nil {
		return err
	}
	defer cp.Close() // the caller owns and closes sources, sinks and stores
	stream := engine.ReadStream(src).
		Where(batch.Gt(batch.Col("amount_cents"), batch.Lit(int64(0)))).
		GroupBy("key").ID("totals").
		Agg(batch.Sum(batch.Col("amount_cents")).As("total_cents"), batch.CountRows().As("payments"))
	q, err := engine.NewQuery(stream,
		engine.WithName("totals"),
		engine.WithCheckpoint(cp),
		engine.WithSink(mySink), // any engine.Sink: filesink, postgres, kafkasink, foreachbatch
		engine.WithTrigger(engine.Every(time.Second)),
		engine.WithOutputMode(engine.Update))
	if err != nil {
		return err
	}
	return q.Run(ctx) // until ctx is cancelled, q.Stop(), or the trigger ends (Once, AvailableNow)
}

// readmeColumns is the WithColumn/Drop snippet.
func readmeColumns(orders engine.Source) *engine.Stream {
	stream := engine.ReadStream(orders).
		WithColumn("merchant_id", batch.Upper(batch.Col("merchant_id"))). // replaced in place
		Drop("raw").
		GroupBy("merchant_id").
		Agg(batch.Sum(batch.Mul(batch.Col("price_cents"), batch.Col("qty"))).As("revenue_cents"), // nulls skipped, overflow fails the batch
			batch.CountRows().PerBatch().As("orders_in_batch"))
	return stream
}

// readmeChain is "Several stateful steps: the operator chain".
func readmeChain(bids engine.Source, cp storage.Store, out engine.Sink) error {
	stream := engine.ReadStream(bids).
		WithWatermark("date_time", 2*time.Second).
		GroupByWindow(engine.SlidingWindow("date_time", 10*time.Second, 2*time.Second), "auction").ID("bids-per-auction").
		Agg(batch.CountRows().As("bids")).
		GroupBy("window_start", "window_end").ID("hot-auctions").
		Top(1, "bids", engine.Desc) // the auctions with the most bids per window, ties kept
	q, err := engine.NewQuery(stream, engine.WithCheckpoint(cp), engine.WithSink(out))
	if err != nil {
		return err
	}
	plan, err := q.Describe() // sources, steps, operators with ids and keys, output mode, sinks
	if err != nil {
		return err
	}
	fmt.Print(plan)
	return nil
}

// readmeEventTime is "Event time".
func readmeEventTime(src engine.Source, cp storage.Store, out, lateSink engine.Sink) (*engine.Query, error) {
	stream := engine.ReadStream(src).
		WithWatermark("ts", 10*time.Second). // max(event time) − 10 s
		GroupByWindow(engine.TumblingWindow("ts", time.Minute), "merchant_id").ID("per-minute").
		Agg(batch.Sum(batch.Col("amount_cents")).As("total_cents"))
	q, err := engine.NewQuery(stream, engine.WithOutputMode(engine.Append), engine.WithLateRows(lateSink),
		engine.WithCheckpoint(cp), engine.WithSink(out))
	return q, err
}

// readmeJoins is "Joins".
func readmeJoins(bidSrc, auctionSrc, profileSrc, paymentSrc engine.Source) (*engine.Stream, *engine.Stream) {
	bids := engine.ReadStream(bidSrc).WithWatermark("bid_ts", 10*time.Second)
	matched := engine.ReadStream(auctionSrc).WithWatermark("ts", 10*time.Second).
		Join(bids, engine.LeftOuter, engine.On("id", "auction"),
			engine.Within("ts", "bid_ts", 0, 10*time.Minute)). // bid_ts in [ts, ts+10m]
		ID("auction-bids")
	profiles := engine.ChangelogTable(engine.ReadStream(profileSrc), "customer_id").
		DeleteWhen(batch.IsNull(batch.Col("segment"))) // a tombstone
	enriched := engine.ReadStream(paymentSrc).
		JoinTable(profiles, engine.LeftOuter, engine.On("customer_id", "customer_id")).ID("profiles")
	return matched, enriched
}

// readmeProcess is "Processors".
func readmeProcess(payments engine.Source, rule engine.Processor) *engine.Stream {
	stream := engine.ReadStream(payments).
		WithWatermark("ts", time.Minute).
		GroupBy("card_id").ID("cardblock").
		Process(rule) // an engine.Processor: Init, Handle, OnTimer
	return stream
}

var (
	_ = readmeJoins
	_ = readmeProcess
	_ = readmeQuery
	_ = readmeColumns
	_ = readmeEventTime
	_ = readmeChain
)

func TestReadmeSnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("no Go snippet found in README.md")
	}
	for _, b := range blocks {
		var indented []string
		for _, line := range strings.Split(strings.TrimSuffix(b[1], "\n"), "\n") {
			if line != "" {
				line = "\t" + line
			}
			indented = append(indented, line)
		}
		if !strings.Contains(string(self), strings.Join(indented, "\n")+"\n") {
			t.Errorf("README snippet not compiled in engine/readme_test.go (copy it there, indented one tab, inside a function):\n%s", b[1])
		}
	}
}
