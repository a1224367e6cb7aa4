// Command fraud scores payments for fraud: payments from a Kafka topic are
// enriched with customer profiles from a compacted topic (a stream-table
// join on customer id), and the enriched payments feed two queries:
//
//   - alerts: a per-card aggregate over 10-minute windows sliding every 5
//     (payments, sum, distinct merchants), checked against rules; every
//     window that breaks one becomes an alert in a transactional Kafka
//     topic, once;
//   - blocks: the card-block rule of examples/cardblock, "3 declined
//     payments on one card within 10 minutes → block the card", a processor
//     whose state keeps each card's recent declines and whose event-time
//     timer expires them; every block is an intent in a transactional Kafka
//     topic, once, for the outbox (package outbox) to POST.
//
// Each query has its own checkpoint under -checkpoint (alerts/ and
// blocks/); they run side by side in the process and stop together.
//
// A payment is a JSON value
//
//	{"payment_id": "p-…", "card_id": "c-…", "customer_id": "u-…", "merchant_id": "m-…", "amount_cents": 1234,
//	 "status": "approved", "ts": "2026-11-30T10:00:00.123Z"}
//
// (status "declined" for a declined payment; a payment without status
// counts as approved), a profile, keyed by customer id, is
//
//	{"segment": "retail", "country": "FR"}
//
// (a tombstone, a null value, deletes the profile), an alert, keyed by
// card id, is
//
//	{"card_id": "c-…", "customer_id": "u-…", "segment": "retail", "window_start": "…", "window_end": "…",
//	 "payments": 9, "total_cents": 412000, "merchants": 7, "too_many": true, "too_much": true, "too_spread": true}
//
// and a block intent (cardblock.Block), keyed by card id, is
//
//	{"id": "block/c-…/<first decline, Unix ms>", "card_id": "c-…", "declines": 3, "first_decline": "…",
//	 "last_decline": "…", "reason": "3 declined payments within 10m0s"}
//
//	fraud [-brokers host:port,…] [-checkpoint DIR] [-payments-topic payments] [-profiles-topic profiles]
//	      [-alerts-topic alerts] [-blocks-topic blocks] [-outbox-url URL] [-trigger 1s] [-generate N]
//	      [-cards C] [-customers U] [-max-payments 8] [-max-total-cents 300000] [-max-merchants 6]
//	      [-block-declines 3] [-block-window 10m]
//
// With -brokers empty it starts the embedded Kafka (kfake) in-process.
// -generate produces N payments (and a profile per customer, some then
// deleted) first. It stops cleanly on SIGTERM.
//
// With -outbox-url the program also runs an outbox worker (checkpoint
// outbox/ under -checkpoint) that POSTs each committed block intent to the
// URL with an Idempotency-Key derived from its id: beside the queries
// under a continuous trigger, after them under once or available-now
// (it then exits once every intent is delivered). Without it, run the
// worker as its own process:
//
//	onceflow outbox --brokers host:port --topic blocks --checkpoint DIR --endpoint URL
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/cardblock"
	"github.com/onceflow/onceflow/examples/internal/cli"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/outbox"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

var _ engine.SinkPosition = (*kafkasink.Sink)(nil)

func main() { cli.Main("fraud", run) }

// PaymentSchema is a payment's JSON value.
var PaymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "card_id", Type: arrow.BinaryTypes.String},
	{Name: "customer_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
}, nil)

// ProfileSchema is a profile's JSON value; every field is nullable, as a
// tombstone reads as a row of nulls.
var ProfileSchema = arrow.NewSchema([]arrow.Field{
	{Name: "segment", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "country", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// AlertColumns are the columns of an alert's JSON value.
var AlertColumns = []string{"card_id", "customer_id", "segment", "window_start", "window_end", "payments", "total_cents", "merchants", "too_many", "too_much", "too_spread"}

// Delay is the watermark's delay on payment time.
const Delay = 2 * time.Minute

// Declined is the status of a declined payment.
const Declined = "declined"

// BlockRule is the card-block rule the command runs unless told otherwise:
// 3 declined payments on one card within 10 minutes.
var BlockRule = cardblock.Rule{Declines: 3, Window: 10 * time.Minute, StatusCol: "status", Declined: Declined}

func run(ctx context.Context, c *cli.Command) error {
	fs := c.FlagSet()
	brokers := fs.String("brokers", "", "Kafka brokers, host:port,…; empty starts the embedded Kafka")
	paymentsTopic := fs.String("payments-topic", "payments", "topic the payments arrive in")
	profilesTopic := fs.String("profiles-topic", "profiles", "compacted topic of customer profiles, keyed by customer id")
	alertsTopic := fs.String("alerts-topic", "alerts", "topic the alerts go to")
	blocksTopic := fs.String("blocks-topic", "blocks", "topic the card-block intents go to (the outbox reads it)")
	outboxURL := fs.String("outbox-url", "", "run an outbox worker in this program that POSTs each committed block intent to `URL` (empty: none; run onceflow outbox beside it)")
	maxPerTrigger := fs.Int64("max-offsets-per-trigger", 0, "cap on payment offsets per batch (0: none)")
	cards := fs.Int("cards", 60, "distinct cards of generated payments")
	customers := fs.Int("customers", 25, "distinct customers of generated payments")
	rules := DefaultRules
	fs.Int64Var(&rules.MaxPayments, "max-payments", rules.MaxPayments, "rule: more than this many payments of a card in a window")
	fs.Int64Var(&rules.MaxTotalCents, "max-total-cents", rules.MaxTotalCents, "rule: more than this total of a card in a window")
	fs.Int64Var(&rules.MaxMerchants, "max-merchants", rules.MaxMerchants, "rule: more than this many merchants of a card in a window")
	block := BlockRule
	fs.IntVar(&block.Declines, "block-declines", block.Declines, "block rule: this many declined payments of a card …")
	fs.DurationVar(&block.Window, "block-window", block.Window, "block rule: … within this long")
	c.CheckpointFlag("fraud-checkpoint", "checkpoint directory or s3:// URL")
	c.TriggerFlag()
	c.GenerateFlags("also produce N random payments (and the customers' profiles) first")
	c.VerboseFlag("log the driver's steps")
	if err := c.Parse(); err != nil {
		return err
	}
	if block.Declines < 1 || block.Window <= 0 {
		return fmt.Errorf("-block-declines %d and -block-window %s must both be positive", block.Declines, block.Window)
	}
	addrs := splitList(*brokers)
	if len(addrs) == 0 {
		k, err := kafkadev.Start(ctx, kafkadev.Options{Topics: map[string]int32{*paymentsTopic: 4, *profilesTopic: 4, *alertsTopic: 4, *blocksTopic: 4}})
		if err != nil {
			return err
		}
		c.Defer(func() error { k.Close(); return nil })
		addrs = k.Addrs()
		fmt.Fprintf(os.Stderr, "fraud: embedded Kafka on %s\n", strings.Join(addrs, ","))
	}
	if c.Generate() > 0 {
		g := Generator{Payments: c.Generate(), Cards: *cards, Customers: *customers, Merchants: c.Merchants(), Seed: 1}
		if err := g.Produce(ctx, addrs, *paymentsTopic, *profilesTopic); err != nil {
			return err
		}
	}
	if err := c.OpenCheckpoint(ctx); err != nil {
		return err
	}
	if err := checkLayout(ctx, c.Checkpoint()); err != nil {
		return err
	}
	// Each query reads the topics with its own sources.
	sources := func() (pay, prof engine.Source, err error) {
		payOpts := []kafka.Option{kafka.WithBrokers(addrs...), kafka.WithTopics(*paymentsTopic), kafka.WithValueJSON(PaymentSchema), kafka.WithLogger(c.Logger())}
		if *maxPerTrigger > 0 {
			payOpts = append(payOpts, kafka.WithMaxOffsetsPerTrigger(*maxPerTrigger))
		}
		ps, err := kafka.New(payOpts...)
		if err != nil {
			return nil, nil, err
		}
		c.Defer(ps.Close)
		rs, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics(*profilesTopic), kafka.WithValueJSON(ProfileSchema), kafka.WithTombstones(), kafka.WithLogger(c.Logger()))
		if err != nil {
			return nil, nil, err
		}
		c.Defer(rs.Close)
		return ps, rs, nil
	}
	topicSink := func(topic, name string, columns ...string) (*kafkasink.Sink, error) {
		s, err := kafkasink.New(
			kafkasink.WithBrokers(addrs...),
			kafkasink.WithTopic(topic),
			kafkasink.WithName(name),
			kafkasink.WithKeyColumn("card_id"),
			kafkasink.WithValueJSON(columns...),
			kafkasink.WithLogger(c.Logger()),
		)
		if err != nil {
			return nil, err
		}
		c.Defer(s.Close)
		return s, nil
	}

	pay, prof, err := sources()
	if err != nil {
		return err
	}
	alerts, err := topicSink(*alertsTopic, "alerts", AlertColumns...)
	if err != nil {
		return err
	}
	qa, err := c.Query("alerts", storage.Sub(c.Checkpoint(), "alerts"), Stream(pay, prof, rules), alerts, func(p engine.Progress) string {
		return fmt.Sprintf("%d rows in, %d alerts out", p.NumInputRows, p.Sinks[0].NumOutputRows)
	}, engine.WithOutputMode(engine.Append))
	if err != nil {
		return err
	}

	pay, prof, err = sources()
	if err != nil {
		return err
	}
	blocks, err := topicSink(*blocksTopic, "blocks") // every column of cardblock.Block
	if err != nil {
		return err
	}
	qb, err := c.Query("blocks", storage.Sub(c.Checkpoint(), "blocks"), Blocks(pay, prof, block), blocks, func(p engine.Progress) string {
		return fmt.Sprintf("%d rows in, %d block intents out", p.NumInputRows, p.Sinks[0].NumOutputRows)
	}, engine.WithOutputMode(engine.Append))
	if err != nil {
		return err
	}

	if *outboxURL == "" {
		return c.RunQueries(ctx, qa, qb)
	}
	ob := outboxRun{
		stderr: os.Stderr,
		opts: []outbox.Option{
			outbox.WithBrokers(addrs...), outbox.WithTopic(*blocksTopic),
			outbox.WithCheckpoint(storage.Sub(c.Checkpoint(), "outbox")), outbox.WithEndpoint(*outboxURL),
		},
	}
	return ob.run(ctx, c, qa, qb)
}

// checkLayout refuses a checkpoint written when the command ran one query
// at its root: the queries now live in alerts/ and blocks/.
func checkLayout(ctx context.Context, cp storage.Store) error {
	old, err := cp.List(ctx, "offsets/")
	if err != nil {
		return err
	}
	if len(old) > 0 {
		return fmt.Errorf("checkpoint %s holds a query at its root (fraud before the block rule); its queries now live in alerts/ and blocks/: give a new -checkpoint", cp.URL())
	}
	return nil
}

// Profiles reads the profiles topic as a table keyed by customer id (the
// record key); a tombstone (segment null) deletes the customer's profile.
func Profiles(src engine.Source) *engine.Table {
	return engine.ChangelogTable(engine.ReadStream(src).Select(
		batch.As(batch.Cast(batch.Col("key"), arrow.BinaryTypes.String), "customer_id"),
		batch.As(batch.Col("segment"), "segment"),
		batch.As(batch.Col("country"), "country"),
	), "customer_id").DeleteWhen(batch.IsNull(batch.Col("segment")))
}

// Enriched is the payments with their customer's profile (null segment and
// country for a customer without one).
func Enriched(payments engine.Source, profiles engine.Source) *engine.Stream {
	return engine.ReadStream(payments).
		Select(
			batch.As(batch.Col("payment_id"), "payment_id"),
			batch.As(batch.Col("card_id"), "card_id"),
			batch.As(batch.Col("customer_id"), "customer_id"),
			batch.As(batch.Col("merchant_id"), "merchant_id"),
			batch.As(batch.Col("amount_cents"), "amount_cents"),
			batch.As(batch.Col("status"), "status"),
			batch.As(batch.Col("ts"), "ts"),
		).
		WithWatermark("ts", Delay).
		JoinTable(Profiles(profiles), engine.LeftOuter, engine.On("customer_id", "customer_id")).ID("profiles").
		Drop("right_customer_id").
		WithColumn("customer_id", batch.Col("left_customer_id")).
		Drop("left_customer_id")
}

// Stream is the alerts query: enrich, aggregate per card, apply the rules.
func Stream(payments, profiles engine.Source, r RuleSet) *engine.Stream {
	return Rules(PerCard(Enriched(payments, profiles)), r)
}

// Blocks is the blocks query: enrich, then the card-block rule of
// examples/cardblock on the enriched payments (its processor, operator id
// "cardblock", keyed by card). Its rows are cardblock.Block intents.
func Blocks(payments, profiles engine.Source, r cardblock.Rule) *engine.Stream {
	return cardblock.AddRule(Enriched(payments, profiles), r)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
