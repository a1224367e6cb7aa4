// Package cardblock is the rule "3 declined payments on one card within 10
// minutes → POST a block request", written as an engine.Processor: the
// processor keeps each card's recent declines in state, an event-time
// timer expires them, and every block is an intent row for the outbox
// (package outbox) to deliver, never an HTTP call from the query.
//
// AddRule adds the rule to any payments stream (examples/fraud runs it on
// its enriched payments, as a second query beside its alerts); the test
// runs it end to end: payments → rule → transactional Kafka sink → outbox
// worker → an HTTP receiver that deduplicates by Idempotency-Key. It is
// example code, not part of onceflow's API.
package cardblock

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
)

// Rule is the rule's configuration.
type Rule struct {
	// Declines in Window on one card that trigger a block. Default 3 in
	// 10 minutes.
	Declines int
	Window   time.Duration
	// Columns of the payments stream. Defaults: card_id, status, ts.
	CardCol, StatusCol, TsCol string
	// Declined is the status value of a declined payment. Default
	// "declined".
	Declined string
}

func (r Rule) withDefaults() Rule {
	r.Declines = cmp.Or(r.Declines, 3)
	r.Window = cmp.Or(r.Window, 10*time.Minute)
	r.CardCol = cmp.Or(r.CardCol, "card_id")
	r.StatusCol = cmp.Or(r.StatusCol, "status")
	r.TsCol = cmp.Or(r.TsCol, "ts")
	r.Declined = cmp.Or(r.Declined, "declined")
	return r
}

// Block is the intent row the rule emits: the outbox POSTs it as JSON,
// with the Idempotency-Key derived from ID.
type Block struct {
	ID           string    `onceflow:"id"`
	CardID       string    `onceflow:"card_id"`
	Declines     int64     `onceflow:"declines"`
	FirstDecline time.Time `onceflow:"first_decline"`
	LastDecline  time.Time `onceflow:"last_decline"`
	Reason       string    `onceflow:"reason"`
}

// AddRule returns the block intents of payments, a stream with the rule's
// columns and a watermark on its time column (WithWatermark before it). The
// operator's id is "cardblock".
func AddRule(payments *engine.Stream, r Rule) *engine.Stream {
	r = r.withDefaults()
	return payments.
		Where(batch.Eq(batch.Col(r.StatusCol), batch.Lit(r.Declined))).
		GroupBy(r.CardCol).ID("cardblock").
		Process(NewProcessor(r)())
}

// NewProcessor returns a constructor of the rule's processor, for
// processortest or a query of your own (GroupBy the card column). It
// ignores the rows whose status is not Declined.
func NewProcessor(r Rule) func() engine.Processor {
	r = r.withDefaults()
	return func() engine.Processor { return &processor{rule: r} }
}

// processor keeps, per card, the times of its declines still inside the
// window and, once blocked, until when the card stays blocked (no second
// intent for the same run of declines).
type processor struct {
	rule     Rule
	declines *engine.ListState[time.Time]
	blocked  *engine.ValueState[time.Time]
}

func (p *processor) Init(s *engine.ProcessorSpec) error {
	s.Output(Block{})
	p.declines = engine.NewListState[time.Time](s, "declines")
	p.blocked = engine.NewValueState[time.Time](s, "blocked_until")
	return nil
}

// Handle adds the batch's declines of the card in event-time order and
// emits a block when Declines of them fall inside Window.
func (p *processor) Handle(k *engine.KeyContext, rows *engine.Rows) error {
	var ts []time.Time
	for i := range rows.Len() {
		st, err := rows.Value(i, p.rule.StatusCol)
		if err != nil {
			return err
		}
		if st != p.rule.Declined {
			continue
		}
		v, err := rows.Value(i, p.rule.TsCol)
		if err != nil {
			return err
		}
		t, ok := v.(time.Time)
		if !ok {
			return fmt.Errorf("cardblock: column %q holds %T, want a timestamp", p.rule.TsCol, v)
		}
		ts = append(ts, t)
	}
	slices.SortStableFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	list := p.declines.Get(k)
	until, blocked := p.blocked.Get(k)
	for _, t := range ts {
		list = append(list, t)
		// keep the declines within Window before t
		i := 0
		for i < len(list) && !list[i].After(t.Add(-p.rule.Window)) {
			i++
		}
		list = list[i:]
		k.RegisterTimer(engine.EventTime, t.Add(p.rule.Window))
		if blocked && t.Before(until) {
			continue
		}
		if len(list) >= p.rule.Declines {
			card := fmt.Sprint(k.Key().Values()[0])
			k.Emit(Block{
				ID:           fmt.Sprintf("block/%s/%d", card, list[0].UnixMilli()),
				CardID:       card,
				Declines:     int64(len(list)),
				FirstDecline: list[0],
				LastDecline:  t,
				Reason:       fmt.Sprintf("%d declined payments within %s", len(list), p.rule.Window),
			})
			until, blocked = t.Add(p.rule.Window), true
			p.blocked.Set(k, until)
		}
	}
	p.declines.Set(k, list)
	return nil
}

// OnTimer expires the declines the window no longer covers, and the block
// once it ends; a card with nothing left has no state.
func (p *processor) OnTimer(k *engine.KeyContext, t engine.Timer) error {
	list := p.declines.Get(k)
	i := 0
	for i < len(list) && !list[i].After(t.At.Add(-p.rule.Window)) {
		i++
	}
	p.declines.Set(k, list[i:])
	if until, ok := p.blocked.Get(k); ok && !until.After(t.At) {
		p.blocked.Clear(k)
	}
	return nil
}
