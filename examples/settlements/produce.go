package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/examples/internal/payments"
)

// MakePayments returns n payments drawn from seed: merchants m-0…m-(k-1),
// amounts 1..100000 cents.
func MakePayments(n, merchants int, seed uint64) []payments.Payment {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	out := make([]payments.Payment, n)
	for i := range out {
		out[i] = payments.Payment{
			PaymentID:   fmt.Sprintf("p-%d-%d", seed, i),
			MerchantID:  fmt.Sprintf("m-%d", rng.IntN(merchants)),
			AmountCents: 1 + rng.Int64N(100000),
			TS:          base.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
		}
	}
	return out
}

// Produce writes n generated payments to topic, keyed by merchant, and
// waits until every one is acknowledged.
func Produce(ctx context.Context, brokers []string, topic string, n, merchants int, seed uint64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, n)
	for _, p := range MakePayments(n, merchants, seed) {
		v, err := json.Marshal(p)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Key: []byte(p.MerchantID), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce payments to %s: %w", topic, err)
	}
	return nil
}
