// Command fraud scores payments for fraud: payments from a Kafka topic are
// enriched with customer profiles from a compacted topic (a stream-table
// join on customer id), aggregated per card over 10-minute windows sliding
// every 5 (payments, sum, distinct merchants), checked against rules, and
// every window that breaks one becomes an alert in a transactional Kafka
// topic, once.
//
// A payment is a JSON value
//
//	{"payment_id": "p-…", "card_id": "c-…", "customer_id": "u-…", "merchant_id": "m-…", "amount_cents": 1234, "ts": "2026-11-30T10:00:00.123Z"}
//
// a profile, keyed by customer id, is
//
//	{"segment": "retail", "country": "FR"}
//
// (a tombstone, a null value, deletes the profile), and an alert, keyed by
// card id, is
//
//	{"card_id": "c-…", "customer_id": "u-…", "segment": "retail", "window_start": "…", "window_end": "…",
//	 "payments": 9, "total_cents": 412000, "merchants": 7, "too_many": true, "too_much": true, "too_spread": true}
//
//	fraud [-brokers host:port,…] [-checkpoint DIR] [-payments-topic payments] [-profiles-topic profiles]
//	      [-alerts-topic alerts] [-trigger 1s] [-generate N] [-cards C] [-customers U]
//	      [-max-payments 8] [-max-total-cents 300000] [-max-merchants 6]
//
// With -brokers empty it starts the embedded Kafka (kfake) in-process.
// -generate produces N payments (and a profile per customer, some then
// deleted) first. It stops cleanly on SIGTERM.
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
	"github.com/onceflow/onceflow/examples/internal/cli"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
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

func run(ctx context.Context, c *cli.Command) error {
	fs := c.FlagSet()
	brokers := fs.String("brokers", "", "Kafka brokers, host:port,…; empty starts the embedded Kafka")
	paymentsTopic := fs.String("payments-topic", "payments", "topic the payments arrive in")
	profilesTopic := fs.String("profiles-topic", "profiles", "compacted topic of customer profiles, keyed by customer id")
	alertsTopic := fs.String("alerts-topic", "alerts", "topic the alerts go to")
	maxPerTrigger := fs.Int64("max-offsets-per-trigger", 0, "cap on payment offsets per batch (0: none)")
	cards := fs.Int("cards", 60, "distinct cards of generated payments")
	customers := fs.Int("customers", 25, "distinct customers of generated payments")
	rules := DefaultRules
	fs.Int64Var(&rules.MaxPayments, "max-payments", rules.MaxPayments, "rule: more than this many payments of a card in a window")
	fs.Int64Var(&rules.MaxTotalCents, "max-total-cents", rules.MaxTotalCents, "rule: more than this total of a card in a window")
	fs.Int64Var(&rules.MaxMerchants, "max-merchants", rules.MaxMerchants, "rule: more than this many merchants of a card in a window")
	c.CheckpointFlag("fraud-checkpoint", "checkpoint directory or s3:// URL")
	c.TriggerFlag()
	c.GenerateFlags("also produce N random payments (and the customers' profiles) first")
	c.VerboseFlag("log the driver's steps")
	if err := c.Parse(); err != nil {
		return err
	}
	addrs := splitList(*brokers)
	if len(addrs) == 0 {
		k, err := kafkadev.Start(ctx, kafkadev.Options{Topics: map[string]int32{*paymentsTopic: 4, *profilesTopic: 4, *alertsTopic: 4}})
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
	payOpts := []kafka.Option{kafka.WithBrokers(addrs...), kafka.WithTopics(*paymentsTopic), kafka.WithValueJSON(PaymentSchema), kafka.WithLogger(c.Logger())}
	if *maxPerTrigger > 0 {
		payOpts = append(payOpts, kafka.WithMaxOffsetsPerTrigger(*maxPerTrigger))
	}
	pay, err := kafka.New(payOpts...)
	if err != nil {
		return err
	}
	c.Defer(pay.Close)
	prof, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics(*profilesTopic), kafka.WithValueJSON(ProfileSchema), kafka.WithTombstones(), kafka.WithLogger(c.Logger()))
	if err != nil {
		return err
	}
	c.Defer(prof.Close)
	sink, err := kafkasink.New(
		kafkasink.WithBrokers(addrs...),
		kafkasink.WithTopic(*alertsTopic),
		kafkasink.WithName("alerts"),
		kafkasink.WithKeyColumn("card_id"),
		kafkasink.WithValueJSON(AlertColumns...),
		kafkasink.WithLogger(c.Logger()),
	)
	if err != nil {
		return err
	}
	c.Defer(sink.Close)
	return c.Run(ctx, Stream(pay, prof, rules), sink, func(p engine.Progress) string {
		return fmt.Sprintf("%d rows in, %d alerts out", p.NumInputRows, p.Sinks[0].NumOutputRows)
	}, engine.WithOutputMode(engine.Append))
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
			batch.As(batch.Col("ts"), "ts"),
		).
		WithWatermark("ts", Delay).
		JoinTable(Profiles(profiles), engine.LeftOuter, engine.On("customer_id", "customer_id")).ID("profiles").
		Drop("right_customer_id").
		WithColumn("customer_id", batch.Col("left_customer_id")).
		Drop("left_customer_id")
}

// Stream is the whole query: enrich, aggregate per card, apply the rules.
func Stream(payments, profiles engine.Source, r RuleSet) *engine.Stream {
	return Rules(PerCard(Enriched(payments, profiles)), r)
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
