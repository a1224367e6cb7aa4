package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
)

func TestOutboxCommandDeliversAndKeepsTheHeaderSecret(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"intents": 1})
	testenv.KafkaProduceTxn(t, c, "q", true,
		&kgo.Record{Topic: "intents", Value: []byte(`{"id":"a"}`)},
		&kgo.Record{Topic: "intents", Value: []byte(`{"id":"b"}`)})
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cr3t" || r.Header.Get("Idempotency-Key") == "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		n.Add(1)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, out, errOut := runCLI(ctx, "outbox", "--brokers", c.Addrs()[0], "--topic", "intents", "--checkpoint", t.TempDir(),
		"--endpoint", srv.URL, "--header", "Authorization: Bearer s3cr3t", "--idle-exit", "700ms")
	if code != 0 || n.Load() != 2 || !strings.Contains(out, "delivered 2") {
		t.Fatalf("exit %d, %d delivered\nstdout: %s\nstderr: %s", code, n.Load(), out, errOut)
	}
	if strings.Contains(out+errOut, "s3cr3t") {
		t.Fatalf("the header's value was printed:\n%s%s", out, errOut)
	}
}
