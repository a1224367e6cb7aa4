package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// TestWorkerReadsAnOutboxTableWrittenUnderTheGuard: intents inserted in
// the offsets-in-sink transaction of their batch are delivered once each;
// a transaction that rolled back leaves nothing to deliver; a repeated
// batch is skipped by the guard, so its intents are not in the table twice.
func TestWorkerReadsAnOutboxTableWrittenUnderTheGuard(t *testing.T) {
	pool := testenv.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `CREATE TABLE outbox (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, action text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g, err := postgres.NewGuard(pool, "cardblock", postgres.WithCreateTables(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	write := func(batch int64, ids ...string) error {
		_, err := g.Run(ctx, batch, func(ctx context.Context, tx pgx.Tx) error {
			for _, id := range ids {
				if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, action) VALUES ($1, 'block')`, id); err != nil {
					return err
				}
			}
			if ids[0] == "fails" {
				return errors.New("the batch fails after its inserts")
			}
			return nil
		})
		return err
	}
	if err := write(0, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := write(1, "fails", "never"); err == nil {
		t.Fatal("the failing batch committed")
	}
	if err := write(1, "c"); err != nil {
		t.Fatal(err)
	}
	if err := write(1, "c-again"); err != nil { // a re-run of batch 1: skipped
		t.Fatal(err)
	}
	rc := &receiver{keys: map[string][]string{}, failFirst: map[string]int{"c": 1}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := func() Stats {
		w, err := New(WithPostgres(pool, "outbox"), WithCheckpoint(cp), WithEndpoint(srv.URL), WithBackoff(time.Millisecond, time.Millisecond), WithIdleExit(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
		return w.Stats()
	}
	if st := run(); st.Delivered != 3 || st.FailedAttempts != 1 || st.Lag[0] != 0 {
		t.Fatalf("stats %+v, want 3 delivered, 1 failed attempt, no lag", st)
	}
	if err := write(2, "d"); err != nil {
		t.Fatal(err)
	}
	if st := run(); st.Delivered != 1 {
		t.Fatalf("after a restart delivered %d, want only d", st.Delivered)
	}
	got := fmt.Sprint(rc.keys["a"], len(rc.keys["b"]), len(rc.keys["c"]), len(rc.keys["d"]), rc.keys["never"], rc.keys["c-again"])
	if want := fmt.Sprint([]string{IdempotencyKey("a")}, 1, 2, 1, []string(nil), []string(nil)); got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}
