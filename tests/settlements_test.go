package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

// startBroker runs `onceflow dev kafka` as its own process, so the broker
// outlives the query processes the test kills.
func startBroker(t *testing.T, onceflowBin string) string {
	t.Helper()
	cmd := exec.Command(onceflowBin, "dev", "kafka", "-port", "0", "-topics", "payments:4,settlements:4")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("broker did not start: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	i := strings.LastIndex(line, " ")
	return strings.TrimSpace(line[i+1:])
}

type settlement struct {
	MerchantID  string `json:"merchant_id"`
	BatchID     int64  `json:"batch_id"`
	AmountCents int64  `json:"amount_cents"`
	Payments    int64  `json:"payments"`
	TotalCents  int64  `json:"total_cents"`
}

type payment struct {
	PaymentID   string `json:"payment_id"`
	MerchantID  string `json:"merchant_id"`
	AmountCents int64  `json:"amount_cents"`
}

// readTopic reads every record of topic with the given isolation level
// until it has been quiet for a moment.
func readTopic(t *testing.T, broker, topic string, committed bool) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r); n++ })
		if n == 0 {
			return recs
		}
	}
}

func produce(t *testing.T, broker string, from, n int, rng *rand.Rand) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		p := payment{PaymentID: fmt.Sprint("p-", i), MerchantID: fmt.Sprint("m-", rng.IntN(23)), AmountCents: 1 + rng.Int64N(99999)}
		v, _ := json.Marshal(map[string]any{"payment_id": p.PaymentID, "merchant_id": p.MerchantID, "amount_cents": p.AmountCents, "ts": "2026-11-30T10:00:00.123Z"})
		recs = append(recs, &kgo.Record{Key: []byte(p.MerchantID), Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestSettlementsCrash runs examples/settlements against a broker in its
// own process, kills it with SIGKILL at every step of the batch (engine and
// Kafka sink fault points, including between the Kafka commit and
// commits/N) and at random moments while payments keep arriving, and then
// checks with a read_committed consumer that every batch's settlements are
// there exactly once and that the per-merchant sums equal the payments.
func TestSettlementsCrash(t *testing.T) {
	faulttest.Require(t)
	onceflow := buildProg(t, "github.com/onceflow/onceflow/cmd/onceflow")
	prog := buildProg(t, "github.com/onceflow/onceflow/examples/settlements")
	broker := startBroker(t, onceflow)
	cp := t.TempDir()
	c := crashRun{bin: prog, args: []string{"-brokers", broker, "-checkpoint", cp, "-trigger", "available-now", "-max-offsets-per-trigger", "200"}}
	rng := rand.New(rand.NewPCG(7, 7))
	sent := 0
	points := append(fault.EnginePoints(), fault.KafkaSinkAfterProduce, fault.KafkaSinkAfterCommit)
	kills := map[string]int{}
	for round := 0; round < 2; round++ {
		for _, point := range points {
			produce(t, broker, sent, 300, rng)
			sent += 300
			if killed, stderr := c.once(t, point+"@2", 0); killed {
				if !strings.Contains(stderr, "onceflow-fault: "+point) {
					t.Fatalf("killed without reaching %s:\n%s", point, stderr)
				}
				kills[point]++
			}
		}
	}
	for i := 0; i < 8; i++ {
		produce(t, broker, sent, 300, rng)
		sent += 300
		if killed, _ := c.once(t, "", time.Duration(50+rng.IntN(600))*time.Millisecond); killed {
			kills["random"]++
		}
	}
	if killed, stderr := c.once(t, "", 0); killed {
		t.Fatalf("final run killed:\n%s", stderr)
	}
	t.Logf("kills per fault point: %v", kills)
	for _, p := range []string{fault.EngineAfterWAL, fault.EngineAfterSink, fault.KafkaSinkAfterCommit} {
		if kills[p] == 0 {
			t.Errorf("fault point %s never killed the process", p)
		}
	}

	// Expected sums from the payments topic itself.
	want := map[string]int64{}
	wantN := map[string]int64{}
	for _, r := range readTopic(t, broker, "payments", true) {
		var p payment
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatal(err)
		}
		want[p.MerchantID] += p.AmountCents
		wantN[p.MerchantID]++
	}
	if n := func() (n int64) {
		for _, v := range wantN {
			n += v
		}
		return n
	}(); n != int64(sent) {
		t.Fatalf("payments topic holds %d payments, sent %d", n, sent)
	}
	got := map[string]int64{}
	gotN := map[string]int64{}
	last := map[string]settlement{}
	seen := map[string]bool{}
	for _, r := range readTopic(t, broker, "settlements", true) {
		var s settlement
		if err := json.Unmarshal(r.Value, &s); err != nil {
			t.Fatalf("settlement %q: %v", r.Value, err)
		}
		k := fmt.Sprint(s.MerchantID, "@", s.BatchID)
		if seen[k] {
			t.Errorf("settlement of %s in batch %d visible twice", s.MerchantID, s.BatchID)
		}
		seen[k] = true
		got[s.MerchantID] += s.AmountCents
		gotN[s.MerchantID] += s.Payments
		if s.BatchID >= last[s.MerchantID].BatchID {
			last[s.MerchantID] = s
		}
	}
	for m, v := range want {
		if got[m] != v || gotN[m] != wantN[m] {
			t.Errorf("merchant %s: settlements sum %d over %d payments, want %d over %d", m, got[m], gotN[m], v, wantN[m])
		}
		if last[m].TotalCents != v {
			t.Errorf("merchant %s: last running total %d, want %d", m, last[m].TotalCents, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d merchants settled, want %d", len(got), len(want))
	}
}
