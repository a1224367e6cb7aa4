package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/outbox"
)

// runKilled runs bin with args, SIGKILLs it after killAfter (0: never) and
// reports whether it was killed; any other failure fails the test.
func runKilled(t *testing.T, bin string, args []string, killAfter time.Duration) bool {
	cmd := exec.Command(bin, args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return false
	}
	if killAfter > 0 {
		timer := time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	if err == nil {
		return false
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	t.Errorf("%s %v: %v\n%s", bin, args, err, eb.String())
	return false
}

// TestOutboxCrashRandom SIGKILLs the card-block query and the outbox worker
// at random moments, each restarted after every kill, while an HTTP
// receiver fails one request in five. At the end every committed intent
// has reached the receiver, every request of an intent carried the same
// Idempotency-Key, and nothing else arrived.
func TestOutboxCrashRandom(t *testing.T) {
	bin := buildProg(t, "github.com/onceflow/onceflow/tests/outboxprog")
	c := testenv.Kafka(t, map[string]int32{"blocks": 3})
	brokers := c.Addrs()[0]

	var mu sync.Mutex
	keys := map[string][]string{} // intent id → Idempotency-Key of each request
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct{ ID string }
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.ID == "" {
			http.Error(w, "bad intent", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		keys[b.ID] = append(keys[b.ID], r.Header.Get("Idempotency-Key"))
		n++
		if n%5 == 0 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	qcp, wcp := t.TempDir(), t.TempDir()
	qargs := []string{"query", "-checkpoint", qcp, "-brokers", brokers, "-topic", "blocks", "-batches", "30"}
	wargs := []string{"worker", "-checkpoint", wcp, "-brokers", brokers, "-topic", "blocks", "-endpoint", srv.URL, "-idle-exit", "1s"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := [2]int{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the query: killed at random until it finishes
		defer wg.Done()
		for i := 0; ; i++ {
			d := time.Duration(0)
			if i < 6 {
				d = time.Duration(150+rand.IntN(600)) * time.Millisecond // the global source: rng is the worker goroutine's
			}
			if !runKilled(t, bin, qargs, d) {
				return
			}
			kills[0]++
		}
	}()
	go func() { // the worker: killed at random a few times
		defer wg.Done()
		for range 6 {
			if runKilled(t, bin, wargs, time.Duration(100+rng.IntN(700))*time.Millisecond) {
				kills[1]++
			}
		}
	}()
	wg.Wait()
	if t.Failed() {
		return
	}
	// The query is done: a last worker run delivers the rest.
	if runKilled(t, bin, wargs, 0) {
		t.Fatal("the last worker run was killed")
	}
	committed := testenv.KafkaReadCommitted(t, c, "blocks", 0)
	var want []string
	for _, r := range committed {
		var b struct{ ID string }
		if err := json.Unmarshal(r.Value, &b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b.ID)
	}
	slices.Sort(want)
	if len(want) < 10 || len(slices.Compact(slices.Clone(want))) != len(want) {
		t.Fatalf("committed intents: %d, duplicates among them: %v", len(want), want)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	repeats := 0
	for id, ks := range keys {
		got = append(got, id)
		for _, k := range ks {
			if k != outbox.IdempotencyKey(id) {
				t.Errorf("intent %s sent with key %s, want %s", id, k, outbox.IdempotencyKey(id))
			}
		}
		repeats += len(ks) - 1
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("received intents differ from the committed ones:\n got  %v\n want %v", got, want)
	}
	t.Logf("%d intents, %d query kills, %d worker kills, %d requests (%d repeats, failed ones included)", len(want), kills[0], kills[1], n, repeats)
}
