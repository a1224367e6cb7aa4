package main

import (
	"time"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
)

// RuleSet holds the thresholds of the per-card rules: a card is flagged in
// a window when it made more than MaxPayments payments, spent more than
// MaxTotalCents, or paid more than MaxMerchants distinct merchants.
type RuleSet struct {
	MaxPayments   int64
	MaxTotalCents int64
	MaxMerchants  int64
}

// DefaultRules are the thresholds the command uses unless told otherwise.
var DefaultRules = RuleSet{MaxPayments: 8, MaxTotalCents: 300_000, MaxMerchants: 6}

// Window is the rules' event-time window: 10 minutes, sliding every 5.
var Window = engine.SlidingWindow("ts", 10*time.Minute, 5*time.Minute)

// PerCard aggregates enriched payments per card (with its customer and
// segment, which a card never changes) over Window: the payments, their
// sum and the distinct merchants. Its output is one row per card and
// window, once the watermark closes the window.
func PerCard(enriched *engine.Stream) *engine.Stream {
	return enriched.
		GroupByWindow(Window, "card_id", "customer_id", "segment").ID("per-card").
		Agg(
			batch.CountRows().As("payments"),
			batch.Sum(batch.Col("amount_cents")).As("total_cents"),
			batch.CountDistinct(batch.Col("merchant_id")).As("merchants"),
		)
}

// Rules is the seam where rules join the pipeline: it takes the per-card
// window aggregates (PerCard's output), adds one boolean column per rule
// and keeps the rows that break at least one. Another rule (or a consumer
// such as a card-block processor) adds its column here, or reads Rules'
// output.
func Rules(perCard *engine.Stream, r RuleSet) *engine.Stream {
	return perCard.
		WithColumn("too_many", batch.Gt(batch.Col("payments"), batch.Lit(r.MaxPayments))).
		WithColumn("too_much", batch.Gt(batch.Col("total_cents"), batch.Lit(r.MaxTotalCents))).
		WithColumn("too_spread", batch.Gt(batch.Col("merchants"), batch.Lit(r.MaxMerchants))).
		Where(batch.Or(batch.Col("too_many"), batch.Or(batch.Col("too_much"), batch.Col("too_spread"))))
}
