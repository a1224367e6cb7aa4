// Command latency measures onceflow's end-to-end exactly-once latency,
// Kafka to Kafka: the time from a payment's produce acknowledgement to the
// settlement that covers it being visible to a read_committed consumer.
//
// It runs the settlements query of examples/settlements (per merchant, the
// batch's sum and count of amount_cents and the running total, update mode,
// the transactional Kafka sink) with an as-fast-as-possible trigger
// (engine.Every(0)) over a local checkpoint, while a producer sends payments
// at a steady rate (default 10,000 a second), keyed by merchant, and a
// read_committed consumer reads the settlements. The broker (franz-go's
// kfake) runs in a child process of its own (this program with -broker), so
// its CPU is not the engine's and a broker stall is not an engine stall.
//
// How a payment finds its settlement: payments are keyed by merchant, so a
// merchant's payments sit in one partition in the order they were
// produced, and their acknowledgements come back in that order. The
// engine reads them in that order, so the settlements of a merchant cover
// its payments in order: the k-th payment of merchant m is covered by the
// first settlement of m whose running count of payments exceeds k. Its
// latency is that settlement's arrival at the consumer minus the payment's
// acknowledgement. After the run every payment must be covered exactly
// once (the sum of the settlements' counts equals the payments produced,
// per merchant); the probe fails otherwise.
//
// Payments acknowledged in the first -warmup are not counted (the first
// batches start the producer, the sink's transactional id and the state).
//
//	cd bench && go run ./latency [-rate 10000] [-duration 20s] [-warmup 3s] [-merchants 1000] [-json]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

const (
	paymentsTopic    = "payments"
	settlementsTopic = "settlements"
	topicPartitions  = 4
)

// paymentSchema is the payments' JSON schema, as examples/settlements reads it.
var paymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

type config struct {
	rate       int
	duration   time.Duration
	warmup     time.Duration
	drain      time.Duration
	merchants  int
	partitions int
	dir        string
	jsonOut    bool
	noSync     bool
}

func main() {
	broker := flag.Bool("broker", false, "internal: run the embedded Kafka broker and print its address (the probe starts itself with it)")
	var c config
	flag.IntVar(&c.rate, "rate", 10_000, "payments per second")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "how long payments are produced")
	flag.DurationVar(&c.warmup, "warmup", 3*time.Second, "payments acknowledged this early in the run are not counted")
	flag.DurationVar(&c.drain, "drain", 10*time.Second, "longest wait after the last payment for its settlement")
	flag.IntVar(&c.merchants, "merchants", 1000, "distinct merchants")
	flag.IntVar(&c.partitions, "partitions", 0, "state partitions (0: the engine's default)")
	flag.StringVar(&c.dir, "dir", "", "checkpoint parent directory (default: a new temporary directory, removed after)")
	flag.BoolVar(&c.jsonOut, "json", false, "print the result as JSON")
	flag.BoolVar(&c.noSync, "nosync", false, "diagnosis only, never a figure: the checkpoint skips fsync, to show what the disk costs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *broker {
		err = runBroker(ctx)
	} else {
		err = probe(ctx, c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
}

// runBroker serves kfake until stdin closes (the probe exiting closes it).
func runBroker(ctx context.Context) error {
	k, err := kafkadev.Start(ctx, kafkadev.Options{Topics: map[string]int32{paymentsTopic: topicPartitions, settlementsTopic: topicPartitions}})
	if err != nil {
		return err
	}
	defer k.Close()
	fmt.Println(strings.Join(k.Addrs(), ","))
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// startBroker starts this program with -broker and returns the broker
// addresses and a function that stops it.
func startBroker() ([]string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("start broker: %w", err)
	}
	cmd := exec.Command(self, "-broker")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("start broker: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("start broker: %w", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start broker: %w", err)
	}
	stopFn := func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stopFn()
		return nil, nil, fmt.Errorf("start broker: read its address: %w", err)
	}
	return strings.Split(strings.TrimSpace(line), ","), stopFn, nil
}

// stream is the query of examples/settlements.
func stream(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).
		Select(
			batch.As(batch.Col("payment_id"), "payment_id"),
			batch.As(batch.Col("merchant_id"), "merchant_id"),
			batch.As(batch.Col("amount_cents"), "amount_cents"),
		).
		GroupBy("merchant_id").ID("merchant-totals").
		Agg(
			batch.Sum(batch.Col("amount_cents")).PerBatch().As("amount_cents"),
			batch.CountRows().PerBatch().As("payments"),
			batch.Sum(batch.Col("amount_cents")).As("total_cents"),
		).
		WithBatchIDColumn("batch_id")
}

// ledger holds what the producer and the consumer saw, per merchant.
type ledger struct {
	mu    sync.Mutex
	acks  [][]time.Time // merchant → acknowledgement time of each payment, in order
	seen  [][]coverage  // merchant → settlements, in order of arrival
	nAcks int
	fails []error
}

// coverage is one settlement: the merchant's running payment count after
// it, and when the consumer received it.
type coverage struct {
	upTo int
	at   time.Time
}

func probe(ctx context.Context, c config) error {
	if c.rate <= 0 || c.merchants <= 0 || c.duration <= 0 {
		return errors.New("-rate, -merchants and -duration must be positive")
	}
	addrs, stopBroker, err := startBroker()
	if err != nil {
		return err
	}
	defer stopBroker()

	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "onceflow-latency-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	ckpt, err := storage.OpenLocal(dir+"/checkpoint", storage.LocalOptions{NoSync: c.noSync})
	if err != nil {
		return err
	}
	src, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics(paymentsTopic), kafka.WithValueJSON(paymentSchema))
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	sink, err := kafkasink.New(
		kafkasink.WithBrokers(addrs...),
		kafkasink.WithTopic(settlementsTopic),
		kafkasink.WithName("settlements"),
		kafkasink.WithKeyColumn("merchant_id"),
		kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents"),
	)
	if err != nil {
		return err
	}
	defer func() { _ = sink.Close() }()

	var progMu sync.Mutex
	var progress []engine.Progress
	opts := []engine.Option{
		engine.WithName("latency"),
		engine.WithCheckpoint(ckpt),
		engine.WithSink(sink),
		engine.WithTrigger(engine.Every(0)),
		engine.WithOutputMode(engine.Update),
		engine.WithProgressListener(func(p engine.Progress) {
			progMu.Lock()
			progress = append(progress, p)
			progMu.Unlock()
		}),
	}
	if c.partitions > 0 {
		opts = append(opts, engine.WithStatePartitions(c.partitions))
	}
	q, err := engine.NewQuery(stream(src), opts...)
	if err != nil {
		return err
	}

	l := &ledger{acks: make([][]time.Time, c.merchants), seen: make([][]coverage, c.merchants)}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	queryDone := make(chan error, 1)
	go func() { queryDone <- q.Run(runCtx) }()

	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumeTopics(settlementsTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer consumer.Close()
	consumed := make(chan struct{})
	go func() { defer close(consumed); consume(runCtx, consumer, l) }()

	producer, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(paymentsTopic), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer producer.Close()
	start := time.Now()
	produced, err := produce(runCtx, producer, c, l, start)
	if err != nil {
		return err
	}
	if err := producer.Flush(runCtx); err != nil {
		return fmt.Errorf("flush payments: %w", err)
	}
	// Drain: wait until every payment is covered, or -drain passes.
	deadline := time.Now().Add(c.drain)
	for time.Now().Before(deadline) {
		if l.covered() >= produced {
			break
		}
		select {
		case err := <-queryDone:
			return fmt.Errorf("query stopped: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancelRun()
	<-consumed
	if err := <-queryDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("query: %w", err)
	}
	progMu.Lock()
	defer progMu.Unlock()
	return report(c, l, produced, start, progress)
}

// produce sends payments at c.rate for c.duration, keyed by merchant, and
// records each acknowledgement in l. It returns how many it sent.
func produce(ctx context.Context, p *kgo.Client, c config, l *ledger, start time.Time) (int, error) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
	for {
		el := time.Since(start)
		if el >= c.duration {
			return sent, nil
		}
		due := int(el.Seconds() * float64(c.rate))
		for ; sent < due; sent++ {
			m := int(splitmix(uint64(sent)) % uint64(c.merchants))
			mid := "m-" + strconv.Itoa(m)
			val := fmt.Sprintf(`{"payment_id":"p-%d","merchant_id":%q,"amount_cents":%d,"ts":"2026-12-01T00:00:00.000Z"}`, sent, mid, 1+splitmix(uint64(sent)^0xabcdef)%100_000)
			p.Produce(ctx, &kgo.Record{Key: []byte(mid), Value: []byte(val)}, func(_ *kgo.Record, err error) {
				now := time.Now()
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.fails = append(l.fails, err)
					return
				}
				l.acks[m] = append(l.acks[m], now)
				l.nAcks++
			})
		}
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case <-tick.C:
		}
	}
}

// consume reads the settlements at read_committed until ctx ends.
func consume(ctx context.Context, cl *kgo.Client, l *ledger) {
	type settlement struct {
		MerchantID string `json:"merchant_id"`
		Payments   int    `json:"payments"`
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			var s settlement
			if err := json.Unmarshal(r.Value, &s); err != nil {
				l.mu.Lock()
				l.fails = append(l.fails, fmt.Errorf("settlement at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err))
				l.mu.Unlock()
				return
			}
			m, err := strconv.Atoi(strings.TrimPrefix(s.MerchantID, "m-"))
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil || m < 0 || m >= len(l.seen) {
				l.fails = append(l.fails, fmt.Errorf("settlement at %s/%d@%d: unknown merchant %q", r.Topic, r.Partition, r.Offset, s.MerchantID))
				return
			}
			prev := 0
			if n := len(l.seen[m]); n > 0 {
				prev = l.seen[m][n-1].upTo
			}
			l.seen[m] = append(l.seen[m], coverage{upTo: prev + s.Payments, at: now})
		})
	}
}

// covered is the number of payments the settlements received so far cover.
func (l *ledger) covered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.seen {
		if len(s) > 0 {
			n += s[len(s)-1].upTo
		}
	}
	return n
}

type result struct {
	Rate          int     `json:"rate"`
	DurationS     float64 `json:"durationS"`
	Produced      int     `json:"produced"`
	Counted       int     `json:"counted"`
	Batches       int     `json:"batches"`
	P50Ms         float64 `json:"p50Ms"`
	P90Ms         float64 `json:"p90Ms"`
	P99Ms         float64 `json:"p99Ms"`
	MaxMs         float64 `json:"maxMs"`
	BatchP50Ms    int64   `json:"batchP50Ms"`
	BatchP99Ms    int64   `json:"batchP99Ms"`
	RowsPerBatch  float64 `json:"rowsPerBatch"`
	PhaseP50P99Ms map[string][2]int64
	Load          string `json:"load"`
}

func report(c config, l *ledger, produced int, start time.Time, progress []engine.Progress) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fails) > 0 {
		return fmt.Errorf("%d errors, the first: %w", len(l.fails), l.fails[0])
	}
	if l.nAcks != produced {
		return fmt.Errorf("%d payments produced, %d acknowledged", produced, l.nAcks)
	}
	var lat []float64
	for m, acks := range l.acks {
		cov := l.seen[m]
		if got := 0; len(cov) > 0 {
			got = cov[len(cov)-1].upTo
			if got != len(acks) {
				return fmt.Errorf("merchant m-%d: %d payments, settlements count %d: not exactly once", m, len(acks), got)
			}
		} else if len(acks) > 0 {
			return fmt.Errorf("merchant m-%d: %d payments, no settlement", m, len(acks))
		}
		j := 0
		for k, ack := range acks {
			for cov[j].upTo <= k {
				j++
			}
			if ack.Sub(start) < c.warmup {
				continue
			}
			lat = append(lat, float64(max(0, cov[j].at.Sub(ack)))/1e6)
		}
	}
	if len(lat) == 0 {
		return errors.New("no payment after the warm-up")
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	r := result{
		Rate: c.rate, DurationS: c.duration.Seconds(), Produced: produced, Counted: len(lat),
		Batches: len(progress), P50Ms: q(0.5), P90Ms: q(0.9), P99Ms: q(0.99), MaxMs: lat[len(lat)-1],
		PhaseP50P99Ms: map[string][2]int64{},
		Load:          loadAvg(),
	}
	var bd []int64
	rows := int64(0)
	phases := map[string][]int64{}
	for _, p := range progress {
		bd = append(bd, p.BatchDurationMs)
		rows += p.NumInputRows
		for k, v := range p.DurationMs {
			phases[k] = append(phases[k], v)
		}
	}
	pct := func(v []int64, p float64) int64 {
		slices.Sort(v)
		return v[min(len(v)-1, int(p*float64(len(v))))]
	}
	if len(bd) > 0 {
		r.BatchP50Ms, r.BatchP99Ms = pct(bd, 0.5), pct(bd, 0.99)
		r.RowsPerBatch = float64(rows) / float64(len(bd))
	}
	for k, v := range phases {
		r.PhaseP50P99Ms[k] = [2]int64{pct(v, 0.5), pct(v, 0.99)}
	}
	if c.jsonOut {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	fmt.Printf("onceflow exactly-once latency — %s UTC, load average %s\n", time.Now().UTC().Format("2006-01-02 15:04"), r.Load)
	fmt.Printf("%d payments/s for %s over %d merchants: %d produced, all settled exactly once; %d counted (after %s warm-up)\n",
		c.rate, c.duration, c.merchants, produced, len(lat), c.warmup)
	fmt.Printf("produce ack → settlement visible at read_committed: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs)
	fmt.Printf("%d batches, %.0f payments a batch, batch p50/p99 %d/%d ms\n", r.Batches, r.RowsPerBatch, r.BatchP50Ms, r.BatchP99Ms)
	var names []string
	for k := range r.PhaseP50P99Ms {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := r.PhaseP50P99Ms[k]
		fmt.Printf("  %-18s p50 %3d ms  p99 %3d ms\n", k, v[0], v[1])
	}
	return nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
