package postgres

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/testenv"
)

// pauseZombie makes every INSERT into table by a connection whose
// application_name is "zombie" wait, inside its transaction, on a real
// PostgreSQL advisory lock that the returned connection holds; release lets
// it go. It returns the zombie's pool (same database and schema as pool) and
// a function that waits until a zombie backend is blocked on the lock.
func pauseZombie(t *testing.T, pool *pgxpool.Pool, table string) (zombie *pgxpool.Pool, blocked func(), release func()) {
	t.Helper()
	ctx := ctxT(t)
	key := rand.Int64() // advisory locks are per database: a key of our own
	mustExec(t, pool, fmt.Sprintf(`CREATE FUNCTION pause_zombie() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_setting('application_name') = 'zombie' THEN
				PERFORM pg_advisory_xact_lock_shared(%d);
			END IF;
			RETURN NEW;
		END $$`, key))
	mustExec(t, pool, "CREATE TRIGGER pause BEFORE INSERT ON "+table+" FOR EACH ROW EXECUTE FUNCTION pause_zombie()")

	holder, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			t.Errorf("release the zombie: %v", err)
		}
		holder.Release()
	}
	t.Cleanup(release)

	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = "zombie"
	zombie, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zombie.Close)

	blocked = func() {
		t.Helper()
		for {
			var n int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = 'zombie' AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatal("the zombie never reached its INSERT")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return zombie, blocked, release
}

// Regression: a stalled older driver (a zombie, possible on a checkpoint
// without a kernel lock, such as S3) that finished its upsert of batch N
// after the live driver had committed N and N+1 rolled the table back to
// N's totals. Now every row carries the batch id that wrote it and an older
// batch never overwrites a newer one; the zombie's late write of N is
// harmless.
func TestUpsertZombieCannotRollBackNewerBatch(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	mustExec(t, pool, "CREATE TABLE totals (k bigint PRIMARY KEY, total bigint, onceflow_batch_id bigint)")
	zombiePool, blocked, release := pauseZombie(t, pool, "totals")

	newSink := func(p *pgxpool.Pool) *Sink {
		s, err := NewUpsert(p, "totals", WithKeyColumns("k"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ValidateSchema(kvSchema); err != nil {
			t.Fatal(err)
		}
		return s
	}
	live, zombie := newSink(pool), newSink(zombiePool)

	// Running totals in update mode: batch 0, then batch 1 changes k=1 and
	// k=2 and adds k=3, then batch 2 changes k=1 only.
	b0 := kvRecord(t, mem, kvSchema, []int64{1, 2}, []*int64{i64(10), i64(20)})
	b1 := kvRecord(t, mem, kvSchema, []int64{1, 2, 3}, []*int64{i64(15), i64(25), i64(5)})
	b2 := kvRecord(t, mem, kvSchema, []int64{1}, []*int64{i64(17)})
	defer b0.Release()
	defer b1.Release()
	defer b2.Release()
	if err := live.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{b0}); err != nil {
		t.Fatal(err)
	}

	// The zombie runs batch 1 and stalls inside its transaction.
	done := make(chan error, 1)
	go func() { done <- zombie.AddBatch(ctx, 1, kvSchema, []arrow.RecordBatch{b1}) }()
	blocked()

	// Meanwhile the live driver re-runs batch 1 and commits batch 2.
	if err := live.AddBatch(ctx, 1, kvSchema, []arrow.RecordBatch{b1}); err != nil {
		t.Fatal(err)
	}
	if err := live.AddBatch(ctx, 2, kvSchema, []arrow.RecordBatch{b2}); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("zombie batch 1: %v", err)
	}

	want := map[int64]int64{1: 17, 2: 25, 3: 5}
	check := func(when string) {
		t.Helper()
		got := totals(t, pool, "totals")
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", when, len(got), len(want))
		}
		for k, v := range want {
			if got[k] == nil || *got[k] != v {
				t.Errorf("%s: k=%d total %v, want %d (batch 2's value)", when, k, fmtTotal(got[k]), v)
			}
		}
	}
	check("after the zombie's late batch 1")

	// A repeat of the newest batch, and a late repeat of an older one, by
	// the live driver: harmless too.
	for _, step := range []struct {
		id  int64
		rec arrow.RecordBatch
	}{{2, b2}, {1, b1}, {0, b0}} {
		if err := live.AddBatch(ctx, step.id, kvSchema, []arrow.RecordBatch{step.rec}); err != nil {
			t.Fatal(err)
		}
	}
	check("after repeats of batches 2, 1 and 0")
}
