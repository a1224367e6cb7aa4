package nexmark_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/source/nexmark"
)

func collect(t *testing.T, s *nexmark.Source, from, to int64) []string {
	t.Helper()
	var rows []string
	err := s.Read(context.Background(), nexmark.EncodeOffset(from), nexmark.EncodeOffset(to), func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			row := ""
			for c := 0; c < int(rec.NumCols()); c++ {
				row += rec.Column(c).ValueStr(i) + "|"
			}
			rows = append(rows, row)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestReplayIsIdentical(t *testing.T) {
	for _, bidsOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "events", true: "bids"}[bidsOnly], func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			opts := []nexmark.Option{nexmark.WithAllocator(mem), nexmark.WithBatchSize(333)}
			if bidsOnly {
				opts = append(opts, nexmark.WithBidsOnly())
			}
			a, err := nexmark.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			b, err := nexmark.New(append(opts, nexmark.WithBatchSize(7))...)
			if err != nil {
				t.Fatal(err)
			}
			whole := collect(t, a, 0, 2000)
			var parts []string
			for _, r := range [][2]int64{{0, 1}, {1, 777}, {777, 1234}, {1234, 2000}} {
				parts = append(parts, collect(t, b, r[0], r[1])...)
			}
			if len(whole) != len(parts) {
				t.Fatalf("whole range %d rows, pieces %d", len(whole), len(parts))
			}
			for i := range whole {
				if whole[i] != parts[i] {
					t.Fatalf("row %d differs:\n%s\n%s", i, whole[i], parts[i])
				}
			}
			want := int64(2000)
			if bidsOnly {
				want = nexmark.Bids(0, 2000)
			}
			if int64(len(whole)) != want {
				t.Fatalf("got %d rows, want %d", len(whole), want)
			}
		})
	}
}

func TestBidsCount(t *testing.T) {
	for _, r := range [][2]int64{{0, 0}, {0, 1}, {0, 4}, {0, 5}, {0, 50}, {3, 101}, {49, 1051}} {
		var want int64
		for n := r[0]; n < r[1]; n++ {
			if nexmark.TypeOf(n) == nexmark.BidEvent {
				want++
			}
		}
		if got := nexmark.Bids(r[0], r[1]); got != want {
			t.Errorf("Bids(%d, %d) = %d, want %d", r[0], r[1], got, want)
		}
	}
}

// TestDistributions checks the generator's shape against Nexmark's design
// over 100k events.
func TestDistributions(t *testing.T) {
	g := nexmark.NewGenerator(nexmark.DefaultBaseTime(), 100_000) // 100µs
	var e nexmark.Event
	counts := map[nexmark.EventType]int{}
	hotChannel, bids := 0, 0
	var priceMin, priceMax int64 = 1 << 62, 0
	var extra int
	for n := int64(0); n < 100_000; n++ {
		g.Fill(n, &e)
		counts[e.Type]++
		if e.Type != nexmark.BidEvent {
			continue
		}
		bids++
		priceMin, priceMax = min(priceMin, e.Price), max(priceMax, e.Price)
		if len(e.Channel) < 9 || string(e.Channel[:8]) != "channel-" {
			hotChannel++
		}
		extra += len(e.Extra)
		if e.Auction < nexmark.FirstAuctionID || e.Bidder < nexmark.FirstPersonID {
			t.Fatalf("event %d: auction %d bidder %d below the first ids", n, e.Auction, e.Bidder)
		}
	}
	if counts[nexmark.PersonEvent] != 2000 || counts[nexmark.AuctionEvent] != 6000 || counts[nexmark.BidEvent] != 92000 {
		t.Errorf("kinds %v, want 2000 people, 6000 auctions, 92000 bids", counts)
	}
	if f := float64(hotChannel) / float64(bids); f < 0.45 || f > 0.55 {
		t.Errorf("hot channel share %.3f, want about 1/2", f)
	}
	if priceMin < 100 || priceMax > 100_000_000 {
		t.Errorf("prices %d..%d outside 100..1e8 cents", priceMin, priceMax)
	}
	if avg := float64(extra) / float64(bids); avg < 60 || avg > 76 {
		t.Errorf("average bid extra %.1f bytes, want about 68", avg)
	}
	if got, want := g.EventTime(12345), nexmark.DefaultBaseTime().UnixMilli()+1234; got != want {
		t.Errorf("EventTime(12345) = %d, want %d", got, want)
	}
}

func TestLatestOffsetBounded(t *testing.T) {
	ctx := context.Background()
	s, err := nexmark.New(nexmark.WithTotalEvents(2500), nexmark.WithMaxEventsPerTrigger(1000))
	if err != nil {
		t.Fatal(err)
	}
	off := nexmark.EncodeOffset(0)
	var ends []string
	for range 5 {
		next, err := s.LatestOffset(ctx, off)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, string(next))
		off = next
	}
	want := []string{`{"events":1000}`, `{"events":2000}`, `{"events":2500}`, `{"events":2500}`, `{"events":2500}`}
	for i := range want {
		if ends[i] != want[i] {
			t.Fatalf("ends %v, want %v", ends, want)
		}
	}
	err = s.Read(ctx, nexmark.EncodeOffset(0), nexmark.EncodeOffset(2501), func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, nexmark.ErrBadOffset) {
		t.Fatalf("read past the total: %v, want ErrBadOffset", err)
	}
	for _, bad := range []string{`{}`, `{"events":-1}`, `7`, `{"rows":1}`} {
		if _, err := s.LatestOffset(ctx, json.RawMessage(bad)); !errors.Is(err, nexmark.ErrBadOffset) {
			t.Errorf("offset %s: %v, want ErrBadOffset", bad, err)
		}
	}
}

func TestJSONMatchesRecord(t *testing.T) {
	s, err := nexmark.New(nexmark.WithBidsOnly())
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	err = s.Generator().WriteJSON(context.Background(), 0, 100, true, func(_ int64, v []byte) error {
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		got = append(got, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var prices []int64
	err = s.Read(context.Background(), nexmark.EncodeOffset(0), nexmark.EncodeOffset(100), func(rec arrow.RecordBatch) error {
		prices = append(prices, rec.Column(2).(*array.Int64).Int64Values()...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(prices) || len(got) != int(nexmark.Bids(0, 100)) {
		t.Fatalf("%d JSON bids, %d record bids, want %d", len(got), len(prices), nexmark.Bids(0, 100))
	}
	for i, m := range got {
		if int64(m["price"].(float64)) != prices[i] {
			t.Fatalf("bid %d: JSON price %v, record %d", i, m["price"], prices[i])
		}
	}
}

func BenchmarkBidRecord(b *testing.B) {
	s, err := nexmark.New(nexmark.WithBidsOnly())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rec := s.BidRecord(0, 65536)
		rec.Release()
	}
	b.ReportMetric(float64(b.N)*65536/b.Elapsed().Seconds(), "events/s")
}
