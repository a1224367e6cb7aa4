package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Payment is one generated payment.
type Payment struct {
	PaymentID   string `json:"payment_id"`
	CardID      string `json:"card_id"`
	CustomerID  string `json:"customer_id"`
	MerchantID  string `json:"merchant_id"`
	AmountCents int64  `json:"amount_cents"`
	Status      string `json:"status"`
	TS          string `json:"ts"`
}

// Profile is one customer's profile (nil: deleted).
type Profile struct {
	Segment string `json:"segment"`
	Country string `json:"country"`
}

// Generator draws payments and profiles from Seed: card c-i belongs to
// customer u-(i % Customers); payments are 1.5 s apart in event time from
// 2026-11-30T10:00Z, with bursts of one card at one merchant after another
// so that some windows break the rules; a payment of a burst is declined
// one time in three (a stolen card being tried), any other one time in
// twenty, so that some cards reach the block rule; every customer has a
// profile and every fifth is then deleted (a tombstone).
type Generator struct {
	Payments, Cards, Customers, Merchants int
	Seed                                  uint64
}

// Base is the event time of the first generated payment.
var Base = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// MakePayments returns the payments from index from, n of them.
func (g Generator) MakePayments(from, n int) []Payment {
	rng := rand.New(rand.NewPCG(g.Seed, uint64(from)))
	out := make([]Payment, 0, n)
	burst, card, declines := 0, 0, 20
	for i := from; i < from+n; i++ {
		if burst == 0 {
			card = rng.IntN(max(g.Cards, 1))
			burst, declines = 1, 20
			if rng.IntN(10) == 0 {
				burst, declines = 6+rng.IntN(10), 3
			}
		}
		burst--
		status := "approved"
		if rng.IntN(declines) == 0 {
			status = Declined
		}
		out = append(out, Payment{
			PaymentID:   fmt.Sprintf("p-%d", i),
			CardID:      fmt.Sprintf("c-%d", card),
			CustomerID:  fmt.Sprintf("u-%d", card%max(g.Customers, 1)),
			MerchantID:  fmt.Sprintf("m-%d", rng.IntN(max(g.Merchants, 1))),
			AmountCents: 100 + rng.Int64N(60_000),
			Status:      status,
			TS:          Base.Add(time.Duration(i) * 1500 * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
		})
	}
	return out
}

// Profiles returns each customer's final profile (nil: deleted) and the
// records that produce it, in order.
func (g Generator) Profiles() (map[string]*Profile, []*kgo.Record) {
	segments := []string{"retail", "premium", "business"}
	final := map[string]*Profile{}
	var recs []*kgo.Record
	for u := range g.Customers {
		id := fmt.Sprintf("u-%d", u)
		p := &Profile{Segment: segments[u%len(segments)], Country: []string{"FR", "DE", "NL", "PT"}[u%4]}
		v, _ := json.Marshal(p)
		recs = append(recs, &kgo.Record{Key: []byte(id), Value: v})
		final[id] = p
	}
	for u := 0; u < g.Customers; u += 5 {
		id := fmt.Sprintf("u-%d", u)
		recs = append(recs, &kgo.Record{Key: []byte(id)}) // a tombstone
		final[id] = nil
	}
	return final, recs
}

// Produce writes the profiles, then the payments (keyed by card), and
// waits until every record is acknowledged.
func (g Generator) Produce(ctx context.Context, brokers []string, paymentsTopic, profilesTopic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, profs := g.Profiles()
	for _, r := range profs {
		r.Topic = profilesTopic
	}
	if err := cl.ProduceSync(ctx, profs...).FirstErr(); err != nil {
		return fmt.Errorf("produce profiles to %s: %w", profilesTopic, err)
	}
	return g.ProducePayments(ctx, cl, paymentsTopic, 0, g.Payments)
}

// ProducePayments writes payments [from, from+n) to topic.
func (g Generator) ProducePayments(ctx context.Context, cl *kgo.Client, topic string, from, n int) error {
	recs := make([]*kgo.Record, 0, n)
	for _, p := range g.MakePayments(from, n) {
		v, err := json.Marshal(p)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(p.CardID), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce payments to %s: %w", topic, err)
	}
	return nil
}
