package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// receiver is an HTTP endpoint that records the Idempotency-Key of every
// request per intent id, and fails the ids in failFirst that many times
// (and "poison" always).
type receiver struct {
	mu        sync.Mutex
	keys      map[string][]string // intent id → keys of its requests
	failFirst map[string]int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct{ ID string }
	_ = json.NewDecoder(r.Body).Decode(&body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.keys[body.ID] = append(rc.keys[body.ID], r.Header.Get("Idempotency-Key"))
	if body.ID == "poison" {
		http.Error(w, "no such card", http.StatusUnprocessableEntity)
		return
	}
	if rc.failFirst[body.ID] > 0 {
		rc.failFirst[body.ID]--
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func intent(id string) *kgo.Record {
	return &kgo.Record{Topic: "intents", Value: fmt.Appendf(nil, `{"id":%q,"action":"block"}`, id)}
}

func TestWorkerDeliversCommittedIntentsOnceWithStableKeys(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"intents": 2})
	testenv.KafkaProduceTxn(t, c, "q1", true, intent("a"), intent("b"), intent("poison"))
	testenv.KafkaProduceTxn(t, c, "q1", false, intent("aborted"))
	testenv.KafkaProduceTxn(t, c, "q1", true, intent("c"))
	rc := &receiver{keys: map[string][]string{}, failFirst: map[string]int{"b": 2}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	cpDir := t.TempDir()
	cp, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	run := func(reg prometheus.Registerer) *Worker {
		w, err := New(WithBrokers(c.Addrs()...), WithTopic("intents"), WithCheckpoint(cp), WithEndpoint(srv.URL),
			WithBackoff(time.Millisecond, 4*time.Millisecond), WithMaxAttempts(3), WithIdleExit(700*time.Millisecond), WithRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := run(reg)
	st := w.Stats()
	if st.Delivered != 3 || st.DeadLettered != 1 || st.FailedAttempts != 5 {
		t.Fatalf("stats %+v, want 3 delivered, 1 dead, 5 failed attempts (b twice, poison three times)", st)
	}
	if got := testutil.ToFloat64(w.m.delivered); got != 3 {
		t.Fatalf("delivered metric %v", got)
	}
	for id, keys := range rc.keys {
		for _, k := range keys {
			if k != IdempotencyKey(id) {
				t.Fatalf("intent %s sent with key %s, want %s", id, k, IdempotencyKey(id))
			}
		}
	}
	if _, ok := rc.keys["aborted"]; ok {
		t.Fatal("an intent of an aborted transaction was delivered")
	}
	if n := len(rc.keys["b"]); n != 3 {
		t.Fatalf("b was sent %d times, want 3 (two failures, one success)", n)
	}
	dl, err := storage.Sub(cp, "deadletter").List(context.Background(), "")
	if err != nil || len(dl) != 1 || !strings.Contains(dl[0].Name, "intents-") {
		t.Fatalf("dead letters %v (%v), want one", dl, err)
	}
	// A second worker on the same checkpoint starts after what was
	// delivered: nothing is sent again.
	before := fmt.Sprint(rc.keys)
	run(prometheus.NewRegistry())
	if after := fmt.Sprint(rc.keys); after != before {
		t.Fatalf("a restart re-sent intents:\n before %s\n after  %s", before, after)
	}
}

func TestOptionsAreCheckedAndSecretsStayOut(t *testing.T) {
	_, err := New(WithEndpoint("ftp://user:hunter2@example.invalid/x"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"WithBrokers", "WithTopic", "WithCheckpoint", "not an http(s) URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}
}
