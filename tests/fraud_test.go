package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/outbox"
)

// startFraudBroker runs `onceflow dev kafka` with the fraud topics as its
// own process, so the broker outlives the query processes the test kills.
func startFraudBroker(t *testing.T, onceflowBin string) string {
	t.Helper()
	cmd := exec.Command(onceflowBin, "dev", "kafka", "-port", "0", "-topics", "payments:4,profiles:4,alerts:4,blocks:4")
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

type fraudPayment struct {
	PaymentID   string `json:"payment_id"`
	CardID      string `json:"card_id"`
	CustomerID  string `json:"customer_id"`
	MerchantID  string `json:"merchant_id"`
	AmountCents int64  `json:"amount_cents"`
	Status      string `json:"status,omitempty"`
	TS          string `json:"ts"`
}

type fraudAlert struct {
	CardID      string  `json:"card_id"`
	CustomerID  string  `json:"customer_id"`
	Segment     *string `json:"segment"`
	WindowStart string  `json:"window_start"`
	WindowEnd   string  `json:"window_end"`
	Payments    int64   `json:"payments"`
	TotalCents  int64   `json:"total_cents"`
	Merchants   int64   `json:"merchants"`
	TooMany     bool    `json:"too_many"`
	TooMuch     bool    `json:"too_much"`
	TooSpread   bool    `json:"too_spread"`
}

// The fraud example's rules and window (examples/fraud: DefaultRules,
// Window, Delay), restated as the reference computes them.
const (
	fraudMaxPayments  = 8
	fraudMaxTotal     = 300_000
	fraudMaxMerchants = 6
	fraudSlide        = 5 * time.Minute
	fraudSize         = 10 * time.Minute
	fraudDelay        = 2 * time.Minute
)

// produceFraud writes payments [from, from+n): card c-k belongs to customer
// u-(k%25), event times 1.5 s apart, bursts of one card; a payment of a
// burst is declined one time in three, any other one time in twenty (and
// an approved one carries no status, which the example reads as approved).
func produceFraud(t *testing.T, cl *kgo.Client, from, n int, rng *rand.Rand) {
	t.Helper()
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	burst, card, declines := 0, 0, 20
	for i := from; i < from+n; i++ {
		if burst == 0 {
			card, burst, declines = rng.IntN(60), 1, 20
			if rng.IntN(8) == 0 {
				burst, declines = 6+rng.IntN(10), 3
			}
		}
		burst--
		status := ""
		if rng.IntN(declines) == 0 {
			status = "declined"
		}
		p := fraudPayment{Status: status, PaymentID: fmt.Sprint("p-", i), CardID: fmt.Sprint("c-", card), CustomerID: fmt.Sprint("u-", card%25),
			MerchantID: fmt.Sprint("m-", rng.IntN(30)), AmountCents: 100 + rng.Int64N(60_000),
			TS: base.Add(time.Duration(i) * 1500 * time.Millisecond).Format("2006-01-02T15:04:05.000Z")}
		v, _ := json.Marshal(p)
		recs = append(recs, &kgo.Record{Topic: "payments", Key: []byte(p.CardID), Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

type fraudBlock struct {
	ID           string `json:"id"`
	CardID       string `json:"card_id"`
	Declines     int64  `json:"declines"`
	FirstDecline string `json:"first_decline"`
	LastDecline  string `json:"last_decline"`
}

// The card-block rule (examples/cardblock, as examples/fraud runs it): 3
// declined payments on one card within 10 minutes.
const (
	fraudBlockDeclines = 3
	fraudBlockWindow   = 10 * time.Minute
)

// fraudBlockRef applies the card-block rule payment by payment, each card's
// declines in event-time order: the declines within the window before a
// decline (those strictly after it minus the window) are kept; when there
// are 3 and the card is not blocked, a block goes out, with id
// block/<card>/<first decline, Unix ms>, and the card is blocked for the
// window after the decline that triggered it. It returns id → "declines
// first last" (Unix ms).
func fraudBlockRef(declines map[string][]time.Time) map[string]string {
	out := map[string]string{}
	for card, ts := range declines {
		slices.SortStableFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		var l []time.Time
		var until time.Time
		for _, t := range ts {
			l = append(l, t)
			for len(l) > 0 && !l[0].After(t.Add(-fraudBlockWindow)) {
				l = l[1:]
			}
			if t.Before(until) {
				continue
			}
			if len(l) >= fraudBlockDeclines {
				out[fmt.Sprintf("block/%s/%d", card, l[0].UnixMilli())] = fmt.Sprint(len(l), " ", l[0].UnixMilli(), " ", t.UnixMilli())
				until = t.Add(fraudBlockWindow)
			}
		}
	}
	return out
}

// TestFraudCrash runs examples/fraud against a broker in its own process
// while payments keep arriving, kills it with SIGKILL at every engine and
// Kafka-sink fault point and at random moments, and then checks with a
// read_committed consumer that the alerts are exactly those a reference
// computes from the produced payments and profiles: each (card, window)
// once, none missing, with the same figures and profile. The program runs
// its card-block query and its outbox worker too (-outbox-url, so the
// kills land in all three): the block intents committed are exactly those
// of a reference of the rule, each once, and each reached the test's HTTP
// receiver, every request with the intent's Idempotency-Key, while the
// receiver fails one request in seven.
func TestFraudCrash(t *testing.T) {
	faulttest.Require(t)
	onceflow := buildProg(t, "github.com/onceflow/onceflow/cmd/onceflow")
	prog := buildProg(t, "github.com/onceflow/onceflow/examples/fraud")
	broker := startFraudBroker(t, onceflow)
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Profiles: every customer, then every fifth deleted (a tombstone).
	segments := []string{"retail", "premium", "business"}
	profile := map[string]*string{}
	var profs []*kgo.Record
	for u := range 25 {
		id := fmt.Sprint("u-", u)
		seg := segments[u%3]
		profs = append(profs, &kgo.Record{Topic: "profiles", Key: []byte(id), Value: []byte(fmt.Sprintf(`{"segment":%q,"country":"FR"}`, seg))})
		profile[id] = &seg
	}
	for u := 0; u < 25; u += 5 {
		id := fmt.Sprint("u-", u)
		profs = append(profs, &kgo.Record{Topic: "profiles", Key: []byte(id)})
		profile[id] = nil
	}
	if err := cl.ProduceSync(context.Background(), profs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The outbox's receiver. When killAt is set, the request that brings
	// requests to it SIGKILLs the program before its answer (the intent is
	// applied, the worker never learns it).
	var mu sync.Mutex
	delivered := map[string][]string{} // intent id → the Idempotency-Key of each request
	requests, killAt := 0, 0
	var kill func()
	killedAt := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b fraudBlock
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.ID == "" {
			http.Error(w, "bad intent", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		delivered[b.ID] = append(delivered[b.ID], r.Header.Get("Idempotency-Key"))
		requests++
		switch {
		case requests == killAt:
			kill()
			killAt, killedAt = 0, b.ID
			time.Sleep(100 * time.Millisecond) // answer a dead worker
		case requests%7 == 0:
			http.Error(w, "try later", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	cp := t.TempDir()
	c := crashRun{bin: prog, args: []string{"-brokers", broker, "-checkpoint", cp, "-trigger", "available-now", "-outbox-url", srv.URL}}
	rng := rand.New(rand.NewPCG(3, 3))
	sent := 0
	points := append(fault.EnginePoints(), fault.KafkaSinkAfterProduce, fault.KafkaSinkAfterCommit)
	kills := map[string]int{}
	for _, point := range points {
		produceFraud(t, cl, sent, 250, rng)
		sent += 250
		if killed, stderr := c.once(t, point+"@2", 0); killed {
			if !strings.Contains(stderr, "onceflow-fault: "+point) {
				t.Fatalf("killed without reaching %s:\n%s", point, stderr)
			}
			kills[point]++
		}
	}
	for range 2 {
		produceFraud(t, cl, sent, 250, rng)
		sent += 250
		if killed, _ := c.once(t, "", time.Duration(50+rng.IntN(500))*time.Millisecond); killed {
			kills["random"]++
		}
	}
	// A kill in the outbox worker, mid-round: at the 3rd request of a run.
	produceFraud(t, cl, sent, 250, rng)
	sent += 250
	cmd := exec.Command(prog, c.args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	killAt, kill = requests+3, func() { _ = cmd.Process.Signal(syscall.SIGKILL) }
	mu.Unlock()
	err = cmd.Wait()
	mu.Lock()
	killAt = 0
	mu.Unlock()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || killedAt == "" {
		t.Fatalf("the run to be killed by the receiver ended with %v:\n%s", err, stderr.String())
	}
	kills["outbox"]++
	if killed, stderr := c.once(t, "", 0); killed {
		t.Fatalf("final run killed:\n%s", stderr)
	}
	t.Logf("%d payments, kills per fault point: %v", sent, kills)
	for _, p := range []string{fault.EngineAfterWAL, fault.EngineAfterSink, fault.KafkaSinkAfterCommit} {
		if kills[p] == 0 {
			t.Errorf("fault point %s never killed the process", p)
		}
	}

	// The reference, from the payments topic itself.
	type agg struct {
		card, customer string
		start, end     time.Time
		n, total       int64
		merchants      map[string]bool
	}
	windows := map[string]*agg{}
	declines := map[string][]time.Time{} // card → its declines' times
	var maxTS time.Time
	payments := 0
	for _, r := range readTopic(t, broker, "payments", true) {
		var p fraudPayment
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatal(err)
		}
		payments++
		ts, err := time.Parse(time.RFC3339Nano, p.TS)
		if err != nil {
			t.Fatal(err)
		}
		if ts.After(maxTS) {
			maxTS = ts
		}
		if p.Status == "declined" {
			declines[p.CardID] = append(declines[p.CardID], ts)
		}
		last := ts.Truncate(fraudSlide)
		for s := last; s.After(ts.Add(-fraudSize)); s = s.Add(-fraudSlide) {
			k := fmt.Sprint(p.CardID, "@", s.UnixMilli())
			a := windows[k]
			if a == nil {
				a = &agg{card: p.CardID, customer: p.CustomerID, start: s, end: s.Add(fraudSize), merchants: map[string]bool{}}
				windows[k] = a
			}
			a.n++
			a.total += p.AmountCents
			a.merchants[p.MerchantID] = true
		}
	}
	if payments != sent {
		t.Fatalf("payments topic holds %d payments, sent %d", payments, sent)
	}
	wm := maxTS.Add(-fraudDelay)
	want := map[string]string{}
	for k, a := range windows {
		if a.end.After(wm) {
			continue // still open
		}
		many, much, spread := a.n > fraudMaxPayments, a.total > fraudMaxTotal, int64(len(a.merchants)) > fraudMaxMerchants
		if !many && !much && !spread {
			continue
		}
		seg := "null"
		if s := profile[a.customer]; s != nil {
			seg = *s
		}
		want[k] = fmt.Sprintf("%s %s %s %d %d %d %t %t %t", a.customer, seg, a.end.UTC().Format(time.RFC3339), a.n, a.total, len(a.merchants), many, much, spread)
	}
	got := map[string]string{}
	for _, r := range readTopic(t, broker, "alerts", true) {
		var a fraudAlert
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Fatalf("alert %q: %v", r.Value, err)
		}
		start, err := time.Parse(time.RFC3339Nano, a.WindowStart)
		if err != nil {
			t.Fatalf("alert %q: window_start: %v", r.Value, err)
		}
		end, err := time.Parse(time.RFC3339Nano, a.WindowEnd)
		if err != nil {
			t.Fatalf("alert %q: window_end: %v", r.Value, err)
		}
		k := fmt.Sprint(a.CardID, "@", start.UnixMilli())
		if _, dup := got[k]; dup {
			t.Errorf("alert for card %s, window %s visible twice", a.CardID, a.WindowStart)
		}
		seg := "null"
		if a.Segment != nil {
			seg = *a.Segment
		}
		got[k] = fmt.Sprintf("%s %s %s %d %d %d %t %t %t", a.CustomerID, seg, end.UTC().Format(time.RFC3339), a.Payments, a.TotalCents, a.Merchants, a.TooMany, a.TooMuch, a.TooSpread)
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("alert %s: got %q, want %q", k, got[k], want[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("alert %s (%s) is not in the reference", k, got[k])
		}
	}
	if len(want) == 0 {
		t.Fatal("the reference has no alert: the rules never fire")
	}
	t.Logf("%d alerts, each once", len(got))

	// The block intents: committed once each, as the reference has them.
	wantBlocks := fraudBlockRef(declines)
	gotBlocks := map[string]string{}
	for _, r := range readTopic(t, broker, "blocks", true) {
		var b fraudBlock
		if err := json.Unmarshal(r.Value, &b); err != nil {
			t.Fatalf("block intent %q: %v", r.Value, err)
		}
		first, err1 := time.Parse(time.RFC3339Nano, b.FirstDecline)
		last, err2 := time.Parse(time.RFC3339Nano, b.LastDecline)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("block intent %q: %v", r.Value, err)
		}
		if string(r.Key) != b.CardID {
			t.Errorf("block intent %s keyed %q", b.ID, r.Key)
		}
		if _, dup := gotBlocks[b.ID]; dup {
			t.Errorf("block intent %s visible twice", b.ID)
		}
		gotBlocks[b.ID] = fmt.Sprint(b.Declines, " ", first.UnixMilli(), " ", last.UnixMilli())
	}
	var ids []string
	for id := range wantBlocks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if gotBlocks[id] != wantBlocks[id] {
			t.Errorf("block intent %s: got %q, want %q (declines first last)", id, gotBlocks[id], wantBlocks[id])
		}
	}
	for id := range gotBlocks {
		if _, ok := wantBlocks[id]; !ok {
			t.Errorf("block intent %s (%s) is not in the reference", id, gotBlocks[id])
		}
	}
	if len(wantBlocks) < 10 {
		t.Fatalf("the reference has %d block intents; want at least 10", len(wantBlocks))
	}

	// Every intent reached the receiver, with its key, and nothing else did.
	mu.Lock()
	defer mu.Unlock()
	repeats := 0
	for id, ks := range delivered {
		if _, ok := wantBlocks[id]; !ok {
			t.Errorf("the receiver got %s, not a committed block intent", id)
		}
		for _, k := range ks {
			if k != outbox.IdempotencyKey(id) {
				t.Errorf("intent %s sent with key %s, want %s", id, k, outbox.IdempotencyKey(id))
			}
		}
		repeats += len(ks) - 1
	}
	for _, id := range ids {
		if len(delivered[id]) == 0 {
			t.Errorf("block intent %s never reached the receiver", id)
		}
	}
	if len(delivered[killedAt]) < 2 {
		t.Errorf("block intent %s, applied when the worker was killed, was not sent again", killedAt)
	}
	t.Logf("%d block intents, each once; %d requests (%d repeats, failed ones included)", len(wantBlocks), requests, repeats)
}
