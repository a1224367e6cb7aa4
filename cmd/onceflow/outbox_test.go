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

func TestOutboxCommandReadsAPostgresTable(t *testing.T) {
	pool := testenv.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `CREATE TABLE intents (seq bigserial PRIMARY KEY, id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO intents (id) VALUES ('a'), ('b'), ('c')`); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
	defer srv.Close()
	t.Setenv("OUTBOX_TEST_PG", pool.Config().ConnString())
	code, out, errOut := runCLI(ctx, "outbox", "--postgres-env", "OUTBOX_TEST_PG", "--table", "intents", "--checkpoint", t.TempDir(),
		"--endpoint", srv.URL, "--idle-exit", "500ms")
	if code != 0 || n.Load() != 3 {
		t.Fatalf("exit %d, %d delivered\nstdout: %s\nstderr: %s", code, n.Load(), out, errOut)
	}
	if code, _, errOut := runCLI(ctx, "outbox", "--brokers", "x", "--postgres-env", "V", "--table", "t", "--checkpoint", t.TempDir(), "--endpoint", srv.URL); code == 0 || !strings.Contains(errOut, "either --brokers") {
		t.Fatalf("both sources: exit %d, %s", code, errOut)
	}
}
