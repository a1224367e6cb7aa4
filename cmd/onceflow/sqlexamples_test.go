package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// payment is one row of the examples' input, as JSON.
type payment struct {
	PaymentID   string `json:"payment_id"`
	MerchantID  string `json:"merchant_id"`
	AmountCents int64  `json:"amount_cents"`
	TS          string `json:"ts"`
}

// makePayments returns n payments over merchants, spread over two days.
func makePayments(from, n, merchants int) []payment {
	base := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	out := make([]payment, n)
	for j := range out {
		i := from + j
		out[j] = payment{
			PaymentID:   fmt.Sprintf("p-%05d", i),
			MerchantID:  fmt.Sprintf("m-%d", (i*7)%merchants),
			AmountCents: int64(1 + (i*7919)%10000),
			TS:          base.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
		}
	}
	return out
}

func totals(ps []payment) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, p := range ps {
		t := m[p.MerchantID]
		m[p.MerchantID] = [2]int64{t[0] + p.AmountCents, t[1] + 1}
	}
	return m
}

// writePaymentFiles writes ps as JSON-lines files of per rows each.
func writePaymentFiles(t *testing.T, dir string, first int, ps []payment, per int) {
	t.Helper()
	for f := 0; f*per < len(ps); f++ {
		var b strings.Builder
		for _, p := range ps[f*per : min(len(ps), (f+1)*per)] {
			line, _ := json.Marshal(p)
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("payments-%04d.json", first+f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exampleSQL(name string) string { return filepath.Join("..", "..", "examples", "sql", name) }

func runSQLFile(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(context.Background(), append([]string{"run", "-trigger", "available-now"}, args...)...)
	if code != 0 {
		t.Fatalf("onceflow run %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	}
	return stdout
}

// The lake twin writes every payment once into a table partitioned by day.
func TestSQLExampleLake(t *testing.T) {
	in, table, root := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("LAKE_INPUT", in)
	t.Setenv("LAKE_TABLE", table)
	ps := makePayments(0, 300, 5)
	writePaymentFiles(t, in, 0, ps[:200], 50)
	runSQLFile(t, "-checkpoint-root", root, exampleSQL("lake.sql"))
	writePaymentFiles(t, in, 10, ps[200:], 50)
	runSQLFile(t, "-checkpoint-root", root, exampleSQL("lake.sql"))

	st, err := storage.OpenLocal(table, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seen := map[string]int{}
	days := map[string]bool{}
	err = filesink.ReadRows(context.Background(), st, func(f filesink.File, cols []string, row []any) error {
		seen[row[0].(string)]++
		days[strings.SplitN(f.Path, "/", 2)[0]] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(ps) {
		t.Fatalf("%d payments in the table, want %d", len(seen), len(ps))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("payment %s is in the table %d times", id, n)
		}
	}
	if !days["day=2026-11-30"] || !days["day=2026-12-01"] || len(days) != 2 {
		t.Fatalf("partitions %v, want day=2026-11-30 and day=2026-12-01", days)
	}
}

// The pgtotals twin adds each batch's per-merchant deltas to PostgreSQL,
// across two runs.
func TestSQLExamplePGTotals(t *testing.T) {
	dsn := testenv.PGURL(t)
	in, root := t.TempDir(), t.TempDir()
	t.Setenv("PGTOTALS_INPUT", in)
	t.Setenv("PG_DSN", dsn)
	ps := makePayments(0, 400, 7)
	writePaymentFiles(t, in, 0, ps[:250], 50)
	runSQLFile(t, "-checkpoint-root", root, exampleSQL("pgtotals.sql"))
	writePaymentFiles(t, in, 10, ps[250:], 50)
	runSQLFile(t, "-checkpoint-root", root, exampleSQL("pgtotals.sql"))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT merchant_id, total_cents, payments FROM merchant_totals`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for rows.Next() {
		var m string
		var tc, n int64
		if err := rows.Scan(&m, &tc, &n); err != nil {
			t.Fatal(err)
		}
		got[m] = [2]int64{tc, n}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := totals(ps); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merchant_totals %v, want %v", got, want)
	}
}

// The settlements twin reads payments from Kafka and writes settlements
// transactionally: per merchant, the batches' amounts add up to the input,
// each batch's record once, and the running total ends at the sum.
func TestSQLExampleSettlements(t *testing.T) {
	k := testenv.Kafka(t, map[string]int32{"payments": 3, "settlements": 3})
	t.Setenv("KAFKA_BROKERS", strings.Join(k.Addrs(), ","))
	root := t.TempDir()
	ps := makePayments(0, 500, 6)
	produce := func(ps []payment) {
		var recs []*kgo.Record
		for _, p := range ps {
			v, _ := json.Marshal(p)
			recs = append(recs, &kgo.Record{Topic: "payments", Key: []byte(p.MerchantID), Value: v})
		}
		testenv.KafkaProduce(t, k, recs...)
	}
	produce(ps[:300])
	runSQLFile(t, "-checkpoint-root", root, exampleSQL("settlements.sql"))
	produce(ps[300:])
	runSQLFile(t, "-checkpoint-root", root, exampleSQL("settlements.sql"))

	type settlement struct {
		MerchantID  string `json:"merchant_id"`
		BatchID     int64  `json:"batch_id"`
		AmountCents int64  `json:"amount_cents"`
		Payments    int64  `json:"payments"`
		TotalCents  int64  `json:"total_cents"`
	}
	sum := map[string][2]int64{}
	last := map[string]settlement{}
	once := map[string]bool{}
	for _, r := range testenv.KafkaReadCommitted(t, k, "settlements", 0) {
		var s settlement
		if err := json.Unmarshal(r.Value, &s); err != nil || s.MerchantID == "" {
			continue // a batch marker
		}
		key := fmt.Sprintf("%s/%d", s.MerchantID, s.BatchID)
		if once[key] {
			t.Fatalf("settlement %s twice", key)
		}
		once[key] = true
		t0 := sum[s.MerchantID]
		sum[s.MerchantID] = [2]int64{t0[0] + s.AmountCents, t0[1] + s.Payments}
		if s.BatchID >= last[s.MerchantID].BatchID {
			last[s.MerchantID] = s
		}
	}
	want := totals(ps)
	if fmt.Sprint(sum) != fmt.Sprint(want) {
		t.Fatalf("settled %v, want %v", sum, want)
	}
	for m, s := range last {
		if s.TotalCents != want[m][0] {
			t.Fatalf("merchant %s: running total %d, want %d", m, s.TotalCents, want[m][0])
		}
	}
}

// onceflow run stops after the batch in flight when its context ends (the
// first SIGTERM), exit 0; explain then shows the committed offsets.
func TestSQLRunStopsOnSignalAndExplainShowsOffsets(t *testing.T) {
	in, table, root := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("LAKE_INPUT", in)
	t.Setenv("LAKE_TABLE", table)
	writePaymentFiles(t, in, 0, makePayments(0, 100, 3), 50)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "-trigger", "100ms", "-status", "127.0.0.1:0", "-checkpoint-root", root, exampleSQL("lake.sql")}, &stdout, &stderr)
	}()
	waitFor(t, &stdout, "progress: lake: batch 0, 100 rows in", done)
	waitFor(t, &stdout, "onceflow run: lake: status on http://127.0.0.1:", done)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after the signal: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop within 15s of the signal")
	}
	code, out, errOut := runCLI(context.Background(), "explain", "-checkpoint-root", root, exampleSQL("lake.sql"))
	if code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "committed: batch 0, files[") || strings.Contains(out, in) {
		t.Fatalf("explain shows no committed offsets, or shows the secret input path:\n%s", out)
	}
}
