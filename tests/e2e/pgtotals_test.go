package e2e

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
)

const pgtotalsPkg = "github.com/onceflow/onceflow/examples/pgtotals"

// The offsets-in-sink guard's fault points (foreachbatch/postgres).
var pgPoints = fault.PostgresPoints()

// TestPGTotalsCrash runs examples/pgtotals under SIGKILL at every engine
// fault point, at every step of the guard's transaction and at random
// moments, with files landing between runs, and checks that
// merchant_totals equals the totals of the input and that the job's
// progress row holds the last committed batch.
func TestPGTotalsCrash(t *testing.T) {
	faulttest.Require(t)
	dsn := testenv.PGURL(t)
	dir := t.TempDir()
	in, cp := filepath.Join(dir, "in"), filepath.Join(dir, "cp")
	p := proc{bin: buildProg(t, pgtotalsPkg), args: []string{
		"-input", in, "-checkpoint", cp, "-dsn", dsn, "-job", "totals-e2e", "-trigger", "available-now",
		"-create-table", "-max-files-per-trigger", "1", "-retain", "4",
	}}
	c := &crashPlan{p: p, l: newLander(t, in, 29), files: 3, per: 40, kills: map[string]int{}, started: time.Now()}
	points := append(fault.EnginePoints(), pgPoints...)
	for _, point := range points {
		c.atPoint(t, point, killsPerPoint(), 2, 1, 3)
	}
	c.atRandom(t, randomKills(), rand.New(rand.NewPCG(5, 6)), 1500*time.Millisecond)
	c.finish(t)
	c.expectKills(t, points)
	checkTotals(t, dsn, "totals-e2e", cp, c.l.all)
}

// checkTotals compares merchant_totals with the per-merchant sums and
// counts of want, and the job's progress row with the newest commits/N of
// the checkpoint.
func checkTotals(t *testing.T, dsn, job, cp string, want map[string]payment) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	compareTotals(t, pool, want)

	var progress int64
	if err := pool.QueryRow(ctx, "SELECT batch_id FROM onceflow_progress WHERE job = $1", job).Scan(&progress); err != nil {
		t.Fatal(err)
	}
	last := lastCommit(t, cp)
	if progress != last {
		t.Errorf("progress row of %s at batch %d, the checkpoint's last commit is %d", job, progress, last)
	}
	t.Logf("%d payments; progress row and commits/ at batch %d", len(want), last)
}

// checkTotalsOnly compares merchant_totals with the totals of want.
func checkTotalsOnly(t *testing.T, dsn string, want map[string]payment) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	compareTotals(t, pool, want)
}

// compareTotals compares merchant_totals with the per-merchant sums and
// counts of want.
func compareTotals(t *testing.T, pool *pgxpool.Pool, want map[string]payment) {
	t.Helper()
	ctx := context.Background()
	type total struct{ cents, n int64 }
	exp := map[string]total{}
	for _, p := range want {
		e := exp[p.MerchantID]
		e.cents += p.AmountCents
		e.n++
		exp[p.MerchantID] = e
	}
	rows, err := pool.Query(ctx, "SELECT merchant_id, total_cents, payments FROM merchant_totals")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]total{}
	for rows.Next() {
		var m string
		var tt total
		if err := rows.Scan(&m, &tt.cents, &tt.n); err != nil {
			t.Fatal(err)
		}
		got[m] = tt
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for m, e := range exp {
		if got[m] != e {
			t.Errorf("merchant %s: total %d cents in %d payments, input has %d in %d", m, got[m].cents, got[m].n, e.cents, e.n)
		}
	}
	for m := range got {
		if _, ok := exp[m]; !ok {
			t.Errorf("merchant %s in merchant_totals but not in the input", m)
		}
	}
}

// lastCommit returns the newest N of <cp>/commits/N, or -1.
func lastCommit(t *testing.T, cp string) int64 {
	t.Helper()
	return lastIn(t, filepath.Join(cp, "commits"))
}
